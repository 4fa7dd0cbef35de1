import { mkdtempSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCli } from './harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');

/** The ops commands against a real state database (no platform needed). */
describe('loans commands', () => {
  let configPath: string;
  beforeEach(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'loans-cli-'));
    const dbPath = join(dir, 'state.sqlite');
    configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        log: { level: 'silent' },
      }),
    );
    const db = openDatabase(dbPath);
    const s = createBoardingStore(sqliteStore(db));
    await s.loans.insert(
      { id: 'L1', state: 'queued', patch: { loanNumber: 'N-1', releaseMarker: 'b1' } },
      T0,
    );
    await s.loans.transition('L1', { to: 'fetched' }, T0 + 1);
    await s.loans.transition(
      'L1',
      {
        to: 'quarantined',
        reason: 'mapping',
        patch: {
          quarantineReason: 'mapping',
          lastErrorCode: 'mapping.mapping',
          lastErrorMessage: 'mapping.yaml:3:5 loan.principal: bad',
        },
      },
      T0 + 2,
    );
    await s.loans.insert({ id: 'L2', state: 'queued' }, T0);
    await s.keys.ensure('ack:L2:b2', 'ack', 'L2', T0);
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
    const skip = await runCli(
      ['--config', configPath, 'loans', 'skip', 'L2', '--reason', 'paid off', '--by', 'erin'],
      { USER: 'dan' },
    );
    expect(skip.code).toBe(0);
    const shown = JSON.parse(
      (await runCli(['--config', configPath, 'loans', 'show', 'L2', '--json'])).stdout,
    );
    expect(shown.events.at(-1)).toMatchObject({
      kind: 'ops',
      actor: 'erin',
      reason: 'paid off',
      toState: 'skipped',
    });
    const noActor = await runCli(['--config', configPath, 'loans', 'retry', 'L2']);
    expect(noActor.code).toBe(2);
    expect(noActor.error).toContain('--by');
  });

  it('retry --all requeues every matching quarantined loan, audited, and asks a running daemon for a cycle now', async () => {
    const dbPath = join(configPath, '..', 'state.sqlite');
    const db = openDatabase(dbPath);
    const s = createBoardingStore(sqliteStore(db));
    const quarantine = async (id: string, reason: 'mapping' | 'contradictory', at: number): Promise<void> => {
      await s.loans.insert({ id, state: 'queued' }, at);
      await s.loans.transition(id, { to: 'fetched' }, at);
      await s.loans.transition(id, { to: 'quarantined', reason, patch: { quarantineReason: reason } }, at);
    };
    await quarantine('M1', 'mapping', T0 + 10);
    await quarantine('M2', 'mapping', Date.now() - 60_000);
    await quarantine('C1', 'contradictory', Date.now() - 60_000);
    // Quarantined long ago, but still listed in the queue: each sighting refreshes updated_at.
    await quarantine('M3', 'mapping', T0 + 20);
    await s.loans.update('M3', { lastSeenAt: Date.now() }, Date.now());
    // A daemon of this process, as `run` publishes it: the retry asks it for a cycle.
    await s.daemon.publish({
      owner: 'test:1',
      pid: process.pid,
      host: hostname(),
      startedAt: T0,
      updatedAt: Date.now(),
      mappingVersion: 'v',
      mappingDir: '/m',
      reloadError: null,
    });
    db.close();

    const badReason = await runCli(['--config', configPath, 'loans', 'retry', '--all', '--reason', 'typo'], {
      USER: 'carol',
    });
    expect(badReason.code).toBe(2);
    expect(badReason.error).toContain('--reason: expected one of mapping');
    expect(
      (await runCli(['--config', configPath, 'loans', 'retry', 'L1', '--all'], { USER: 'carol' })).code,
    ).toBe(2);
    expect(
      (await runCli(['--config', configPath, 'loans', 'retry', '--since', '1h'], { USER: 'carol' })).code,
    ).toBe(2);

    // Mapping quarantines of the last hour only: M2 (M1 is older, C1 is contradictory).
    const r = await runCli(
      ['--config', configPath, 'loans', 'retry', '--all', '--reason', 'mapping', '--since', '1h'],
      { USER: 'carol' },
    );
    expect(r.error).toBeNull();
    expect(r.stdout).toContain('loan M2 queued by carol');
    expect(r.stdout).toContain(`asked the running daemon (pid ${process.pid}) for a cycle now`);
    const after = createBoardingStore(sqliteStore(openDatabase(dbPath)));
    try {
      expect((await after.loans.get('M2'))?.state).toBe('queued');
      expect((await after.loans.get('M1'))?.state).toBe('quarantined');
      expect((await after.loans.get('M3'))?.state).toBe('quarantined');
      expect((await after.loans.get('C1'))?.state).toBe('quarantined');
      expect((await after.loans.events('M2')).at(-1)).toMatchObject({
        kind: 'ops',
        actor: 'carol',
        toState: 'queued',
        detail: { bulk: { reason: 'mapping', since: '1h' } },
      });
      expect(await after.daemon.get('test:1')).toMatchObject({ cycleRequestedBy: 'carol' });
      expect((await after.daemon.get('test:1'))?.cycleRequestedAt).not.toBeNull();
    } finally {
      await after.db.close();
    }
    // Every other quarantined loan (L1, M1, C1); no daemon row for a dead process counts.
    const rest = await runCli(['--config', configPath, 'loans', 'retry', '--all', '--by', 'erin']);
    expect(rest.stdout).toContain('loan M1 queued by erin');
    expect(rest.stdout).toContain('loan C1 queued by erin');
    expect(rest.stdout).toContain('loan L1 queued by erin');
    const none = await runCli(['--config', configPath, 'loans', 'retry', '--all', '--by', 'erin']);
    expect(none.stdout).toContain('no loans match');
  });

  it('sync without --once is a usage error', async () => {
    const r = await runCli(['--config', configPath, 'sync']);
    expect(r.code).toBe(2);
    expect(r.error).toContain('sync --once');
  });
});
