import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCliSplit } from '../../support/cli-run.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

/** The summary `sync --once` prints, and nothing else: every stdout line is one of its lines. */
function onlySummary(stdout: string): void {
  const lines = stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^queue: /);
  expect(lines[1]).toMatch(/^boarded: /);
  expect(lines[2]).toMatch(/^states: /);
  for (const l of lines.slice(3)) expect(l).toMatch(/^ {2}(quarantined|retry_wait) /);
  expect(stdout).not.toContain('\r');
  expect(stdout).not.toMatch(/waiting|paused|boarding \d+\/\d+/);
}

describe('long commands show progress and why they wait (issue 24 point 3)', () => {
  let p: TestPlatform;
  // The sandbox's clock: frozen, a forced 429 lasts however slow the connector is to get there.
  let frozenAt: number | null = null;
  let offset = 0;
  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 3,
      releaseRatio: 1,
      seed: 11,
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 50,
      now: () => frozenAt ?? Date.now() + offset,
    });
  });
  afterAll(async () => {
    await p.close();
  });

  it('sync --once --progress=always after a 429: the line says the bucket is paused until when, and done/total; stdout keeps only the summary', async () => {
    const cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 50 });
    // Every write (the acknowledgements) is refused with 429 until the first one was; then the
    // sandbox's clock jumps past the forced second, so the retry after the pause goes through.
    frozenAt = Date.now();
    await p.admin('POST', '/rate-limit', { force429: { bucket: 'write', retryAfterSeconds: 1 } });
    const run = runCliSplit(['--config', cfg.configPath, 'sync', '--once', '--progress=always']);
    await expect
      .poll(async () => (await p.counters()).rateLimited, { interval: 20, timeout: 30_000 })
      .toBeGreaterThan(0);
    offset = frozenAt + 2000 - Date.now();
    frozenAt = null;
    const r = await run;
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/walking the boarding queue/);
    expect(r.stderr).toMatch(/boarding \d+\/\d+/);
    // The reason comes from the rate budget: the 429's pause, with the time it ends.
    expect(r.stderr).toMatch(/paused after a 429 until \d{2}:\d{2}:\d{2}Z \(\d+ s, writes\)/);
    expect(r.stderr).not.toContain('\r');
    onlySummary(r.stdout);
    expect((await p.counters()).rateLimited).toBeGreaterThan(0);
    // The pause was waited out inside the cycle: every loan that maps was acknowledged.
    const db = openDatabase(cfg.dbPath);
    try {
      const states = await createBoardingStore(sqliteStore(db)).loans.countByState();
      expect(states.retry_wait).toBe(0);
      expect(states.acknowledged).toBeGreaterThan(0);
    } finally {
      db.close();
    }

    // A tiny read budget (1 read per 500 ms): a reboard dry run on the boarded loans waits for it, and says so.
    const yaml = parse(readFileSync(cfg.configPath, 'utf8')) as {
      platform: { rateLimit: Record<string, number> };
    };
    yaml.platform.rateLimit = { windowMs: 500, readsPerWindow: 2, writesPerWindow: 50 };
    writeFileSync(cfg.configPath, stringify(yaml));
    const db2 = openDatabase(cfg.dbPath);
    const acked = (await createBoardingStore(sqliteStore(db2)).loans.list({ state: 'acknowledged' })).map(
      (x) => x.id,
    );
    db2.close();
    const dry = await runCliSplit([
      '--config',
      cfg.configPath,
      'loans',
      'reboard',
      ...acked,
      '--dry-run',
      '--force',
      '--progress=always',
    ]);
    expect(dry.error).toBeNull();
    expect(dry.stderr).toMatch(
      /dry run: reading and mapping \d+\/\d+: loan \S+ · waiting \d+ s for the read budget/,
    );
    expect(dry.stdout).not.toMatch(/waiting|dry run: reading/);
    expect(dry.stdout).toContain('nothing was written to the core');
  }, 60_000);

  it('--progress=never: nothing on stderr, only the results on stdout', async () => {
    const cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 50 });
    const r = await runCliSplit(['--config', cfg.configPath, 'sync', '--once', '--progress=never']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    onlySummary(r.stdout);
    const dry = await runCliSplit(['--config', cfg.configPath, 'sync', '--dry-run', '--progress', 'never']);
    expect(dry.code).toBe(0);
    expect(dry.stderr).toBe('');
    expect(dry.stdout.startsWith('dry run with mapping ')).toBe(true);
  }, 60_000);

  it('an unknown --progress mode is a usage error', async () => {
    const r = await runCliSplit(['--progress=sometimes', 'loans', 'list']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("argument 'sometimes' is invalid. Allowed choices are auto, always, never");
  });
});
