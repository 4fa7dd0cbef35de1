import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

/** A presigned address on 127.0.0.1 (the sandbox's blob host) as a staging connector sees it. */
describe('sync --once with document addresses that lead inside the network', () => {
  let p: TestPlatform;

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 4,
      releaseRatio: 1,
      seed: 33,
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 60,
    });
  });
  afterAll(async () => {
    await p.close();
  });

  it('quarantines a loan whose document address is loopback (download.refused, naming the allow-list key), and boards it once the host is allow-listed', async () => {
    const limits = { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 60 };
    // The harness's boarding section without its 127.0.0.1 allow-list.
    const cfg = writeConnectorConfig(p, {
      ...limits,
      extra: {
        boarding: {
          concurrency: 2,
          retryBaseMs: 200,
          retryMaxMs: 2000,
          maxAttempts: 10,
          shutdownTimeoutMs: 2000,
        },
      },
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.code, r.error ?? '').toBe(0);
    const list = JSON.parse(
      (await runCli(['--config', cfg.configPath, 'loans', 'list', '--state', 'quarantined', '--json']))
        .stdout,
    ) as Array<{ id: string }> | { loans: Array<{ id: string }> };
    const quarantined = Array.isArray(list) ? list : list.loans;
    expect(quarantined.length).toBeGreaterThan(0);
    // The reason is filterable like every other (the one list in store/loan-states.ts).
    const byReason = await runCli([
      '--config',
      cfg.configPath,
      'loans',
      'skip',
      '--all',
      '--quarantine-reason',
      'download_refused',
      '--dry-run',
      '--reason',
      'x',
    ]);
    expect(byReason.code, byReason.error ?? '').toBe(0);
    // config check --connect fetches one document the same way and warns, naming the key.
    const check = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect', '--json']);
    const doc = (
      JSON.parse(check.stdout) as { checks: Array<{ name: string; status: string; detail: string }> }
    ).checks.find((k) => k.name === 'platform.documents');
    expect(doc?.status).toBe('warn');
    expect(doc?.detail).toMatch(
      /download refused: 127\.0\.0\.1 is a loopback address.*boarding\.documentHosts\.allow.*download_refused/,
    );
    expect(doc?.detail).not.toMatch(/signature=|expires=/);
    for (const { id } of quarantined) {
      const shown = JSON.parse(
        (await runCli(['--config', cfg.configPath, 'loans', 'show', id, '--json'])).stdout,
      ).loan;
      // Its own reason (regression: shown as `validation`, so ops could not tell bad data from the bank's network policy).
      expect(shown).toMatchObject({
        state: 'quarantined',
        quarantineReason: 'download_refused',
        lastErrorCode: 'platform.download.refused',
      });
      expect(shown.lastErrorMessage).toMatch(
        /127\.0\.0\.1 is a loopback address.*add 127\.0\.0\.1 or its range to boarding\.documentHosts\.allow.*platform\.environment: development/,
      );
      expect(shown.lastErrorMessage).not.toMatch(/[?&](sig|signature|X-)/i);
      expect((await p.counters()).acks[id]).toBeUndefined();
    }
    // The bank lists its (here: loopback) document host; a retry boards the loans.
    const allowed = writeConnectorConfig(p, {
      ...limits,
      extra: {
        store: { path: cfg.dbPath },
        core: { adapter: 'file', file: { dir: cfg.coreDir } },
        boarding: {
          concurrency: 2,
          retryBaseMs: 200,
          retryMaxMs: 2000,
          maxAttempts: 10,
          shutdownTimeoutMs: 2000,
          documentHosts: { allow: ['127.0.0.0/8'] },
        },
      },
    });
    for (const { id } of quarantined) {
      const retried = await runCli([
        '--config',
        allowed.configPath,
        'loans',
        'retry',
        id,
        '--by',
        'ops',
        '--yes',
      ]);
      expect(retried.code, retried.error ?? '').toBe(0);
    }
    expect((await runCli(['--config', allowed.configPath, 'sync', '--once'])).code).toBe(0);
    const c = await p.counters();
    for (const { id } of quarantined) expect(c.acks[id], id).toBe(1);
  });
});
