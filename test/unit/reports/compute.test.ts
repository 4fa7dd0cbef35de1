import { describe, expect, it } from 'vitest';
import { computeReconciliation, type ReconcileSources } from '../../../src/reports/compute.js';
import type { CoreLoanRow, FundedRow, PlatformLoanRow, StoreLoanRow } from '../../../src/reports/types.js';

const AS_OF = Date.parse('2026-11-20T18:00:00Z'); // Friday, noon in Chicago
const DAY = 86_400_000;

function store(id: string, state: string, extra: Partial<StoreLoanRow> = {}): StoreLoanRow {
  return {
    id,
    loanNumber: `LN-${id}`,
    state,
    quarantineReason: null,
    centsAmount: 100_000,
    productId: 'p1',
    coreReference: state === 'acknowledged' || state === 'written' ? `core-${id}` : null,
    mappingVersion: 'generic@1',
    fundedAtIso: null,
    releasedAtIso: new Date(AS_OF - DAY).toISOString(),
    boardedAtIso: null,
    writtenAt: state === 'acknowledged' || state === 'written' ? AS_OF - DAY : null,
    acknowledgedAt: state === 'acknowledged' ? AS_OF - DAY : null,
    lastErrorCode: null,
    lastErrorMessage: null,
    createdAt: AS_OF - DAY,
    updatedAt: AS_OF - DAY,
    ...extra,
  };
}

function plat(id: string, extra: Partial<PlatformLoanRow> = {}): PlatformLoanRow {
  return {
    id,
    loanNumber: `LN-${id}`,
    centsAmount: 100_000,
    bpsRate: 725,
    maturityDate: '2031-11-20T06:00:00Z',
    firstPaymentDate: '2026-12-20T06:00:00Z',
    paymentFrequency: 'monthly',
    productId: 'p1',
    releasedAt: new Date(AS_OF - 2 * DAY).toISOString(),
    boardedAt: new Date(AS_OF - DAY).toISOString(),
    ...extra,
  };
}

function core(id: string, extra: Partial<CoreLoanRow> = {}): CoreLoanRow {
  return {
    id,
    coreReference: `core-${id}`,
    mappingVersion: 'generic@1',
    centsAmount: 100_000,
    bpsRate: 725,
    maturityDate: '2031-11-20',
    firstPaymentDate: '2026-12-20',
    paymentFrequency: 'Monthly',
    productId: 'p1',
    ...extra,
  };
}

function sources(
  s: StoreLoanRow[],
  p: PlatformLoanRow[],
  c: CoreLoanRow[],
  funded: FundedRow[] | null,
  list = true,
): ReconcileSources {
  const known = new Set(s.map((r) => r.id));
  return {
    storeRows: () => s,
    storeCount: () => s.length,
    storeKnows: (id) => known.has(id),
    async *platformBoarded() {
      await Promise.resolve();
      yield* p;
    },
    ...(list
      ? {
          async *coreList() {
            await Promise.resolve();
            yield* c;
          },
        }
      : {}),
    coreFind: (id) => Promise.resolve(c.find((r) => r.id === id) ?? null),
    funded: () => funded,
  };
}

const opts = { asOfMs: AS_OF, timeZone: 'America/Chicago', fundedNotReleasedDays: 5, since: null };

describe('computeReconciliation', () => {
  it('ties when platform, connector and core agree (dates compared in the bank zone)', async () => {
    const ids = ['a', 'b', 'c'];
    const r = await computeReconciliation(
      sources(
        ids.map((id) => store(id, 'acknowledged')),
        ids.map((id) => plat(id)),
        ids.map((id) => core(id)),
        [],
      ),
      opts,
    );
    expect(r.exceptions).toEqual([]);
    expect(r.tieOut.every((t) => t.ties)).toBe(true);
    expect(r.totals.released).toEqual({ count: 3, cents: 300_000, unknownAmount: 0 });
    expect(r.totals.writtenToCore.count).toBe(3);
    expect(r.totals.acknowledgedOnPlatform.cents).toBe(300_000);
    expect(r.mappingVersions).toEqual([{ version: 'generic@1', loans: 3 }]);
  });

  it('finds every kind of exception with its age bucket', async () => {
    const s = [
      store('ok', 'acknowledged'),
      store('missing-core', 'acknowledged'),
      store('awaiting-ack', 'written'),
      store('q', 'quarantined', {
        quarantineReason: 'tin_incomplete',
        lastErrorMessage: 'only the last 4 digits',
        updatedAt: AS_OF - 10 * DAY,
      }),
      store('stuck', 'retry_wait', {
        releasedAtIso: new Date(AS_OF - 4 * DAY).toISOString(),
        lastErrorMessage: 'platform 503',
      }),
      store('mismatch-state', 'written'),
      store('diff', 'acknowledged'),
      store('skipped', 'skipped'),
      store('lost', 'written'),
    ];
    const p = [
      plat('ok'),
      plat('missing-core'),
      plat('mismatch-state'),
      plat('diff', { centsAmount: 100_001, bpsRate: 700 }),
      plat('stranger'),
    ];
    const c = [
      core('ok'),
      core('awaiting-ack'),
      core('mismatch-state'),
      core('diff', { bpsRate: 725 }),
      core('orphan'),
    ];
    const funded: FundedRow[] = [
      { loanId: 'never-released', fundedAt: AS_OF - 14 * DAY },
      { loanId: 'recently-funded', fundedAt: AS_OF - DAY },
      { loanId: 'ok', fundedAt: AS_OF - 30 * DAY },
    ];
    const streamed: string[] = [];
    const r = await computeReconciliation(sources(s, p, c, funded), {
      ...opts,
      onException: (e) => {
        streamed.push(`${e.reason}:${e.loanId}`);
      },
    });
    const got = r.exceptions.map((e) => `${e.reason}:${e.loanId}${e.field ? `:${e.field}` : ''}`).sort();
    expect(got).toEqual(
      [
        'acknowledged_missing_in_core:missing-core',
        'in_core_not_acknowledged:awaiting-ack',
        'quarantined:q',
        'stuck_pending:stuck',
        'state_mismatch:mismatch-state',
        'field_mismatch:diff:centsAmount',
        'field_mismatch:diff:bpsRate',
        'acknowledged_unknown_to_connector:stranger',
        'acknowledged_missing_in_core:stranger',
        'in_core_unknown_to_connector:orphan',
        'funded_not_released:never-released',
        'written_missing_in_core:lost',
      ].sort(),
    );
    expect(streamed).toHaveLength(r.exceptions.length);
    const q = r.exceptions.find((e) => e.reason === 'quarantined');
    expect(q?.ageBucket).toBe('>5');
    expect(q?.detail).toContain('tin_incomplete: only the last 4 digits');
    const amount = r.exceptions.find((e) => e.field === 'centsAmount');
    expect(amount).toMatchObject({ platformValue: '1000.01', coreValue: '1000.00' });
    expect(r.exceptions.find((e) => e.reason === 'stuck_pending')?.ageBucket).toBe('2-5');
    expect(r.exceptions.find((e) => e.reason === 'funded_not_released')?.ageBusinessDays).toBe(10);
    expect(r.aging.totals['0-1'] + r.aging.totals['2-5'] + r.aging.totals['>5']).toBe(r.exceptions.length);

    // Ledger always ties; core and platform lines show the differences the exceptions explain.
    const [ledger, coreLine, platformLine] = r.tieOut;
    expect(ledger?.ties).toBe(true);
    expect(r.totals.released.count).toBe(9);
    expect(r.totals.pending.count).toBe(1);
    expect(r.totals.writtenAwaitingAck.count).toBe(3);
    expect(r.totals.acknowledged.count).toBe(3);
    expect(r.totals.skipped.count).toBe(1);
    // 5 in core vs 3 acknowledged + 3 written: one short ('lost'). Without 'lost' the totals would
    // tie because 'missing-core' and 'orphan' cancel out — which is why the exceptions list, not
    // the totals alone, is what gets signed off.
    expect(coreLine?.left.count).toBe(5);
    expect(coreLine?.right.count).toBe(6);
    expect(coreLine?.explainedBy).toContain('written_missing_in_core');
    expect(platformLine?.left.count).toBe(5);
    expect(platformLine?.right.count).toBe(3);
    expect(platformLine?.ties).toBe(false);
    expect(platformLine?.differenceCount).toBe(2);
  });

  it('treats a core field it cannot read back as not comparable, not as a difference', async () => {
    const r = await computeReconciliation(
      sources(
        [store('a', 'acknowledged')],
        [plat('a')],
        [core('a', { productId: null, paymentFrequency: null })],
        [],
      ),
      opts,
    );
    expect(r.exceptions).toEqual([]);
  });

  it('looks loans up one by one when the core cannot list, and says what it could not check', async () => {
    const r = await computeReconciliation(
      sources(
        [store('a', 'acknowledged'), store('b', 'acknowledged')],
        [plat('a'), plat('b')],
        [core('a'), core('orphan')],
        null,
        false,
      ),
      opts,
    );
    expect(r.exceptions.map((e) => `${e.reason}:${e.loanId}`)).toEqual(['acknowledged_missing_in_core:b']);
    expect(r.notes.join(' ')).toMatch(/cannot list/);
    expect(r.notes.join(' ')).toMatch(/funded but not released/);
  });

  it('with --since, ignores core loans the connector knows from before the bound', async () => {
    const s = sources([store('new', 'acknowledged')], [plat('new')], [core('new'), core('old')], []);
    const knowsOld: ReconcileSources = { ...s, storeKnows: (id) => id === 'new' || id === 'old' };
    const r = await computeReconciliation(knowsOld, { ...opts, since: '2026-11-19T00:00:00Z' });
    expect(r.exceptions).toEqual([]);
  });

  it('stops when aborted', async () => {
    const many = Array.from({ length: 3000 }, (_, i) => store(`l${i}`, 'acknowledged'));
    const ac = new AbortController();
    ac.abort(new Error('shutdown'));
    await expect(
      computeReconciliation(sources(many, [], [], []), { ...opts, signal: ac.signal }),
    ).rejects.toThrow('shutdown');
  });

  it('lists exceptions in the order the sources first named the loans, not sorted by id (connector, then platform, then core)', async () => {
    const r = await computeReconciliation(
      sources([store('z', 'quarantined'), store('a', 'quarantined')], [plat('m')], [core('b')], []),
      opts,
    );
    expect(r.exceptions.map((e) => `${e.reason}:${e.loanId}`)).toEqual([
      'quarantined:z',
      'quarantined:a',
      'acknowledged_missing_in_core:m',
      'acknowledged_unknown_to_connector:m',
      'in_core_unknown_to_connector:b',
    ]);
  });

  it('with keepExceptions keeps only the first ones but counts, ages and streams every exception', async () => {
    const many = Array.from({ length: 1200 }, (_, i) => store(`q${i}`, 'quarantined'));
    const streamed: string[] = [];
    const r = await computeReconciliation(sources(many, [], [], []), {
      ...opts,
      keepExceptions: 3,
      onException: (e) => void streamed.push(e.loanId),
    });
    expect(r.exceptions.map((e) => e.loanId)).toEqual(['q0', 'q1', 'q2']);
    expect(r.exceptionCount).toBe(1200);
    expect(r.exceptionsByReason).toEqual({ quarantined: 1200 });
    expect(r.aging.totals['0-1'] + r.aging.totals['2-5'] + r.aging.totals['>5']).toBe(1200);
    expect(streamed).toHaveLength(1200);
    expect(streamed[1199]).toBe('q1199');
    expect(r.loansSeen).toBe(1200);
  });

  it('looks loans up in the core one by one across pages of the working table when the core cannot list', async () => {
    const ids = Array.from({ length: 1300 }, (_, i) => `k${i}`);
    const asked: string[] = [];
    const s = sources(
      ids.map((id) => store(id, 'acknowledged')),
      ids.map((id) => plat(id)),
      ids.slice(1).map((id) => core(id)),
      [],
      false,
    );
    const r = await computeReconciliation({ ...s, coreFind: (id) => (asked.push(id), s.coreFind(id)) }, opts);
    expect(new Set(asked).size).toBe(1300);
    expect(r.exceptions.map((e) => `${e.reason}:${e.loanId}`)).toEqual(['acknowledged_missing_in_core:k0']);
    expect(r.totals.writtenToCore.count).toBe(1299);
  });
});

describe('command hints in exception details', () => {
  it('regression: a quarantined loan whose id has a space and a quote got `loans retry` hints without shell quoting', async () => {
    const id = "ln 7'; rm -rf x";
    const r = await computeReconciliation(
      sources([store(id, 'quarantined', { quarantineReason: 'validation' })], [], [], []),
      opts,
    );
    const q = r.exceptions.find((e) => e.reason === 'quarantined');
    expect(q?.detail).toContain(`\`loans retry 'ln 7'\\''; rm -rf x'\``);
    expect(q?.detail).toContain(`\`loans skip 'ln 7'\\''; rm -rf x' --reason …\``);
  });
});
