import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hasValidCheckDigit } from '../../../../src/lib/check-digit.js';
import { openDatabase } from '../../../../src/store/sqlite/db.js';
import { createNumberStore } from '../../../../src/store/identity/numbers.js';
import { openStore } from '../../../../src/store/open.js';
import { createTestDatabase, pgSkipReason, pgTarget } from '../../../support/pg.js';

const SCRIPT = join(import.meta.dirname, '../../../support/allocate-numbers-script.ts');
const dir = mkdtempSync(join(tmpdir(), 'concurrent-numbers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function allocate(
  path: string,
  at: number,
  prefix: string,
  count: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', SCRIPT, path, String(at), prefix, String(count)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('account numbers allocated by two processes at once', () => {
  // The daemon and a `sync --once` (or `loans reboard`) run by hand share one state database.
  it('never give one number to two keys', async () => {
    const path = join(dir, 'state.sqlite');
    openDatabase(path).close();
    const at = Date.now() + 2500;
    const results = await Promise.all([allocate(path, at, 'p1', 150), allocate(path, at, 'p2', 150)]);
    const pairs = new Map<string, string>();
    for (const r of results) {
      expect(r, r.stderr).toMatchObject({ code: 0 });
      for (const line of r.stdout.trim().split('\n')) {
        const [key, number] = line.split(' ') as [string, string];
        expect(pairs.has(number), `${number} given to ${pairs.get(number)} and ${key}`).toBe(false);
        expect(hasValidCheckDigit('luhn', number)).toBe(true);
        pairs.set(number, key);
      }
    }
    expect(pairs.size).toBe(300);
    const db = openDatabase(path);
    expect(db.prepare('SELECT COUNT(*) AS n FROM bank_numbers').get()).toEqual({ n: 300 });
    db.close();
  }, 60_000);
});

describe.skipIf(pgSkipReason !== null)(
  'account numbers allocated by two replicas at once (PostgreSQL)',
  () => {
    // Two replicas (two pools, several connections each) on one database: a standby's command, a
    // leader's boarding. Every allocation runs concurrently with the others.
    it('never give one number to two keys, and each key keeps its number', async () => {
      const pg = await createTestDatabase({ migrate: false });
      const open = () => openStore(pgTarget(pg.url, { poolSize: 4, connectTimeoutMs: 5000 }));
      const [a, b] = [await open(), await open()];
      try {
        const stores = [createNumberStore(a), createNumberStore(b)];
        const keys = Array.from({ length: 120 }, (_, i) => `k${i}`);
        // Every key is asked for by both replicas at once: one number per key, never one per replica.
        const got = await Promise.all(
          keys.flatMap((k, i) => [
            stores[i % 2]!.allocate('account', k, 1),
            stores[(i + 1) % 2]!.allocate('account', k, 1),
          ]),
        );
        const byKey = new Map<string, string>();
        for (const [i, r] of got.entries()) {
          const key = keys[Math.floor(i / 2)] as string;
          expect(byKey.get(key) ?? r.number, `key ${key} got two numbers`).toBe(r.number);
          byKey.set(key, r.number);
          expect(hasValidCheckDigit('luhn', r.number)).toBe(true);
        }
        expect(got.filter((r) => r.fresh)).toHaveLength(keys.length);
        expect(new Set(byKey.values()).size).toBe(keys.length);
        expect(await a.get('SELECT COUNT(*) AS n FROM bank_numbers')).toEqual({ n: keys.length });
      } finally {
        await a.close();
        await b.close();
        await pg.drop();
      }
    }, 60_000);
  },
);
