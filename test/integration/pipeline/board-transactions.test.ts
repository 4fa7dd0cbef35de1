import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

/**
 * What a board costs the state database in commits (issue 44 item 5): one write transaction per
 * crash step — before the core write, after it (with the file core's batch row), after the
 * acknowledgement — and no other commit that carries the loan. Counted on better-sqlite3 itself
 * (as bench/sql-count.js does): every BEGIN IMMEDIATE … COMMIT, and every write statement run
 * outside a transaction (its own commit), that names the loan in its parameters.
 */
interface Commit {
  statements: string[];
  params: unknown[];
}

function countCommits(): { commits: Commit[]; restore: () => void } {
  const commits: Commit[] = [];
  const open = new WeakMap<object, Commit>();
  const probe = new Database(':memory:');
  const Statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  probe.close();
  const originals = new Map<string, unknown>();
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = Statement[method] as (...a: unknown[]) => unknown;
    originals.set(method, original);
    Statement[method] = function (this: { source: string; database: object }, ...args: unknown[]) {
      const sql = this.source.replace(/\s+/g, ' ').trim();
      const head = sql.slice(0, 16).toUpperCase();
      if (head.startsWith('BEGIN IMMEDIATE')) open.set(this.database, { statements: [], params: [] });
      else if (head.startsWith('COMMIT')) {
        const tx = open.get(this.database);
        if (tx !== undefined) commits.push(tx);
        open.delete(this.database);
      } else if (head.startsWith('ROLLBACK') && !head.startsWith('ROLLBACK TO')) open.delete(this.database);
      else {
        const tx = open.get(this.database);
        const flat = args.flatMap((a) => (Array.isArray(a) ? (a as unknown[]) : [a]));
        if (tx !== undefined) {
          tx.statements.push(sql);
          tx.params.push(...flat);
        } else if (/^(INSERT|UPDATE|DELETE|REPLACE)/i.test(sql)) {
          commits.push({ statements: [sql], params: flat });
        }
      }
      return original.apply(this, args);
    };
  }
  return {
    commits,
    restore: () => {
      for (const [m, f] of originals) Statement[m] = f;
    },
  };
}

describe('a board commits once per crash step', () => {
  let p: TestPlatform;

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 1,
      releaseRatio: 1,
      seed: 11,
      windowMs: 1000,
      readsPerWindow: 500,
      writesPerWindow: 200,
    });
  });
  afterAll(async () => {
    await p.close();
  });

  it('boards one loan on the file core in 3 write transactions that carry it (intake aside), none outside them', async () => {
    const cfg = writeConnectorConfig(p, { windowMs: 1000, readsPerWindow: 500, writesPerWindow: 200 });
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    const id = list.data[0]?.id as string;
    expect(list.data).toHaveLength(1);
    const counter = countCommits();
    let r: Awaited<ReturnType<typeof runCli>>;
    try {
      r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    } finally {
      counter.restore();
    }
    expect(r.error).toBeNull();
    expect((JSON.parse(r.stdout) as { states: Record<string, number> }).states.acknowledged).toBe(1);
    const forLoan = counter.commits.filter((c) => c.params.includes(id));
    // The queue page that first records the loan is the walk's, not the board's.
    const intake = forLoan.filter((c) => c.statements.some((s) => s.startsWith('INSERT INTO loans')));
    const board = forLoan.filter((c) => !intake.includes(c));
    expect(intake).toHaveLength(1);
    const states = board.map(
      (c) =>
        c.statements
          .filter((s) => s.startsWith('UPDATE loans SET'))
          .map((s) => /state = \?/.test(s))
          .filter(Boolean).length,
    );
    // Before the core write: fetched and mapped; after it: written (+ the batch row); after the ack: acknowledged.
    expect(board, board.map((c) => c.statements.join('\n  ')).join('\n---\n')).toHaveLength(3);
    expect(states).toEqual([2, 1, 1]);
    expect(board[1]?.statements.some((s) => s.startsWith('INSERT INTO file_batch_loans'))).toBe(true);
    expect(board[1]?.statements.some((s) => s.startsWith('INSERT INTO idempotency_keys'))).toBe(true);
    expect(board[2]?.statements.some((s) => s.startsWith('UPDATE idempotency_keys'))).toBe(true);
    // The state it ends in, as stored.
    const db = new Database(cfg.dbPath, { readonly: true });
    try {
      expect(db.prepare('SELECT state FROM loans WHERE id = ?').get(id)).toEqual({ state: 'acknowledged' });
      const to = db
        .prepare("SELECT to_state FROM loan_events WHERE loan_id = ? AND kind = 'transition' ORDER BY seq")
        .all(id)
        .map((e) => (e as { to_state: string }).to_state);
      expect(to).toEqual(['queued', 'fetched', 'mapped', 'written', 'acknowledged']);
    } finally {
      db.close();
    }
  });
});
