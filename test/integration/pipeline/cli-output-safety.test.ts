import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { printable } from '../../../src/lib/terminal.js';
import { runCli } from './harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const HOSTILE = 'N-1\u001b]0;owned\u0007\u001b[2J\u009b31m\rX';

describe('CLI output carries no terminal control characters (regression: a loanNumber was printed raw)', () => {
  it('loans list and loans show strip escape sequences from platform data; --json escapes them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-safe-'));
    const dbPath = join(dir, 'state.sqlite');
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        log: { level: 'silent' },
      }),
    );
    const db = openDatabase(dbPath);
    await createBoardingStore(sqliteStore(db)).loans.insert(
      { id: 'L1', state: 'queued', patch: { loanNumber: HOSTILE, releaseMarker: 'b1' } },
      Date.now(),
    );
    db.close();
    for (const args of [
      ['loans', 'list'],
      ['loans', 'show', 'L1'],
    ]) {
      const r = await runCli(['--config', configPath, ...args]);
      expect(r.code).toBe(0);
      // eslint-disable-next-line no-control-regex
      expect(r.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
      expect(r.stdout).toContain('N-1]0;owned[2J31mX');
    }
    const json = await runCli(['--config', configPath, 'loans', 'list', '--json']);
    // JSON escapes C0 controls itself, so the value survives; a raw C1 control does not reach the terminal.
    expect(JSON.parse(json.stdout)[0].loanNumber).toBe(HOSTILE.replace('\u009b', ''));
  });

  it('printable keeps tabs and newlines', () => {
    expect(printable('a\tb\nc\u001b[0m')).toBe('a\tb\nc[0m');
  });
});
