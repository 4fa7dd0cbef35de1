import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/store/db.js';
import { createSqliteRateState } from '../../../src/store/rate-state.js';
import { runCli } from '../boarding/harness.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function setup(strikes: number): string {
  dir = mkdtempSync(join(tmpdir(), 'platform-cli-'));
  const store = join(dir, 'state.sqlite');
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: pk_test_cli, environment: staging }\nstore: { path: ${JSON.stringify(store)} }\n`,
  );
  const db = openDatabase(store);
  const state = createSqliteRateState(db);
  for (let i = 0; i < strikes; i++) state.recordStrike({ at: Date.now() - i * 60_000, bucket: 'write', path: '/public/v1/loans/:id/boarding', retryAfterMs: 2000 });
  state.close?.();
  db.close();
  return config;
}

describe('platform status / strikes clear', () => {
  it('shows stopped writes after 2 strikes, and an audited clear lets them resume', async () => {
    const config = setup(2);
    const before = await runCli(['platform', 'status', '--json', '--config', config]);
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({ strikes24h: 2, trafficStopped: true });

    const refused = await runCli(['platform', 'strikes', 'clear', '--by', 'ops-anna', '--config', config]);
    expect(refused.code).toBe(2); // --reason is required

    const cleared = await runCli(['platform', 'strikes', 'clear', '--by', 'ops-anna', '--reason', 'support ticket 4711: key in good standing', '--config', config]);
    expect(cleared.code).toBe(0);
    expect(cleared.stdout).toContain('cleared 2 strike(s); a running daemon picks this up on its next request');

    const after = await runCli(['platform', 'status', '--json', '--config', config]);
    expect(JSON.parse(after.stdout)).toMatchObject({ strikes24h: 0, trafficStopped: false });
    const db = openDatabase(join(dir, 'state.sqlite'));
    const audit = db.prepare('SELECT cleared_by FROM rate_strikes').all() as Array<{ cleared_by: string }>;
    db.close();
    expect(audit.map((r) => r.cleared_by)).toEqual(['ops-anna: support ticket 4711: key in good standing', 'ops-anna: support ticket 4711: key in good standing']);
  });

  it('a single strike slows the pace but leaves writes allowed', async () => {
    const config = setup(1);
    const r = await runCli(['platform', 'status', '--config', config]);
    expect(r.stdout).toContain('429 strikes in the last 24 h: 1');
    expect(r.stdout).toContain('platform requests: allowed at half pace');
  });
});
