/**
 * Issue 37: a board's cost must not grow with the loans boarded before it. Every statement the
 * per-loan repository calls run (a loan's transitions and events, its acknowledgement key, its
 * numbers, customer match and the CIF fill-in) is collected through StoreDb.onStatement and explained on both engines: none may scan
 * a table that grows with the loans. SQLite: no `SCAN <table>` in EXPLAIN QUERY PLAN; PostgreSQL:
 * with sequential scans disabled (tables this small are scanned otherwise), no `Seq Scan`, which
 * is then left only where no index can serve the statement.
 */
import { describe, expect, it } from 'vitest';
import { createBoardingStore } from '../../../src/store/index.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;
/** Tables with a row (or a few) per loan or per customer. */
const GROWING = [
  'loans',
  'loan_events',
  'loan_customers',
  'customers',
  'customer_xref',
  'bank_numbers',
  'idempotency_keys',
];

describe.each(STORE_ENGINES)('per-loan statements on %s', (engine) => {
  const open = testStores(engine);

  it.skipIf(engineSkipped(engine))(
    'filling in a new customer CIF no longer scans loan_customers (it looked rows up by tin_hash without an index)',
    async () => {
      const { db } = await open();
      const s = createBoardingStore(db);
      const seen = new Map<string, readonly unknown[]>();
      // Rows of earlier loans first (unobserved), then one board's calls, observed.
      const board = async (i: number): Promise<void> => {
        const loanId = `loan_${i}`;
        const tin = `tin_${i}`;
        const entity = `ent_${i}`;
        await s.loans.insert(
          { id: loanId, state: 'queued', patch: { loanNumber: `N${i}`, releaseMarker: `b${i}` } },
          T0 + i,
        );
        await s.loans.transition(loanId, { to: 'fetched', expectedFrom: 'queued' }, T0 + i);
        await s.numbers.allocate('account', loanId, T0 + i);
        await s.customers.claim(tin, null, loanId, T0 + i);
        const cif = (await s.numbers.allocate('customer', tin, T0 + i)).number;
        await s.customers.resolved(
          {
            loanId,
            entityId: entity,
            cif: null,
            tinHash: tin,
            matchedBy: 'created',
            existing: false,
            nameAgrees: null,
          },
          T0 + i,
        );
        await s.customers.byTin(tin);
        await s.customers.xref(entity);
        await s.customers.markWritten(loanId, new Map([[tin, cif]]), T0 + i);
        await s.customers.setCif(tin, cif, T0 + i);
        await s.customers.forLoan(loanId);
        await s.loans.transition(loanId, { to: 'mapped', expectedFrom: 'fetched' }, T0 + i);
        await s.loans.transition(
          loanId,
          {
            to: 'written',
            expectedFrom: 'mapped',
            also: () => s.keys.ensure(`ack:${loanId}`, 'ack', loanId, T0 + i).then(() => undefined),
          },
          T0 + i,
        );
        await s.keys.get(`ack:${loanId}`);
        await s.loans.recordEvent(loanId, { kind: 'warning', reason: 'review' }, T0 + i);
        await s.loans.transition(
          loanId,
          {
            to: 'acknowledged',
            expectedFrom: 'written',
            also: () => s.keys.complete(`ack:${loanId}`, 200, { ok: true }, T0 + i),
          },
          T0 + i,
        );
        await s.loans.get(loanId);
      };
      for (let i = 0; i < 20; i++) await board(i);
      db.onStatement = (text, params) => {
        seen.set(text, params);
      };
      await board(20);
      db.onStatement = undefined;
      expect(seen.size).toBeGreaterThan(10);
      expect([...seen.keys()].some((t) => /UPDATE loan_customers SET cif/.test(t))).toBe(true);

      const scans: string[] = [];
      await db.write(
        async () => {
          if (engine === 'postgres') await db.run('SET LOCAL enable_seqscan = off');
          for (const text of [...seen.keys()]) {
            if (/^\s*(SAVEPOINT|RELEASE|ROLLBACK|BEGIN|COMMIT)/i.test(text)) continue;
            const params = seen.get(text) ?? [];
            const plan =
              engine === 'sqlite'
                ? (await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params))
                    .map((r) => r.detail)
                    .join(' | ')
                : (await db.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, params))
                    .map((r) => r['QUERY PLAN'])
                    .join(' | ');
            const scan = engine === 'sqlite' ? /\bSCAN (\w+)/g : /Seq Scan on (\w+)/g;
            for (const m of plan.matchAll(scan))
              if (GROWING.includes(m[1] as string))
                scans.push(`${text.replace(/\s+/g, ' ').slice(0, 120)} → ${plan}`);
          }
        },
        { unfenced: true },
      );
      expect(scans).toEqual([]);
    },
  );
});
