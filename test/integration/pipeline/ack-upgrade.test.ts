import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

// The version the running connector reports: an upgrade is this value changing between two runs.
const version = vi.hoisted(() => ({ current: '1.4.0' }));
vi.mock('../../../src/version.js', () => ({
  get CONNECTOR_VERSION() {
    return version.current;
  },
}));

/**
 * An acknowledgement the platform accepted, whose "acknowledged" commit was lost (a crash, an
 * asynchronous standby promoted), re-sent by an upgraded connector. The ack body depends only on
 * what was boarded (core reference, mapping version), so the re-send under the same key is the same
 * body: a replay, never a 422 and never a second board.
 */
describe('acknowledgement re-sent across an upgrade', () => {
  let p: TestPlatform;
  let cfg: ReturnType<typeof writeConnectorConfig>;
  let id: string;

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 1,
      releaseRatio: 1,
      seed: 11,
      windowMs: 1000,
      readsPerWindow: 500,
      writesPerWindow: 200,
    });
    cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 500, writesPerWindow: 200 });
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    expect(list.data).toHaveLength(1);
    id = list.data[0]!.id;
  });
  afterAll(async () => {
    await p.close();
  });

  async function sync(): Promise<{ states: Record<string, number>; problems: unknown[] }> {
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout);
  }

  it('the upgraded connector re-sends a byte-identical body under the same key: a replay, acknowledged once (regression: the version in the notes made it a 422)', async () => {
    expect((await sync()).states.acknowledged).toBe(1);

    // The "acknowledged" commit lost: the platform holds the ack, the state says "written".
    const db = new Database(cfg.dbPath);
    try {
      db.transaction(() => {
        db.prepare(
          `UPDATE loans SET state = 'written', acknowledged_at = NULL, boarded_at_iso = NULL WHERE id = ?`,
        ).run(id);
        db.prepare(
          `UPDATE idempotency_keys SET status = NULL, completed_at = NULL, response = NULL WHERE loan_id = ?`,
        ).run(id);
      })();
    } finally {
      db.close();
    }

    version.current = '1.5.0';
    const before = await p.counters();
    const s = await sync();
    expect(s.problems).toEqual([]);
    expect(s.states).toMatchObject({ acknowledged: 1, quarantined: 0 });

    const c = await p.counters();
    expect(c.acks[id]).toBe(1);
    expect(c.ackKeys[id]).toHaveLength(1);
    expect(c.duplicateAcks[id]).toBeUndefined();
    expect(c.idempotentReplays).toBe(before.idempotentReplays + 1);
    const keys = new Database(cfg.dbPath, { readonly: true });
    try {
      const rows = keys
        .prepare(`SELECT key, status FROM idempotency_keys WHERE loan_id = ? AND operation = 'ack'`)
        .all(id) as Array<{ key: string; status: number | null }>;
      // One key, completed with the platform's first answer replayed: no 422, no second key.
      expect(rows.map((r) => r.status)).toEqual([200]);
    } finally {
      keys.close();
    }
  });
});
