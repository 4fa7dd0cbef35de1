import { clockReading } from '../../support/fake-clock.js';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileCore } from '../../../src/core/file/file-core.js';
import { parseCsv } from '../../../src/lib/csv.js';
import { CoreRejectedError } from '../../../src/core/port.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { STORE_ENGINES, engineSkipped, openTestStore, type TestStore } from '../../support/store-engines.js';
import { TEST_LAYOUT_YAML, testBatches, testLayout } from './batches-support.js';
import { makePackage } from './support.js';

let dir: string;
let db: StoreDb;
let now = Date.parse('2025-03-14T15:00:00Z'); // 10:00 in Chicago; the cut-off is 18:00 there
const clock = clockReading(() => now);
const CUTOFF_14 = Date.parse('2025-03-14T23:00:00Z'); // 18:00 CDT

function core(layout = testLayout()): FileCore {
  return new FileCore({
    dir,
    batches: testBatches(dir, clock, { db, layout }),
    timeZone: 'America/Chicago',
    logger: silentLogger(),
    clock,
  });
}

function records(
  loanId: string,
  loan: Record<string, unknown> = {},
  name = 'Acme, "Tools" LLC',
): MappedRecord[] {
  return [
    { type: 'customer', externalId: `biz_${loanId}`, fields: { name, kind: 'business' } },
    { type: 'loan', externalId: loanId, fields: { principalCents: 125000050, rateBps: 725, ...loan } },
  ];
}

const board = (c: FileCore, loanId: string, recs = records(loanId), cents: number | null = 125000050) =>
  c.board(makePackage(loanId, recs, [], { source: { centsAmount: cents } }));

async function lines(batchId: string, file: string): Promise<string[]> {
  return (await readFile(join(dir, 'batches', batchId, file), 'utf8')).split('\n').filter((l) => l !== '');
}

describe.each(STORE_ENGINES)('on %s', (engine) => {
  let t: TestStore | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'file-batches-'));
    now = Date.parse('2025-03-14T15:00:00Z');
    if (engineSkipped(engine)) return;
    // SQLite: a file, as the connector has it; PostgreSQL: a fresh database.
    t = await openTestStore(engine, join(dir, 'state.sqlite'));
    db = t.db;
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  describe.skipIf(engineSkipped(engine))('sealed batches', () => {
    it('keeps column positions on two days when an optional field is empty on one of them', async () => {
      const c = core();
      await board(c, 'loan_var', records('loan_var', { rateIndex: 'PRIME', note: 'n' }));
      now = CUTOFF_14 + 60_000;
      expect(await c.sealDue()).toEqual(['2025-03-14-001']);
      await board(c, 'loan_fix'); // no rateIndex, no note that day
      now = Date.parse('2025-03-15T23:00:00Z') + 60_000;
      expect(await c.sealDue()).toEqual(['2025-03-15-001']);

      const day1 = await lines('2025-03-14-001', 'loan.csv');
      const day2 = await lines('2025-03-15-001', 'loan.csv');
      expect(day1[0]).toBe('action,loan_id,principal_cents,rate_bps,rate_index,note');
      expect(day2[0]).toBe(day1[0]);
      expect(day1[1]).toBe('A,loan_var,125000050,725,PRIME,n');
      expect(day2[1]).toBe('A,loan_fix,125000050,725,,');
      expect(day2[1]!.split(',')).toHaveLength(day1[1]!.split(',').length);
    });

    it('keeps fixed-width positions and byte widths on both days (UTF-8 names padded by bytes)', async () => {
      const layout = testLayout(FIXED_UTF8);
      const c = core(layout);
      await board(c, 'loan_1', records('loan_1', { rateIndex: 'PRIME' }, 'CAFÉ OLÉ LLC'));
      now = CUTOFF_14 + 1;
      await c.sealDue();
      await board(c, 'loan_2', records('loan_2', {}, 'Plain Name Inc'));
      now = Date.parse('2025-03-15T23:00:00Z') + 1;
      await c.sealDue();
      for (const id of ['2025-03-14-001', '2025-03-15-001']) {
        const raw = await readFile(join(dir, 'batches', id, 'LOANS.DAT'));
        const recs = raw
          .toString('latin1')
          .split('\r\n')
          .filter((l) => l !== '');
        expect(recs.length).toBe(3); // header, one loan, trailer
        for (const r of recs) expect(Buffer.byteLength(r, 'latin1')).toBe(60);
      }
      const custRaw = await readFile(join(dir, 'batches', '2025-03-14-001', 'CUST.DAT'));
      const [rec] = custRaw
        .toString('utf8')
        .split('\n')
        .filter((l) => l !== '');
      expect(Buffer.byteLength(rec!, 'utf8')).toBe(40);
      expect(rec).toBe(`Aloan_1    CAFÉ OLÉ LLC${' '.repeat(15)}`); // 12 characters, 14 bytes: 15 bytes of padding
      const day1 = (await readFile(join(dir, 'batches', '2025-03-14-001', 'LOANS.DAT'), 'latin1')).split(
        '\r\n',
      );
      const day2 = (await readFile(join(dir, 'batches', '2025-03-15-001', 'LOANS.DAT'), 'latin1')).split(
        '\r\n',
      );
      // principal at bytes 12-26 on both days; the empty rate index is blanks, nothing shifts
      expect(day1[1]!.slice(11, 26)).toBe('000000125000050');
      expect(day2[1]!.slice(11, 26)).toBe('000000125000050');
      expect(day1[1]!.slice(26, 34)).toBe('PRIME   ');
      expect(day2[1]!.slice(26, 34)).toBe('        ');
      expect(day1[2]).toBe(`T000000001000000000125000050.00${' '.repeat(29)}`); // exact total of the field, 2 decimals
    });

    it('appends without writing files; the seal writes the files, then control.csv, then the trigger file', async () => {
      const c = core();
      for (let i = 0; i < 5; i += 1) await board(c, `loan_${i}`);
      expect(existsSync(join(dir, 'batches'))).toBe(false);
      now = CUTOFF_14;
      await c.sealDue();
      const bdir = join(dir, 'batches', '2025-03-14-001');
      expect((await readdir(bdir)).sort()).toEqual(['READY', 'control.csv', 'customer.csv', 'loan.csv']);
      const [files, control, trigger] = await Promise.all([
        stat(join(bdir, 'loan.csv')),
        stat(join(bdir, 'control.csv')),
        stat(join(bdir, 'READY')),
      ]);
      expect(files.mtimeMs).toBeLessThanOrEqual(control.mtimeMs);
      expect(control.mtimeMs).toBeLessThanOrEqual(trigger.mtimeMs);
      const ctl = await lines('2025-03-14-001', 'control.csv');
      expect(ctl).toContain('2025-03-14-001,*,loans,5,5,,');
      expect(ctl.at(-1)).toBe('2025-03-14-001,*,principal_total_cents,625000250,,,');
      expect(await db.all(`SELECT status, principal_cents AS p FROM file_batches`)).toEqual([
        { status: 'sealed', p: '625000250' },
      ]);
      expect(await c.batches!.store.counts('2025-03-14-001')).toEqual({
        loans: 5,
        corrections: 0,
        records: 10,
      });
    });

    it('streams a large batch to its files without holding the state database busy across an await (other statements run during the seal)', async () => {
      // Rows put straight into the open batch (a board's package files are not what is measured here).
      const b = testBatches(dir, clock, { db });
      const n = 300;
      for (let i = 0; i < n; i += 1) {
        const id = `loan_${String(i).padStart(5, '0')}`;
        await b.append(b.check(id, records(id, { note: 'x'.repeat(2000) })), '125000050');
      }
      now = CUTOFF_14;
      // Another user of the same connection (the receiver, the boarding cycle) keeps querying while the seal runs.
      let queries = 0;
      let failure: unknown = null;
      let sealing = true;
      const other = (async () => {
        while (sealing) {
          try {
            // SQLite: straight on the connection, which a transaction held across an await would make fail.
            if (db.sqlite) db.sqlite.prepare('SELECT COUNT(*) AS n FROM file_batch_loans').get();
            else await db.get('SELECT COUNT(*) AS n FROM file_batch_loans');
            queries += 1;
          } catch (err) {
            failure = err;
          }
          await new Promise<void>((r) => setImmediate(r));
        }
      })();
      const sealed = await b.sealDue();
      sealing = false;
      await other;
      expect(failure).toBeNull();
      expect(queries).toBeGreaterThan(0);
      expect(sealed).toEqual(['2025-03-14-001']);
      const loan = await lines('2025-03-14-001', 'loan.csv');
      expect(loan).toHaveLength(n + 1);
      expect(loan[1]!.split(',')[1]).toBe('loan_00000');
      expect(loan.at(-1)!.split(',')[1]).toBe(`loan_${String(n - 1).padStart(5, '0')}`);
      const ctl = await lines('2025-03-14-001', 'control.csv');
      const bytes = (await stat(join(dir, 'batches', '2025-03-14-001', 'loan.csv'))).size;
      expect(ctl.find((l) => l.includes(',loan.csv,'))).toMatch(
        new RegExp(`^2025-03-14-001,loan\\.csv,loan,${n},${n},${bytes},[0-9a-f]{64}$`),
      );
    });

    it('a board after the cut-off seals the open batch first and goes to the next one; the sealed files never change', async () => {
      const c = core();
      await board(c, 'loan_1');
      now = CUTOFF_14 + 1000;
      await board(c, 'loan_2'); // no daemon tick in between: the board itself seals
      const sealed = join(dir, 'batches', '2025-03-14-001');
      const before = await readFile(join(sealed, 'loan.csv'));
      const mtime = (await stat(join(sealed, 'loan.csv'))).mtimeMs;
      expect(before.toString()).not.toContain('loan_2');
      await board(c, 'loan_3');
      await c.sealDue();
      expect((await readFile(join(sealed, 'loan.csv'))).equals(before)).toBe(true);
      expect((await stat(join(sealed, 'loan.csv'))).mtimeMs).toBe(mtime);
      expect(await db.all(`SELECT id, status FROM file_batches ORDER BY id`)).toEqual([
        { id: '2025-03-14-001', status: 'sealed' },
        { id: '2025-03-15-001', status: 'open' },
      ]);
    });

    it('re-boarding a loan in the open batch replaces its rows (never a second copy); identical is a no-op', async () => {
      const c = core();
      const batches = c.batches!;
      await board(c, 'loan_1');
      expect((await batches.append(batches.check('loan_1', records('loan_1')), '125000050')).outcome).toBe(
        'unchanged',
      );
      expect(
        (await batches.append(batches.check('loan_1', records('loan_1', { note: 'fixed' })), '125000050'))
          .outcome,
      ).toBe('replaced');
      now = CUTOFF_14;
      await c.sealDue();
      expect(await lines('2025-03-14-001', 'loan.csv')).toEqual([
        'action,loan_id,principal_cents,rate_bps,rate_index,note',
        'A,loan_1,125000050,725,,fixed',
      ]);
    });

    it('renders a board once: the batch holds the lines check() rendered, not a second rendering (regression: append rendered again)', async () => {
      const c = core();
      // A value that changes at each read shows how many times the layout read it, and which read the batch kept.
      let reads = 0;
      const recs = records('loan_once');
      Object.defineProperty(recs[0]!.fields, 'name', { enumerable: true, get: () => `Name ${++reads}` });
      await board(c, 'loan_once', recs);
      now = CUTOFF_14;
      await c.sealDue();
      // Read 1 is the render at check(); records.json of the package is the only other reader.
      expect(await lines('2025-03-14-001', 'customer.csv')).toEqual([
        'action,loan_id,customer_id,name,kind',
        'A,loan_once,biz_loan_once,Name 1,business',
      ]);
      expect(reads).toBe(2);
      const pkg = JSON.parse(await readFile(join(dir, 'packages', 'loan_once', 'records.json'), 'utf8')) as {
        records: MappedRecord[];
      };
      expect(pkg.records[0]!.fields['name']).toBe('Name 2');
    });

    it('check() returns the rows append stores, for a first board and for a correction (one rendering, both kinds)', async () => {
      const c = core();
      const batches = c.batches!;
      const prepared = batches.check('loan_1', records('loan_1'));
      expect(prepared.rows.new['loan.csv']!.lines).toEqual(['A,loan_1,125000050,725,,']);
      expect(prepared.rows.correction['loan.csv']!.lines).toEqual(['C,loan_1,125000050,725,,']);
      expect(prepared.recordCount).toEqual({ new: 2, correction: 2 });
      expect((await batches.append(prepared, '125000050')).kind).toBe('new');
      const stored = (await db.get(
        `SELECT batch_id AS b, rows_json AS j, record_count AS n FROM file_batch_loans WHERE loan_id = 'loan_1'`,
      )) as { b: string; j: string; n: number };
      // Stored encrypted with the batch's key (never the lines in clear), and read back as rendered.
      expect(stored.j).not.toContain('125000050');
      expect(batches.rowsOf(stored.b, stored.j)).toEqual(prepared.rows.new);
      expect(stored.n).toBe(2);
      now = CUTOFF_14 + 60_000;
      await batches.sealDue();
      const again = batches.check('loan_1', records('loan_1', { note: 'fixed' }));
      expect((await batches.append(again, '125000050')).kind).toBe('correction');
      const corr = (await db.get(
        `SELECT batch_id AS b, rows_json AS j FROM file_batch_loans WHERE loan_id = 'loan_1' AND kind = 'correction'`,
      )) as { b: string; j: string };
      expect(batches.rowsOf(corr.b, corr.j)).toEqual(again.rows.correction);
      expect(again.rows.correction['loan.csv']!.lines).toEqual(['C,loan_1,125000050,725,,fixed']);
    });

    it("a date column shows an instant's day in the bank's time zone (the batch's cut-off zone), not the UTC day", async () => {
      const layout = testLayout(`files:
    - name: loan.csv
      record: loan
      format: csv
      columns:
        - { name: loan_id, source: externalId }
        - { name: funded, field: fundedAt, dateFormat: yyyymmdd }
  `);
      const c = core(layout);
      await board(c, 'loan_late', records('loan_late', { fundedAt: '2025-03-14T04:30:00Z' })); // 23:30 CDT on the 13th
      now = CUTOFF_14;
      await c.sealDue();
      expect(await lines('2025-03-14-001', 'loan.csv')).toEqual(['loan_id,funded', 'loan_late,20250313']);
    });

    it('control.csv escapes its fields: a record type with a comma, a quote and a newline round-trips through a CSV parser (regression: joined with commas)', async () => {
      const type = 'loan, "big"\nline';
      const layout = testLayout(`files:
    - name: loan.csv
      record: ${JSON.stringify(type)}
      format: csv
      columns:
        - { name: loan_id, source: externalId }
  `);
      const c = core(layout);
      await board(c, 'loan_1', [{ type, externalId: 'loan_1', fields: {} }]);
      now = CUTOFF_14;
      await c.sealDue();
      const rows = parseCsv(
        await readFile(join(dir, 'batches', '2025-03-14-001', 'control.csv'), 'utf8'),
      ).map((r) => r.cells);
      expect(rows[0]).toEqual([
        'batch_id',
        'file',
        'record_type',
        'record_count',
        'loan_count',
        'bytes',
        'sha256',
      ]);
      expect(rows[1]!.slice(0, 5)).toEqual(['2025-03-14-001', 'loan.csv', type, '1', '1']);
      expect(rows.slice(2)).toEqual([
        ['2025-03-14-001', '*', 'loans', '1', '1', '', ''],
        ['2025-03-14-001', '*', 'corrections', '0', '0', '', ''],
        ['2025-03-14-001', '*', 'principal_total_cents', '125000050', '', '', ''],
      ]);
      expect(rows.every((r) => r.length === 7)).toBe(true);
    });

    it('re-boarding a loan whose batch is sealed emits a correction record into the open batch', async () => {
      const c = core();
      await board(c, 'loan_1');
      now = CUTOFF_14;
      await c.sealDue();
      await board(c, 'loan_1', records('loan_1', { note: 'rate corrected' }));
      await board(c, 'loan_1', records('loan_1', { note: 'rate corrected again' }));
      now = Date.parse('2025-03-15T23:00:00Z');
      await c.sealDue();
      expect((await lines('2025-03-15-001', 'loan.csv')).slice(1)).toEqual([
        'C,loan_1,125000050,725,,rate corrected again',
      ]);
      expect((await lines('2025-03-15-001', 'customer.csv'))[1]).toMatch(/^C,loan_1,biz_loan_1,/);
      const ctl = await lines('2025-03-15-001', 'control.csv');
      expect(ctl).toContain('2025-03-15-001,*,loans,0,0,,');
      expect(ctl).toContain('2025-03-15-001,*,corrections,1,1,,');
      expect((await lines('2025-03-14-001', 'loan.csv')).slice(1)).toEqual(['A,loan_1,125000050,725,,']);
    });

    it('neutralises formula injection in CSV cells, except in columns that turn it off', async () => {
      const c = core();
      await board(
        c,
        'loan_1',
        records('loan_1', { principalCents: '-5', note: '@SUM(A1)' }, "=cmd|' /C calc'!A0"),
      );
      now = CUTOFF_14;
      await c.sealDue();
      expect((await lines('2025-03-14-001', 'customer.csv'))[1]).toBe(
        `A,loan_1,biz_loan_1,'=cmd|' /C calc'!A0,business`,
      );
      expect((await lines('2025-03-14-001', 'loan.csv'))[1]).toBe(`A,loan_1,-5,725,,'@SUM(A1)`);
    });

    it('refuses a loan whose value does not fit the layout, before anything is written', async () => {
      const c = core(testLayout(FIXED_UTF8));
      const err = await board(
        c,
        'loan_1',
        records('loan_1', {}, 'A NAME MUCH TOO LONG FOR THIS COLUMN OF 29 BYTES'),
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CoreRejectedError);
      expect((err as Error).message).toMatch(/CUST\.DAT NAME: .* is \d+ bytes in utf-8, the column 29/);
      // The message is stored with the quarantine: it names the column, never the value (a name, an address).
      expect((err as Error).message).not.toContain('MUCH TOO LONG');
      expect(existsSync(join(dir, 'packages', 'loan_1'))).toBe(false);
    });

    it('finishes a seal a crash interrupted: rewrites files without a trigger, never touches files with one', async () => {
      const c = core();
      await board(c, 'loan_1');
      await board(c, 'loan_2');
      // Crash after the freeze, with a half-written temp file and a stale data file.
      expect(await c.batches!.store.freezeOpen(now, 'test', 'test')).toBe('2025-03-14-001');
      const bdir = join(dir, 'batches', '2025-03-14-001');
      await rm(bdir, { recursive: true, force: true });
      await import('node:fs/promises').then((fs) => fs.mkdir(bdir, { recursive: true }));
      await writeFile(join(bdir, '.tmp-123-abc'), 'partial');
      await writeFile(join(bdir, 'loan.csv'), 'stale');
      const fresh = core();
      await fresh.health(); // ready() recovers
      expect((await readdir(bdir)).sort()).toEqual(['READY', 'control.csv', 'customer.csv', 'loan.csv']);
      expect(await lines('2025-03-14-001', 'loan.csv')).toHaveLength(3);

      // Crash after the trigger, before the status: only the status is set, the files stay as they are.
      await board(fresh, 'loan_3');
      expect(await fresh.batches!.store.freezeOpen(now, 'test', 'test')).toBe('2025-03-14-002');
      const b2 = join(dir, 'batches', '2025-03-14-002');
      await import('node:fs/promises').then((fs) => fs.mkdir(b2, { recursive: true }));
      await writeFile(join(b2, 'READY'), 'x');
      await core().sealDue();
      expect(await readdir(b2)).toEqual(['READY']);
      expect(await db.get(`SELECT status FROM file_batches WHERE id = '2025-03-14-002'`)).toEqual({
        status: 'sealed',
      });
    });

    it('an early seal by ops is audited on the batch and only seals the open batch once', async () => {
      const c = core();
      await board(c, 'loan_1');
      expect(await c.batches!.sealNow('core job runs early today', 'alice')).toBe('2025-03-14-001');
      expect(await c.batches!.sealNow('again', 'bob')).toBeUndefined();
      expect(await db.get(`SELECT status, seal_reason AS reason, sealed_by AS by FROM file_batches`)).toEqual(
        {
          status: 'sealed',
          reason: 'ops: core job runs early today',
          by: 'alice',
        },
      );
    });
  });

  // A 60-byte Latin-1 loan file (header, detail, trailer) and a 40-byte UTF-8 customer file.
  const FIXED_UTF8 = `
  files:
    - name: LOANS.DAT
      record: loan
      format: fixed
      encoding: latin1
      lineEnding: crlf
      recordLength: 60
      header:
        - { name: TYPE, start: 1, length: 1, value: H }
        - { name: DATE, start: 2, length: 8, source: batchDate, dateFormat: yyyymmdd }
        - { name: FILLER, start: 10, length: 51, value: "" }
      columns:
        - { name: CODE, start: 1, length: 1, code: { new: A, correction: C } }
        - { name: LOAN, start: 2, length: 10, source: externalId }
        - { name: PRINCIPAL, start: 12, length: 15, field: principalCents, align: right, pad: "0" }
        - { name: INDEX, start: 27, length: 8, field: rateIndex }
        - { name: NOTE, start: 35, length: 26, field: note, overflow: truncate }
      trailer:
        - { name: TYPE, start: 1, length: 1, value: T }
        - { name: COUNT, start: 2, length: 9, count: records, pad: "0" }
        - { name: TOTAL, start: 11, length: 21, total: principalCents, decimals: 2, pad: "0" }
        - { name: FILLER, start: 32, length: 29, value: "" }
    - name: CUST.DAT
      record: customer
      format: fixed
      encoding: utf-8
      recordLength: 40
      columns:
        - { name: CODE, start: 1, length: 1, code: { new: A, correction: C } }
        - { name: LOAN, start: 2, length: 10, source: loanId }
        - { name: NAME, start: 12, length: 29, field: name }
  `;

  describe.skipIf(engineSkipped(engine))(
    'a changed layout (the set reloaded, or the connector restarted with a new layout.yaml)',
    () => {
      it('seals the open batch in the layout it was opened in, and boards on into a new batch in the new one', async () => {
        await board(core(), 'loan_a');
        // The bank renames a column and drops another.
        const renamed = testLayout(
          TEST_LAYOUT_YAML.replace(
            '{ name: rate_bps, field: rateBps, neutralise: false }',
            '{ name: rate, field: rateBps, neutralise: false }',
          ).replace('      - { name: note, field: note }\n', ''),
        );
        const c2 = core(renamed);
        await board(c2, 'loan_b');
        const rows = await db.all('SELECT id, status, seal_reason AS reason FROM file_batches ORDER BY id');
        expect(rows).toEqual([
          { id: '2025-03-14-001', status: 'sealed', reason: 'layout changed' },
          { id: '2025-03-14-002', status: 'open', reason: null },
        ]);
        // The sealed batch is written in its own layout, with the loan boarded before the change.
        const first = await lines('2025-03-14-001', 'loan.csv');
        expect(first[0]).toBe('action,loan_id,principal_cents,rate_bps,rate_index,note');
        expect(first.slice(1).map((l) => l.split(',')[1])).toEqual(['loan_a']);
        // A seal of the new batch (by ops, with the old layout still on disk for the CLI) uses the batch's own.
        expect(await core().batches!.sealNow('test', 'ops')).toBe('2025-03-14-002');
        const second = await lines('2025-03-14-002', 'loan.csv');
        expect(second[0]).toBe('action,loan_id,principal_cents,rate,rate_index');
        expect(second.slice(1).map((l) => l.split(',')[1])).toEqual(['loan_b']);
      });
    },
  );
});
