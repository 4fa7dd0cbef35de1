import { FileBatchStore } from '../../../src/store/file-batches.js';
import { clockReading } from '../../support/fake-clock.js';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { FileCore } from '../../../src/core/file/file-core.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { FileBatches } from '../../../src/core/file/batches.js';
import { cutoffRule } from '../../../src/core/file/cutoff.js';
import { createLogger } from '../../../src/lib/logger.js';
import { testBatches, testLayout } from '../../unit/core/batches-support.js';
import { runCli } from '../pipeline/harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

// Seeded tax ids: dashed (as the core's file carries it) and bare (as a mapping may write it).
const SSN = '987-65-4329';
const EIN_BARE = '874512963';

function records(loanId: string, version: number): MappedRecord[] {
  return [
    {
      type: 'customer',
      externalId: `${loanId}-c`,
      fields: { name: `Borrower ${loanId} SSN ${SSN} v${version}`, kind: 'person' },
    },
    // A long note pushes the rendered lines into overflow pages, which a delete frees whole.
    {
      type: 'loan',
      externalId: loanId,
      fields: {
        principalCents: 100_000,
        rateBps: 500,
        rateIndex: 'FIXED',
        note: `EIN ${EIN_BARE} ${'n'.repeat(3000)} v${version}`,
      },
    },
  ];
}

function occurrences(file: string): number {
  if (!existsSync(file)) return 0;
  const bytes = readFileSync(file);
  let n = 0;
  for (const needle of [SSN, EIN_BARE]) {
    for (let at = bytes.indexOf(needle); at !== -1; at = bytes.indexOf(needle, at + 1)) n += 1;
  }
  return n;
}

describe('full tax ids do not survive the seal (regression: free pages, the WAL and every backup kept them)', () => {
  it("after a seal the state file, its -wal and a `state backup` copy hold no rendered tax id, with the daemon's connections still open", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'seal-pii-'));
    const dbPath = join(dir, 'state.sqlite');
    let now = Date.parse('2025-03-14T15:00:00Z');
    const clock = clockReading(() => now);
    const db: Db = openDatabase(dbPath);
    // A running daemon holds more than one connection (the rate-state spend connection, the
    // webhook inbox): one more, which has read the database, stays open throughout.
    const other: Db = openDatabase(dbPath);
    cleanups.push(() => {
      other.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const core = new FileCore({
      dir: join(dir, 'core'),
      batches: testBatches(dir, clock, { db: sqliteStore(db) }),
      timeZone: 'America/Chicago',
      logger: silentLogger(),
      clock,
    });
    for (let i = 0; i < 40; i++)
      await core.batches!.append(core.batches!.check(`loan_${i}`, records(`loan_${i}`, 1)), '100000');
    // Re-boards before the cut-off replace the open batch's lines (old rows deleted).
    for (let i = 0; i < 10; i++)
      await core.batches!.append(core.batches!.check(`loan_${i}`, records(`loan_${i}`, 2)), '100000');
    expect(other.prepare('SELECT count(*) AS n FROM file_batch_loans').get()).toEqual({ n: 40 });
    // Not even before the seal: the open batch's lines are stored encrypted (issue 33), the key
    // beside the core's files; the rendered lines themselves do carry the ids (the test can see them).
    expect({ db: occurrences(dbPath), wal: occurrences(`${dbPath}-wal`) }).toEqual({ db: 0, wal: 0 });
    expect(JSON.stringify(core.batches!.check('loan_0', records('loan_0', 2)).rows)).toContain(SSN);
    expect(core.batches!.keys.batchesWithKeys()).toEqual(['2025-03-14-001']);

    now = Date.parse('2025-03-14T23:00:00Z'); // past the 18:00 Chicago cut-off
    expect(await core.batches!.sealDue()).toEqual(['2025-03-14-001']);
    expect(db.prepare(`SELECT DISTINCT rows_json AS r FROM file_batch_loans`).all()).toEqual([{ r: '{}' }]);
    // The sealed files in the core's directory are the record: they carry the ids.
    expect(readFileSync(join(dir, 'batches', '2025-03-14-001', 'customer.csv'), 'utf8')).toContain(SSN);

    expect({ db: occurrences(dbPath), wal: occurrences(`${dbPath}-wal`) }).toEqual({ db: 0, wal: 0 });
    // The key is gone with the seal: a copy of the database taken before it holds only ciphertext nobody can read.
    expect(core.batches!.keys.batchesWithKeys()).toEqual([]);

    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        log: { level: 'silent' },
      }),
    );
    const out = join(dir, 'backup.sqlite');
    const r = await runCli(['--config', configPath, 'state', 'backup', '--out', out]);
    expect(r.error).toBeNull();
    expect(occurrences(out)).toBe(0);
    // The daemon's connections keep working on the same file.
    expect(other.prepare('SELECT count(*) AS n FROM file_batch_loans').get()).toEqual({ n: 40 });
    await core.close();
  });

  it('a backup never carries free pages (a database that predates secure_delete)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'backup-free-'));
    const dbPath = join(dir, 'state.sqlite');
    const db = openDatabase(dbPath);
    cleanups.push(() => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    // As an older connector left it: deleted content in free pages, not zeroed.
    db.pragma('secure_delete = OFF');
    db.exec('CREATE TABLE scratch (v TEXT)');
    for (let i = 0; i < 50; i++)
      db.prepare('INSERT INTO scratch VALUES (?)').run(`SSN ${SSN} ${'p'.repeat(4000)}`);
    db.exec('DELETE FROM scratch');
    db.pragma('wal_checkpoint(TRUNCATE)');
    expect(db.pragma('freelist_count', { simple: true })).toBeGreaterThan(0);
    expect(occurrences(dbPath)).toBeGreaterThan(0);
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        log: { level: 'silent' },
      }),
    );
    const out = join(dir, 'backup.sqlite');
    expect((await runCli(['--config', configPath, 'state', 'backup', '--out', out])).error).toBeNull();
    expect(occurrences(out)).toBe(0);
  });

  it('a reader holding an old snapshot delays the WAL truncation: warned, and the next seal job run finishes it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'seal-reader-'));
    const dbPath = join(dir, 'state.sqlite');
    let now = Date.parse('2025-03-14T15:00:00Z');
    const clock = clockReading(() => now);
    const db = openDatabase(dbPath);
    const reader = openDatabase(dbPath);
    cleanups.push(() => {
      reader.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const logs: string[] = [];
    const layout = testLayout();
    const batches = new FileBatches({
      root: join(dir, 'batches'),
      store: new FileBatchStore(sqliteStore(db)),
      layout: () => layout,
      rule: cutoffRule({ cutoff: '18:00', timeZone: 'America/Chicago' }),
      triggerFile: 'READY',
      logger: createLogger({ level: 'debug', destination: { write: (x: string) => void logs.push(x) } }),
      clock,
    });
    for (let i = 0; i < 5; i++)
      await batches.append(batches.check(`loan_${i}`, records(`loan_${i}`, 1)), '100000');
    // An open read transaction on another connection (a long report, an operator's query).
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM file_batch_loans').get();
    now = Date.parse('2025-03-14T23:00:00Z');
    expect(await batches.sealDue()).toEqual(['2025-03-14-001']);
    expect(logs.some((l) => l.includes('could not be truncated after the seal'))).toBe(true);
    // The WAL still holds the batch's (encrypted) frames until the reader lets go.
    expect(statSync(`${dbPath}-wal`).size).toBeGreaterThan(0);
    reader.exec('COMMIT');
    now += 60_000;
    expect(await batches.sealDue()).toEqual([]);
    expect(statSync(`${dbPath}-wal`).size).toBe(0);
    expect({ db: occurrences(dbPath), wal: occurrences(`${dbPath}-wal`) }).toEqual({ db: 0, wal: 0 });
  });
});
