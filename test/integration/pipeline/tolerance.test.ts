import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

/** What the real platform may send or answer that the happy path never sees. */
describe('sync --once tolerance', () => {
  let p: TestPlatform;
  let ids: string[];

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 8,
      releaseRatio: 1,
      seed: 21,
      windowMs: 1000,
      readsPerWindow: 200,
      writesPerWindow: 60,
    });
    ids = ((await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> }).data.map(
      (l) => l.id,
    );
  });
  afterAll(async () => {
    await p.close();
  });

  it('quarantines a malformed queue item by id (validation) and boards the rest; items without an id are only logged', async () => {
    const [bad, noId, odd] = ids as [string, string, string];
    await p.admin('POST', `/loans/${encodeURIComponent(bad)}/malform`, { kind: 'amount' });
    await p.admin('POST', `/loans/${encodeURIComponent(noId)}/malform`, { kind: 'missing_id' });
    await p.admin('POST', `/loans/${encodeURIComponent(odd)}/malform`, { kind: 'unknown_values' });
    const cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 60 });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.code, r.error ?? '').toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.walk.invalid).toBe(2);
    const shown = JSON.parse(
      (await runCli(['--config', cfg.configPath, 'loans', 'show', bad, '--json'])).stdout,
    );
    expect(shown.loan).toMatchObject({
      state: 'quarantined',
      quarantineReason: 'validation',
      lastErrorCode: 'queue_item.invalid',
    });
    expect(shown.loan.lastErrorMessage).toContain('centsAmount');
    // Unknown enumeration values reach the mapping, which decides: boarded or quarantined, never a crash.
    const oddState = JSON.parse(
      (await runCli(['--config', cfg.configPath, 'loans', 'show', odd, '--json'])).stdout,
    ).loan;
    expect(['acknowledged', 'quarantined']).toContain(oddState.state);
    const c = await p.counters();
    for (const id of ids.filter((i) => i !== bad && i !== noId && i !== odd)) expect(c.acks[id], id).toBe(1);
    expect(c.acks[bad]).toBeUndefined();
  });

  it('exits 1 when the platform refuses the API key, naming the problem', async () => {
    const cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 60 });
    writeFileSync(
      cfg.configPath,
      readFileSync(cfg.configPath, 'utf8').replace(p.apiKey, 'pk_test_not_a_real_key'),
    );
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once']);
    expect(r.code).toBe(1);
    expect(r.error).toMatch(/refused the connector.*auth\.invalid_key|auth\.invalid_key/);
  });
});
