import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeId } from '../../../src/core/safe-name.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

/**
 * An asynchronous PostgreSQL standby promoted after a failover can lack the last commits: the
 * acknowledgement reached the platform (which stored our request under its Idempotency-Key) but the
 * state rolled back to before it. The loan is acknowledged again with the same key, and the
 * sandbox, like the platform, answers 422 when the body under a key differs. Simulated on SQLite by
 * rolling the loan's row back to what it was before the lost commits.
 */
describe('acknowledgement after a lost commit', () => {
  let p: TestPlatform;
  let cfg: ReturnType<typeof writeConnectorConfig>;
  let ids: string[];

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 3,
      releaseRatio: 1,
      seed: 5,
      windowMs: 1000,
      readsPerWindow: 500,
      writesPerWindow: 200,
    });
    cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 500, writesPerWindow: 200 });
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    ids = list.data.map((l) => l.id);
    expect(ids).toHaveLength(3);
    const first = await sync();
    expect(first.states.acknowledged).toBe(3);
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

  function rollBack(id: string, to: 'written' | 'mapped'): void {
    const db = new Database(cfg.dbPath);
    try {
      db.transaction(() => {
        if (to === 'written') {
          // The "acknowledged" commit lost.
          db.prepare(
            `UPDATE loans SET state = 'written', acknowledged_at = NULL, boarded_at_iso = NULL WHERE id = ?`,
          ).run(id);
          db.prepare(
            `UPDATE idempotency_keys SET status = NULL, completed_at = NULL, response = NULL WHERE loan_id = ?`,
          ).run(id);
        } else {
          // The "written" commit lost too: the core holds the write, the state does not know it.
          db.prepare(
            `UPDATE loans SET state = 'mapped', acknowledged_at = NULL, boarded_at_iso = NULL, written_at = NULL,
               core_reference = NULL, written_release_marker = NULL, boarded_records = NULL WHERE id = ?`,
          ).run(id);
          db.prepare(`DELETE FROM idempotency_keys WHERE loan_id = ?`).run(id);
        }
      })();
    } finally {
      db.close();
    }
  }

  async function expectAcknowledgedOnce(id: string): Promise<void> {
    const shown = await runCli(['--config', cfg.configPath, 'loans', 'show', id, '--json']);
    expect(shown.code, shown.error ?? '').toBe(0);
    const { loan } = JSON.parse(shown.stdout) as { loan: { state: string; quarantineReason: string | null } };
    expect(loan.state).toBe('acknowledged');
    expect(loan.quarantineReason).toBeNull();
    const c = await p.counters();
    // The platform boarded it once, under one key; the re-send was a replay, not a new board.
    expect(c.acks[id]).toBe(1);
    expect(c.ackKeys[id]).toHaveLength(1);
    expect(c.duplicateAcks[id]).toBeUndefined();
    expect(readdirSync(join(cfg.coreDir, 'packages'))).toContain(safeId(id));
  }

  it('a loan whose "written" and "acknowledged" commits were lost is written again and acknowledged once, not ack_rejected (regression: the re-write gave the ack body a new boardedAt, 422 under the same key)', async () => {
    const id = ids[0]!;
    const before = (await p.counters()).idempotentReplays;
    rollBack(id, 'mapped');
    // Time passes between the first write and the re-write (a failover takes seconds).
    await new Promise((r) => setTimeout(r, 20));
    const s = await sync();
    expect(s.problems).toEqual([]);
    expect(s.states).toMatchObject({ acknowledged: 3, quarantined: 0 });
    await expectAcknowledgedOnce(id);
    expect((await p.counters()).idempotentReplays).toBe(before + 1);
  });

  it('a loan whose "acknowledged" commit was lost is acknowledged once, the re-send a byte-identical replay', async () => {
    const id = ids[1]!;
    const before = (await p.counters()).idempotentReplays;
    rollBack(id, 'written');
    const s = await sync();
    expect(s.problems).toEqual([]);
    expect(s.states).toMatchObject({ acknowledged: 3, quarantined: 0 });
    await expectAcknowledgedOnce(id);
    expect((await p.counters()).idempotentReplays).toBe(before + 1);
  });

  it('an acknowledgement whose body changed under its key (the connector upgraded or the mapping changed between the accepted ack and its lost commit) is sent once under a key of its own body: the platform says already boarded, the loan is acknowledged, not ack_rejected', async () => {
    const id = ids[2]!;
    rollBack(id, 'written');
    const db = new Database(cfg.dbPath);
    try {
      // The notes carry the mapping version: another version is another body under the same key.
      db.prepare(`UPDATE loans SET mapping_version = 'edited-since' WHERE id = ?`).run(id);
    } finally {
      db.close();
    }
    const before = await p.counters();
    const s = await sync();
    expect(s.problems).toEqual([]);
    expect(s.states).toMatchObject({ acknowledged: 3, quarantined: 0 });
    const shown = await runCli(['--config', cfg.configPath, 'loans', 'show', id, '--json']);
    const { loan } = JSON.parse(shown.stdout) as { loan: { state: string; quarantineReason: string | null } };
    expect(loan.state).toBe('acknowledged');
    expect(loan.quarantineReason).toBeNull();
    const c = await p.counters();
    // Boarded once: the first key's ack; the second key met "already boarded", no second board.
    expect(c.acks[id]).toBe(1);
    expect(c.duplicateAcks[id]).toBe((before.duplicateAcks[id] ?? 0) + 1);
    expect(c.idempotentReplays).toBe(before.idempotentReplays);
    // The second key is stored, completed, beside the first.
    const keys = new Database(cfg.dbPath, { readonly: true });
    try {
      const rows = keys
        .prepare(
          `SELECT key, status FROM idempotency_keys WHERE loan_id = ? AND operation = 'ack' ORDER BY key`,
        )
        .all(id) as Array<{ key: string; status: number | null }>;
      expect(rows).toHaveLength(2);
      expect(rows.map((r) => r.status).sort()).toEqual([409, 422]);
    } finally {
      keys.close();
    }
  });

  it('a new process finishes a loan left in flight before it walks the queue (a takeover acknowledges without waiting for the walk)', async () => {
    const id = ids[1]!;
    rollBack(id, 'written');
    const since = Date.now();
    const s = await sync();
    expect(s.problems).toEqual([]);
    await expectAcknowledgedOnce(id);
    const log = (await p.admin('GET', `/requests?since=${since}`)) as {
      data: Array<{ route: string; loanId?: string | null; at: number }>;
    };
    const routes = log.data.map((e) => e.route);
    const ack = routes.indexOf('POST /public/v1/loans/:id/boarding');
    const walk = routes.indexOf('GET /public/v1/loans/boarding-queue');
    expect(ack, routes.join(', ')).toBeGreaterThanOrEqual(0);
    expect(walk, routes.join(', ')).toBeGreaterThanOrEqual(0);
    expect(ack, routes.join(', ')).toBeLessThan(walk);
  });
});
