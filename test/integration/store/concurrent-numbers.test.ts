import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hasValidCheckDigit } from '../../../src/lib/check-digit.js';
import { openDatabase } from '../../../src/store/db.js';

const SCRIPT = join(import.meta.dirname, '../../support/allocate-numbers-script.ts');
const dir = mkdtempSync(join(tmpdir(), 'concurrent-numbers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function allocate(path: string, at: number, prefix: string, count: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, path, String(at), prefix, String(count)], { stdio: ['ignore', 'pipe', 'pipe'] });
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
