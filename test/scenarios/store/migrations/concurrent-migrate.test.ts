import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../../../src/store/migrations/migrations.js';

const SCRIPT = join(import.meta.dirname, '../../../support/open-db-script.ts');
const dir = mkdtempSync(join(tmpdir(), 'concurrent-migrate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function open(path: string, at: number): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, path, String(at)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stderr })));
}

describe('a fresh state database opened by several processes at once', () => {
  // The daemon and an operator's command (`batches seal`, `loans retry`) can start together on a
  // new install; each migrates. Every one must start, and the schema must be applied once.
  it('every process opens it and the schema is complete', async () => {
    for (let round = 0; round < 3; round++) {
      const path = join(dir, `state-${round}.sqlite`);
      const at = Date.now() + 3000;
      const results = await Promise.all(Array.from({ length: 4 }, () => open(path, at)));
      for (const r of results) expect(r, r.stderr).toMatchObject({ code: 0 });
      const db = new Database(path, { readonly: true });
      expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      db.close();
    }
  }, 60_000);
});
