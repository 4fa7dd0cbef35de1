import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applySignOff, planSignOff, type SignOffPlan } from '../../../src/ops/signoff.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;

/** Sign-off of a reconciliation run (ops/signoff.ts): the console's Reports page applies it. */
describe('sign-off', () => {
  const open = testStores('sqlite');
  async function setup() {
    const reports = mkdtempSync(join(tmpdir(), 'signoff-'));
    const runDir = join(reports, '2026-11-25', 'run-023000');
    mkdirSync(runDir, { recursive: true });
    writeFileSync(
      join(runDir, 'report.json'),
      JSON.stringify({
        asOf: '2026-11-25T08:30:00Z',
        exceptions: [
          { loanId: 'L1', reason: 'mapping' },
          { loanId: 'L2', reason: 'core_rejected' },
        ],
      }),
    );
    const { db } = await open();
    const deps = { signOffs: createConsoleStore(db), now: () => T0 };
    const plan = (as: string, note: unknown, dispositions?: Record<string, string>) =>
      planSignOff(reports, { day: '2026-11-25', run: 'run-023000', as, note, dispositions });
    return { db, deps, plan, runDir, reports };
  }

  it('refuses a preparer who leaves an exception without a disposition, naming it; writes nothing', async () => {
    const { db, plan } = await setup();
    expect(await plan('prepared', 'looked at them', { '0': 'resolved' })).toEqual({
      ok: false,
      kind: 'invalid',
      message:
        'dispositions.1: give a disposition for the exception of loan L2 (core_rejected): one of ' +
        'resolved, accepted, follow_up, not_an_issue',
      field: 'dispositions.1',
    });
    expect(await plan('prepared', '  ', {})).toMatchObject({ field: 'note' });
    expect(
      await planSignOff('/nonexistent', { day: '2026-11-25', run: 'run-023000', as: 'prepared', note: 'x' }),
    ).toMatchObject({ kind: 'not_found', message: 'no reconciliation run 2026-11-25/run-023000' });
    expect(await db.all('SELECT * FROM report_signoffs')).toEqual([]);
  });

  it('records the signatures with four eyes and writes signoff.json; a stale second signature is refused', async () => {
    const { db, deps, plan, runDir } = await setup();
    const prepared = (await plan('prepared', 'all explained', {
      '0': 'resolved',
      '1': 'follow_up',
    })) as SignOffPlan;
    expect(prepared.ok).toBe(true);
    // Two operators planned their preparation at once: the first one applied wins, the other is told who.
    const alsoPrepared = (await plan('prepared', 'me too', {
      '0': 'accepted',
      '1': 'accepted',
    })) as SignOffPlan;
    expect(await applySignOff(deps, prepared, 'olga')).toMatchObject({ ok: true });
    expect(await applySignOff(deps, alsoPrepared, 'ana')).toEqual({
      ok: false,
      kind: 'conflict',
      message: '2026-11-25/run-023000 was already prepared by olga',
    });
    const review = (await plan('reviewed', 'checked')) as SignOffPlan;
    expect(await applySignOff(deps, review, 'olga')).toMatchObject({ kind: 'forbidden' });
    expect(await applySignOff(deps, review, 'ivan')).toMatchObject({ ok: true });
    expect(
      await db.all('SELECT prepared_by, prepared_note, reviewed_by, reviewed_note FROM report_signoffs'),
    ).toEqual([
      { prepared_by: 'olga', prepared_note: 'all explained', reviewed_by: 'ivan', reviewed_note: 'checked' },
    ]);
    expect(
      await db.all("SELECT actor, reason FROM console_audit WHERE kind = 'signoff' ORDER BY seq"),
    ).toEqual([
      { actor: 'olga', reason: 'prepared 2026-11-25/run-023000: all explained' },
      { actor: 'ivan', reason: 'reviewed 2026-11-25/run-023000: checked' },
    ]);
    expect(JSON.parse(readFileSync(join(runDir, 'signoff.json'), 'utf8'))).toMatchObject({
      preparedBy: 'olga',
      reviewedBy: 'ivan',
      dispositions: [
        { index: 0, loanId: 'L1', disposition: 'resolved' },
        { index: 1, loanId: 'L2', disposition: 'follow_up' },
      ],
    });
  });
});
