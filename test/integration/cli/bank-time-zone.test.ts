import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createBoardingStore } from '../../../src/store/index.js';
import { createSqliteRateState } from '../../../src/store/rate-budget/sqlite.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';
import { runCli } from '../pipeline/harness.js';

// 12:00 UTC on a winter day: 06:00 CST in the bank's zone.
const T0 = Date.parse('2026-01-15T12:00:00Z');
// The strike ledger keeps 24 h: a strike a minute ago.
const strikeAt = Date.now() - 60_000;
const LONG_ID = `ln_${'7f3a9c21'.repeat(20)}`; // 163 characters: platform ids are opaque, any length

/**
 * Issue 43 (an operator's day): the CLI printed UTC while the console and the report use the bank's
 * zone, and `loans list` padded its id column to the longest id (160 characters). Every time the
 * CLI prints is in bank.timeZone with its abbreviation; --json keeps ISO 8601 with the offset.
 */
describe('CLI times in the bank zone, and loans list columns sized to content', () => {
  let dir: string;
  let configPath: string;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bank-tz-cli-'));
    const dbPath = join(dir, 'state.sqlite');
    configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        bank: { timeZone: 'America/Chicago' },
        log: { level: 'silent' },
      }),
    );
    const db = openDatabase(dbPath);
    const s = createBoardingStore(sqliteStore(db));
    await s.loans.insert({ id: 'L1', state: 'queued', patch: { loanNumber: 'N-1' } }, T0);
    await s.loans.transition('L1', { to: 'fetched' }, T0 + 1000);
    await s.loans.transition(
      'L1',
      {
        to: 'retry_wait',
        patch: { nextAttemptAt: T0 + 3_600_000, lastErrorCode: 'core.unavailable', lastErrorMessage: 'down' },
      },
      T0 + 2000,
    );
    await s.loans.insert({ id: LONG_ID, state: 'queued' }, T0);
    await s.keys.ensure('ack:L1:b1', 'ack', 'L1', T0);
    const rate = createSqliteRateState(db);
    rate.recordStrike({
      at: strikeAt,
      bucket: 'write',
      path: '/public/v1/loans/:id/boarding',
      retryAfterMs: 2000,
    });
    db.close();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const cli = (...args: string[]) => runCli(['--config', configPath, ...args]);

  it('loans show prints the bank wall time with its abbreviation, and --json ISO 8601 with the offset', async () => {
    const text = await cli('loans', 'show', 'L1');
    expect(text.code, text.error ?? '').toBe(0);
    expect(text.stdout).toContain('next attempt 2026-01-15 07:00:00 CST');
    expect(text.stdout).toContain('created 2026-01-15 06:00:00 CST');
    expect(text.stdout).toMatch(/^ {2}2026-01-15 06:00:02 CST {2}/m);
    expect(text.stdout).not.toMatch(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/);

    const json = JSON.parse((await cli('loans', 'show', 'L1', '--json')).stdout) as {
      loan: { nextAttemptAt: string; createdAt: string };
      events: Array<{ at: string }>;
      idempotencyKeys: Array<{ createdAt: string }>;
    };
    expect(json.loan.nextAttemptAt).toBe('2026-01-15T07:00:00.000-06:00');
    expect(json.loan.createdAt).toBe('2026-01-15T06:00:00.000-06:00');
    expect(Date.parse(json.loan.nextAttemptAt)).toBe(T0 + 3_600_000);
    expect(json.events.map((e) => e.at)).toContain('2026-01-15T06:00:02.000-06:00');
    expect(json.idempotencyKeys[0]!.createdAt).toBe('2026-01-15T06:00:00.000-06:00');
  });

  it('loans list: times in the bank zone, columns as wide as their content with a long id cut in the middle; --json keeps the whole id', async () => {
    const r = await cli('loans', 'list');
    expect(r.code, r.error ?? '').toBe(0);
    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    const header = lines[0]!;
    // The ID column: as wide as the widest id shown, capped (regression: padded to 163 characters).
    expect(header.indexOf('LOAN NUMBER')).toBeLessThanOrEqual(42);
    const row1 = lines.find((l) => l.startsWith('L1 '))!;
    expect(row1).toContain('2026-01-15 07:00:00 CST');
    const long = lines.find((l) => l.startsWith('ln_7f3a'))!;
    expect(long).toMatch(/^ln_7f3a9c217f3a9c217…[0-9a-f]{19}\s/);
    expect(long.length).toBeLessThan(header.length + 20);

    const json = JSON.parse((await cli('loans', 'list', '--json')).stdout) as Array<{
      id: string;
      nextAttemptAt: string | null;
    }>;
    expect(json.map((l) => l.id)).toContain(LONG_ID);
    expect(json.find((l) => l.id === 'L1')!.nextAttemptAt).toBe('2026-01-15T07:00:00.000-06:00');
  });

  it('platform status prints its strikes in the bank zone, and --json with the offset', async () => {
    const text = await cli('platform', 'status');
    expect(text.code, text.error ?? '').toBe(0);
    expect(text.stdout).toMatch(
      /^ {2}\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} C[SD]T {2}write {2}\/public\/v1\/loans\/:id\/boarding$/m,
    );
    const json = JSON.parse((await cli('platform', 'status', '--json')).stdout) as {
      strikes: Array<{ at: string }>;
    };
    expect(json.strikes[0]!.at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}-0[56]:00$/);
    expect(Date.parse(json.strikes[0]!.at)).toBe(strikeAt);
  });
});
