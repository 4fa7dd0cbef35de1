/**
 * The open batches' keys (issue 33): rows are stored encrypted with a per-batch key kept beside the
 * core's files; replicas on one shared directory agree on it; the seal deletes it; a key a crash
 * left for a sealed batch is swept at the next start, never the key of a batch still open.
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchKeys } from '../../../src/core/file/batch-keys.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { clockReading } from '../../support/fake-clock.js';
import { testBatches, testLayout } from './batches-support.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});
function tmp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'batch-keys-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('BatchKeys', () => {
  it('two processes on one directory agree on a batch key: each reads what the other stored; the stored text is not the rows', () => {
    const dir = join(tmp(), '.batch-keys');
    const a = new BatchKeys(dir);
    const b = new BatchKeys(dir);
    const rows = JSON.stringify({ 'customer.csv': { lines: ['A,loan_1,987-65-4329'], amounts: {} } });
    const stored = a.seal('2025-03-14-001', rows);
    expect(stored).not.toContain('987-65-4329');
    expect(b.open('2025-03-14-001', stored)).toBe(rows);
    expect(b.digest('2025-03-14-001', rows)).toBe(a.digest('2025-03-14-001', rows));
    expect(statSync(join(dir, '2025-03-14-001.key')).mode & 0o777).toBe(0o600);
    // Authenticated with its batch: a row moved to another batch's id does not decrypt.
    a.seal('2025-03-14-002', 'x');
    expect(() => a.open('2025-03-14-002', stored)).toThrow();
  });

  it('after destroy the rows cannot be read, and the error names the missing key file', () => {
    const dir = join(tmp(), '.batch-keys');
    const stored = new BatchKeys(dir).seal('2025-03-14-001', '{"a":1}');
    new BatchKeys(dir).destroy('2025-03-14-001');
    expect(() => new BatchKeys(dir).open('2025-03-14-001', stored)).toThrow(
      /batch 2025-03-14-001: its key .*2025-03-14-001\.key is missing/,
    );
    // Rows an older version stored in clear are read as they are.
    expect(new BatchKeys(dir).open('2025-03-14-003', '{"plain":true}')).toBe('{"plain":true}');
  });

  it('recover() deletes the key a crash left for a sealed batch, never the key of a batch still open', async () => {
    const dir = tmp();
    let now = Date.parse('2025-03-14T15:00:00Z');
    const clock = clockReading(() => now);
    const db: Db = openDatabase(join(dir, 'state.sqlite'));
    cleanups.push(() => db.close());
    const batches = testBatches(dir, clock, { db: sqliteStore(db), layout: testLayout() });
    const rec = (id: string) => [
      {
        type: 'loan' as const,
        externalId: id,
        fields: { principalCents: 100, rateBps: 1, rateIndex: 'FIXED', note: 'x' },
      },
    ];
    await batches.append(batches.check('loan_1', rec('loan_1')), '100');
    now = Date.parse('2025-03-14T23:00:00Z');
    await batches.sealDue();
    await batches.append(batches.check('loan_2', rec('loan_2')), '100');
    expect(batches.keys.batchesWithKeys()).toEqual(['2025-03-15-001']);
    // As a crash between "sealed" and deleting the key leaves it.
    writeFileSync(join(batches.keys.dir, '2025-03-14-001.key'), Buffer.alloc(32, 7));
    await batches.recover();
    expect(existsSync(join(batches.keys.dir, '2025-03-14-001.key'))).toBe(false);
    expect(batches.keys.batchesWithKeys()).toEqual(['2025-03-15-001']);
    await batches.sealNow('test', 'test');
    expect(batches.keys.batchesWithKeys()).toEqual([]);
  });
});
