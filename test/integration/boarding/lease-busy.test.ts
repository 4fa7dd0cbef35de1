import { mkdtempSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/db.js';
import { createLeaseStore } from '../../../src/store/leases.js';
import { BOARDING_LEASE } from '../../../src/boarding/cycle.js';
import { runCli } from './harness.js';

describe('operator messages around the boarding lease', () => {
  it('sync --once exits 3 (not 0) when another live process holds the lease (regression: "nothing done" with exit 0)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lease-busy-'));
    const dbPath = join(dir, 'state.sqlite');
    const configPath = join(dir, 'config.yaml');
    writeFileSync(configPath, stringify({ platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' }, store: { path: dbPath }, core: { file: { dir: join(dir, 'core') } }, log: { level: 'silent' } }));
    const db = openDatabase(dbPath);
    // This very process, under another owner name: alive, heartbeating now.
    await createLeaseStore(db).acquire(BOARDING_LEASE, { owner: 'daemon-elsewhere', pid: process.pid, host: hostname() }, Date.now(), 60_000, () => true);
    db.close();
    const r = await runCli(['--config', configPath, 'sync', '--once']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('nothing done');
    expect(r.error).toContain('holds the boarding lease');
  });

  it('a takeover says whether the previous holder is gone or only stalled', async () => {
    const db = openDatabase(':memory:');
    const leases = createLeaseStore(db);
    const t0 = 1_000_000;
    await leases.acquire('x', { owner: 'a', pid: 11, host: 'h' }, t0, 1000, () => true);
    const stalled = await leases.acquire('x', { owner: 'b', pid: 12, host: 'h' }, t0 + 5000, 1000, () => true);
    expect(stalled).toMatchObject({ ok: true, takeoverReason: 'stalled' });
    const gone = await leases.acquire('x', { owner: 'c', pid: 13, host: 'h' }, t0 + 5001, 60_000, (pid) => pid !== 12);
    expect(gone).toMatchObject({ ok: true, takeoverReason: 'process_gone' });
    db.close();
  });
});
