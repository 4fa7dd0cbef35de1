import { mkdtempSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteLeaseBackend } from '../../../src/store/leadership/leases.js';
import { BOARDING_LEASE } from '../../../src/pipeline/cycle.js';
import { runCli } from './harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

describe('operator messages around the boarding lease', () => {
  it('sync --once exits 3 (not 0) when another live process leads (regression: "nothing done" with exit 0)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lease-busy-'));
    const dbPath = join(dir, 'state.sqlite');
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: dbPath },
        core: { file: { dir: join(dir, 'core') } },
        log: { level: 'silent' },
      }),
    );
    const db = openDatabase(dbPath);
    // This very process, under another holder id: alive, its lease a minute long.
    expect(
      await sqliteLeaseBackend(sqliteStore(db)).acquire(
        BOARDING_LEASE,
        `${hostname()}:${process.pid}:elsewhere`,
        60_000,
      ),
    ).toEqual({ epoch: 1 });
    db.close();
    const r = await runCli(['--config', configPath, 'sync', '--once']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('nothing done');
    expect(r.stdout).toContain(`pid ${process.pid}`);
    expect(r.error).toContain('holds the boarding lease');
    // `state leader` says who leads, read only (it never takes the lease).
    const leader = await runCli(['--config', configPath, 'state', 'leader']);
    expect(leader.code).toBe(0);
    expect(leader.stdout).toContain(
      `leader: ${hostname()}:${process.pid}:elsewhere (pid ${process.pid} on ${hostname()}), epoch 1`,
    );
    const json = JSON.parse((await runCli(['--config', configPath, 'state', 'leader', '--json'])).stdout) as {
      leader: string;
      epoch: number;
      expiresInMs: number;
    };
    expect(json).toMatchObject({ leader: `${hostname()}:${process.pid}:elsewhere`, epoch: 1 });
    expect(json.expiresInMs).toBeGreaterThan(30_000);
  });
});
