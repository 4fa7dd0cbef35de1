import { mkdtempSync, readdirSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxState } from '../../../src/sandbox/state.js';
import { normaliseTin } from '../../../src/lib/customer-keys.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import {
  runCli,
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../../integration/pipeline/harness.js';

const SEED = 23;
const LOANS = 60;
const SHARE = 0.4;

interface Rec {
  type: string;
  externalId: string;
  fields: Record<string, unknown>;
}

function packages(coreDir: string): Map<string, Rec[]> {
  const out = new Map<string, Rec[]>();
  const dir = join(coreDir, 'packages');
  for (const name of readdirSync(dir)) {
    const r = JSON.parse(readFileSync(join(dir, name, 'records.json'), 'utf8')) as {
      loanId: string;
      records: Rec[];
    };
    out.set(r.loanId, r.records);
  }
  return out;
}

/**
 * Repeat borrowers through the file core, with the bank's customer extract holding some of them:
 * one customer record per distinct tax id, none for a tax id the extract already has, and the
 * relationship records name the CIF. Loans board 4 at a time, so loans sharing a tax id are in
 * flight together.
 */
describe('repeat borrowers into the file core with a customer extract', () => {
  let p: TestPlatform;
  const work = mkdtempSync(join(tmpdir(), 'extract-it-'));
  const extractPath = join(work, 'customers.csv');
  const data = new SandboxState(SEED, () => Date.UTC(2025, 5, 1), 'mixed', SHARE);
  data.generate(LOANS, { releaseRatio: 1 });

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: LOANS,
      releaseRatio: 1,
      seed: SEED,
      repeatBorrowers: SHARE,
      customerExtract: { path: extractPath, existingShare: 0.3 },
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
    });
  });
  afterAll(async () => {
    await p.close();
  });

  it(
    "writes one customer record per new tax id, none for the extract's, and relationships name the CIF",
    { timeout: 60_000 },
    async () => {
      const extract = new Map<string, string>();
      for (const line of readFileSync(extractPath, 'utf8').trim().split('\n').slice(1)) {
        const [cif, tin] = line.split(',');
        extract.set(normaliseTin(tin)!, cif!);
      }
      const tins = new Map<string, Set<string>>();
      for (const loan of data.loans.values())
        for (const b of loan.businesses)
          if (b.ein) tins.set(b.ein, (tins.get(b.ein) ?? new Set()).add(loan.fields.id));
      expect([...tins.values()].some((s) => s.size > 1)).toBe(true);

      // First without the extract in place: loans wait, nothing is created as "no existing customer".
      const cfgMissing = writeConnectorConfig(p, {
        windowMs: 2000,
        readsPerWindow: 100,
        writesPerWindow: 30,
        extra: {
          customers: {
            tinHashKey: 'file-core-test-key-0123456789',
            extract: { path: join(work, 'not-yet.csv') },
          },
          boarding: {
            concurrency: 4,
            retryBaseMs: 60_000,
            retryMaxMs: 60_000,
            maxAttempts: 10,
            shutdownTimeoutMs: 2000,
          },
        },
      });
      const first = await runCli([
        '--config',
        cfgMissing.configPath,
        'sync',
        '--once',
        '--json',
        '--settle-ms',
        '0',
      ]);
      expect(first.error).toBeNull();
      const s1 = JSON.parse(first.stdout) as {
        states: Record<string, number>;
        problems: Array<{ code: string; state: string }>;
      };
      expect(s1.states['acknowledged'] ?? 0).toBe(0);
      expect(
        s1.problems.some((q) => q.code === 'customers.extract_missing' && q.state === 'retry_wait'),
      ).toBe(true);
      expect(
        existsSync(join(cfgMissing.coreDir, 'packages'))
          ? readdirSync(join(cfgMissing.coreDir, 'packages'))
          : [],
      ).toEqual([]);
      const shown = await runCli([
        '--config',
        cfgMissing.configPath,
        'loans',
        'list',
        '--state',
        'retry_wait',
        '--json',
      ]);
      expect(shown.stdout).toContain('customers.extract_missing');

      const cfg = writeConnectorConfig(p, {
        windowMs: 2000,
        readsPerWindow: 100,
        writesPerWindow: 30,
        extra: { customers: { tinHashKey: 'file-core-test-key-0123456789', extract: { path: extractPath } } },
      });
      const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
      expect(r.error).toBeNull();
      const summary = JSON.parse(r.stdout) as {
        states: Record<string, number>;
        problems: Array<{ code: string; state: string }>;
      };
      expect(summary.problems.filter((q) => q.state === 'retry_wait')).toEqual([]);
      const pk = packages(cfg.coreDir);
      expect(pk.size).toBe(summary.states['acknowledged']);

      const customerRecords = new Map<string, number>();
      const boardedTins = new Set<string>();
      for (const [loanId, recs] of pk) {
        const loan = data.loans.get(loanId)!;
        for (const b of loan.businesses) if (b.ein) boardedTins.add(b.ein);
        for (const x of loan.people) boardedTins.add(x.ssn);
        for (const c of recs.filter((x) => x.type === 'customer')) {
          const t = String(c.fields['taxId']);
          customerRecords.set(t, (customerRecords.get(t) ?? 0) + 1);
        }
        // Every relationship names a CIF; an existing customer's is the extract's or an earlier record's.
        for (const rel of recs.filter((x) => x.type === 'relationship'))
          expect(typeof rel.fields['cif']).toBe('string');
        expect(recs.filter((x) => x.type === 'crossref').length).toBe(
          recs.filter((x) => x.type === 'relationship').length,
        );
      }
      let inExtract = 0;
      for (const t of boardedTins) {
        const n = customerRecords.get(t) ?? 0;
        if (extract.has(t)) {
          inExtract += 1;
          expect(n, `tax id …${t.slice(-4)} is in the extract`).toBe(0);
        } else {
          expect(n, `tax id …${t.slice(-4)}`).toBe(1);
        }
      }
      expect(inExtract).toBeGreaterThan(0);

      // The cross-reference is visible: customers list / show, and loans show's identity block.
      const listed = await runCli(['--config', cfg.configPath, 'customers', 'list', '--json']);
      const xref = JSON.parse(listed.stdout) as Array<{ entityId: string; cif: string; matchedBy: string }>;
      expect(new Set(xref.map((x) => x.matchedBy))).toEqual(
        new Set(['created', 'tin', 'crossref'].filter((m) => xref.some((x) => x.matchedBy === m))),
      );
      const fromExtract = xref.find((x) => x.matchedBy === 'tin' && [...extract.values()].includes(x.cif))!;
      expect(fromExtract).toBeDefined();
      const created = await runCli([
        '--config',
        cfg.configPath,
        'customers',
        'list',
        '--matched-by',
        'created',
        '--json',
      ]);
      const createdRows = JSON.parse(created.stdout) as Array<{ cif: string; matchedBy: string }>;
      expect(createdRows.length).toBeGreaterThan(0);
      expect(createdRows.every((x) => x.matchedBy === 'created' && /^\d+$/.test(x.cif))).toBe(true);
      // A repeat borrower under a new entity id shares its CIF with the earlier entity.
      const byCif = new Map<string, string[]>();
      for (const x of xref) byCif.set(x.cif, [...(byCif.get(x.cif) ?? []), x.entityId]);
      const shared = [...byCif].find(([, ids]) => ids.length > 1);
      expect(shared).toBeDefined();
      const show = await runCli(['--config', cfg.configPath, 'customers', 'show', shared![0]]);
      for (const id of shared![1]) expect(show.stdout).toContain(id);
      const loanShown = await runCli(['--config', cfg.configPath, 'loans', 'show', [...pk.keys()][0]!]);
      expect(loanShown.stdout).toContain('identity (customers):');
      expect(
        (await runCli(['--config', cfg.configPath, 'customers', 'list', '--matched-by', 'nope'])).code,
      ).toBe(2);

      // The reconciliation report: new and matched customers per day.
      const outDir = join(work, 'report');
      expect((await runCli(['--config', cfg.configPath, 'reconcile', '--out', outDir])).error).toBeNull();
      const report = JSON.parse(readFileSync(join(outDir, 'report.json'), 'utf8')) as {
        customers: {
          days: unknown[];
          totals: { created: number; matchedByTin: number; matchedByCrossref: number };
        };
      };
      const records = [...pk.values()].flat();
      expect(report.customers.totals.created).toBe(records.filter((x) => x.type === 'customer').length);
      expect(
        report.customers.totals.created +
          report.customers.totals.matchedByTin +
          report.customers.totals.matchedByCrossref,
      ).toBe(records.filter((x) => x.type === 'relationship').length);
      expect(report.customers.days.length).toBeGreaterThan(0);
      expect(readFileSync(join(outDir, 'report.html'), 'utf8')).toContain('Customers: new and matched');

      // The store keeps hashes, never a tax id.
      const db = openDatabase(cfg.dbPath, { readonly: true });
      try {
        const dump =
          JSON.stringify(db.prepare('SELECT * FROM customers').all()) +
          JSON.stringify(db.prepare('SELECT * FROM customer_xref').all()) +
          JSON.stringify(db.prepare('SELECT * FROM loan_customers').all());
        for (const t of boardedTins) expect(dump).not.toContain(t);
      } finally {
        db.close();
      }
    },
  );
});
