import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCli } from './harness.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');

/** The ops commands against a real state database (no platform needed). */
describe('loans commands', () => {
  let configPath: string;
  beforeEach(() => {
    const dir = mkdtempSync(join(tmpdir(), 'loans-cli-'));
    const dbPath = join(dir, 'state.sqlite');
    configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({ platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' }, store: { path: dbPath }, log: { level: 'silent' } }),
    );
    const db = openDatabase(dbPath);
    const s = createBoardingStore(db);
    s.loans.insert({ id: 'L1', state: 'queued', patch: { loanNumber: 'N-1', releaseMarker: 'b1' } }, T0);
    s.loans.transition('L1', { to: 'fetched' }, T0 + 1);
    s.loans.transition('L1', { to: 'quarantined', reason: 'mapping', patch: { quarantineReason: 'mapping', lastErrorCode: 'mapping.mapping', lastErrorMessage: 'mapping.yaml:3:5 loan.principal: bad' } }, T0 + 2);
    s.loans.insert({ id: 'L2', state: 'queued' }, T0);
    s.keys.ensure('ack:L2:b2', 'ack', 'L2', T0);
    db.close();
  });

  it('lists loans, filters by state, prints JSON', async () => {
    const all = await runCli(['--config', configPath, 'loans', 'list']);
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/L1\s+N-1\s+quarantined\s+mapping/);
    expect(all.stdout).toContain('2 loan(s)');
    const q = await runCli(['--config', configPath, 'loans', 'list', '--state', 'quarantined', '--json']);
    expect(JSON.parse(q.stdout).map((r: { id: string }) => r.id)).toEqual(['L1']);
    const bad = await runCli(['--config', configPath, 'loans', 'list', '--state', 'done']);
    expect(bad.code).toBe(2);
    expect(bad.error).toContain('--state: expected one of queued');
  });

  it('shows history, keys and errors', async () => {
    const r = await runCli(['--config', configPath, 'loans', 'show', 'L1']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('state:           quarantined (mapping)');
    expect(r.stdout).toContain('last error:      [mapping.mapping] mapping.yaml:3:5 loan.principal: bad');
    expect(r.stdout).toMatch(/fetched → quarantined\s+mapping/);
    const k = await runCli(['--config', configPath, 'loans', 'show', 'L2', '--json']);
    expect(JSON.parse(k.stdout).idempotencyKeys[0].key).toBe('ack:L2:b2');
    expect((await runCli(['--config', configPath, 'loans', 'show', 'NOPE'])).code).toBe(2);
  });

  it('retries and skips with an audited actor, refusing what makes no sense', async () => {
    const retry = await runCli(['--config', configPath, 'loans', 'retry', 'L1'], { USER: 'carol' });
    expect(retry.code).toBe(0);
    expect(retry.stdout).toContain('queued by carol');
    const again = await runCli(['--config', configPath, 'loans', 'retry', 'L1'], { USER: 'carol' });
    expect(again.code).toBe(2);
    expect(again.error).toContain('only quarantined, retry_wait or skipped');
    const noReason = await runCli(['--config', configPath, 'loans', 'skip', 'L2'], { USER: 'dan' });
    expect(noReason.code).toBe(2);
    const skip = await runCli(['--config', configPath, 'loans', 'skip', 'L2', '--reason', 'paid off', '--by', 'erin'], { USER: 'dan' });
    expect(skip.code).toBe(0);
    const shown = JSON.parse((await runCli(['--config', configPath, 'loans', 'show', 'L2', '--json'])).stdout);
    expect(shown.events.at(-1)).toMatchObject({ kind: 'ops', actor: 'erin', reason: 'paid off', toState: 'skipped' });
    const noActor = await runCli(['--config', configPath, 'loans', 'retry', 'L2']);
    expect(noActor.code).toBe(2);
    expect(noActor.error).toContain('--by');
  });

  it('sync without --once is a usage error', async () => {
    const r = await runCli(['--config', configPath, 'sync']);
    expect(r.code).toBe(2);
    expect(r.error).toContain('sync --once');
  });
});
