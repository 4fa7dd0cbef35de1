import { mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCli } from '../../integration/pipeline/harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';
import { createConnectorMetrics } from '../../../src/observability/metrics.js';
import { systemClock } from '../../../src/lib/clock.js';

describe('state backup / state verify', () => {
  it('copies a live database consistently while another connection writes, owner-only, and verifies it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'state-backup-'));
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
    const store = createBoardingStore(sqliteStore(db));
    for (let i = 0; i < 2000; i++) {
      await store.loans.insert({ id: `L${i}`, state: 'queued' }, 1_000 + i);
      await store.keys.ensure(`ack:L${i}:b`, 'ack', `L${i}`, 1_000 + i);
    }
    // A writer keeps committing while the backup runs (the daemon's situation).
    let n = 2000;
    const writer = setInterval(async () => {
      for (let k = 0; k < 20; k++, n++) await store.loans.insert({ id: `L${n}`, state: 'queued' }, 5_000 + n);
    }, 1);
    const out = join(dir, 'backup.sqlite');
    const r = await runCli(['--config', configPath, 'state', 'backup', '--out', out]);
    clearInterval(writer);
    expect(r.error).toBeNull();
    expect(r.stdout).toMatch(/backup written: .*backup\.sqlite/);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const v = await runCli(['--config', configPath, 'state', 'verify', out, '--json']);
    expect(v.code).toBe(0);
    const result = JSON.parse(v.stdout) as { ok: boolean; counts: Record<string, number> };
    expect(result.ok).toBe(true);
    expect(result.counts['idempotency_keys']).toBe(2000);
    expect(result.counts['loans']).toBeGreaterThanOrEqual(2000);
    expect(result.counts['loans']).toBeLessThanOrEqual(n);
    // Refuses to overwrite without --force.
    expect((await runCli(['--config', configPath, 'state', 'backup', '--out', out])).code).toBe(2);
    db.close();
  });

  it("records each verified backup's time in the state, where the daemon's /metrics reads it (the backups-not-taken alert)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'state-backup-metric-'));
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
    const metrics = createConnectorMetrics({
      clock: systemClock,
      processMetrics: false,
      db: sqliteStore(db),
    });
    const reading = async (): Promise<number | null> => {
      const m = /^boarding_state_backup_last_success_timestamp_seconds (\d+)$/m.exec(await metrics.render());
      return m ? Number(m[1]) : null;
    };
    // Never backed up: 0, so the alert fires on a state nobody backs up, not only on a stopped job.
    expect(await reading()).toBe(0);
    const before = Math.floor(Date.now() / 1000);
    const r = await runCli(['--config', configPath, 'state', 'backup', '--out', join(dir, 'b.sqlite')]);
    expect(r.error).toBeNull();
    const at = await reading();
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    db.close();
  });

  it('verify refuses a file that is not a connector state database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'state-verify-'));
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
        store: { path: join(dir, 'state.sqlite') },
        log: { level: 'silent' },
      }),
    );
    const junk = join(dir, 'junk.sqlite');
    writeFileSync(junk, Buffer.alloc(8192, 7));
    const r = await runCli(['--config', configPath, 'state', 'verify', junk]);
    expect(r.code).toBe(1);
    expect(r.error).toMatch(/does not verify/);
    const empty = join(dir, 'empty.sqlite');
    const e = openDatabase(empty);
    e.pragma('user_version = 0');
    e.close();
    const r2 = await runCli(['--config', configPath, 'state', 'verify', empty]);
    expect(r2.code).toBe(1);
    expect(r2.error).toContain('schema version 0');
  });

  it('every file it creates is 0600 from the first byte, and nothing is left beside the backup (regression: 0644 during the copy, .partial-PID-shm/-wal left behind)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'state-backup-modes-'));
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
    const store = createBoardingStore(sqliteStore(db));
    await store.write(async () => {
      for (let i = 0; i < 30_000; i++)
        await store.keys.ensure(`ack:L${i}:${'k'.repeat(40)}`, 'ack', `L${i}`, 1_000 + i);
    });
    // A watcher in another thread lists the directory and stats every file in a tight loop while
    // the backup runs (the copy blocks this thread): the modes as another user would find them.
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const watcher = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       const { readdirSync, statSync } = require('node:fs');
       const seen = {};
       while (Atomics.load(workerData.stop, 0) === 0) {
         for (const f of readdirSync(workerData.dir)) {
           if (!f.startsWith('backup')) continue;
           try { const m = statSync(workerData.dir + '/' + f).mode & 0o777; seen[f] = (seen[f] ?? []).includes(m) ? seen[f] : [...(seen[f] ?? []), m]; } catch {}
         }
       }
       parentPort.postMessage(seen);`,
      { eval: true, workerData: { dir, stop } },
    );
    const seen = new Promise<Record<string, number[]>>((resolve) => watcher.once('message', resolve));
    await new Promise((r) => watcher.once('online', r));
    const out = join(dir, 'backup.sqlite');
    const r = await runCli(['--config', configPath, 'state', 'backup', '--out', out]);
    Atomics.store(stop, 0, 1);
    const modes = await seen;
    await watcher.terminate();
    db.close();
    expect(r.error).toBeNull();
    // The watcher saw the copy being written (else this test proves nothing).
    expect(Object.keys(modes).some((f) => f.includes('.partial-'))).toBe(true);
    for (const [file, ms] of Object.entries(modes))
      expect({ file, modes: ms.map((m) => m.toString(8)) }).toEqual({ file, modes: ['600'] });
    expect(
      readdirSync(dir)
        .filter((f) => f.startsWith('backup'))
        .sort(),
    ).toEqual(['backup.sqlite']);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    // Verifying the backup (as an operator does before a restore) leaves nothing either.
    expect((await runCli(['--config', configPath, 'state', 'verify', out])).code).toBe(0);
    expect(
      readdirSync(dir)
        .filter((f) => f.startsWith('backup'))
        .sort(),
    ).toEqual(['backup.sqlite']);
  });
});
