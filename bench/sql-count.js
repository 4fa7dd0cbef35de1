/**
 * A preload (`node --import ./bench/sql-count.js dist/main.js …`) that counts every statement the
 * process runs through better-sqlite3: each execution of a prepared statement (run, get, all,
 * iterate) and each `exec`, keyed by its SQL text, plus write transactions (a BEGIN IMMEDIATE that
 * ended in COMMIT), read transactions and savepoints. At exit it writes
 * `$SQL_COUNT_OUT/<pid>-<thread>.json`; `npm run bench -- board-cost` reads them. It changes no
 * behaviour: the original methods run with the same arguments.
 */
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import process from 'node:process';

const out = process.env.SQL_COUNT_OUT;
if (out) {
  // better-sqlite3 as the app resolves it (the repository's node_modules), whatever the cwd.
  const require = createRequire(import.meta.url);
  const Database = require('better-sqlite3');
  const statements = new Map();
  /** SQL_COUNT_TIME=1: wall ms spent in each statement too (what a COMMIT's fsync costs shows here). */
  const timed = process.env.SQL_COUNT_TIME === '1';
  const times = new Map();
  const clocked = (sql, fn) => {
    if (!timed) return fn();
    const t = process.hrtime.bigint();
    try {
      return fn();
    } finally {
      const key = sql.replace(/\s+/g, ' ').trim();
      times.set(key, (times.get(key) ?? 0) + Number(process.hrtime.bigint() - t) / 1e6);
    }
  };
  const tx = { write: 0, read: 0, rolledBack: 0, savepoints: 0, loanWrite: 0 };
  /** Write transactions that wrote a loan's row or event (a board's steps), apart from the run's own. */
  const writesLoan = new WeakSet();
  const LOAN_WRITE = /^(INSERT INTO|UPDATE) (loans|loan_events)\b/i;
  const open = new WeakMap();

  const note = (db, sql) => {
    const key = sql.replace(/\s+/g, ' ').trim();
    statements.set(key, (statements.get(key) ?? 0) + 1);
    const head = key.slice(0, 20).toUpperCase();
    if (head.startsWith('BEGIN')) open.set(db, head.startsWith('BEGIN IMMEDIATE') ? 'write' : 'read');
    else if (head.startsWith('COMMIT') || head.startsWith('END')) {
      const kind = open.get(db);
      if (kind === 'write') tx.write += 1;
      else if (kind === 'read') tx.read += 1;
      if (kind === 'write' && writesLoan.has(db)) tx.loanWrite += 1;
      writesLoan.delete(db);
      open.delete(db);
    } else if (head.startsWith('ROLLBACK') && !head.startsWith('ROLLBACK TO')) {
      tx.rolledBack += 1;
      writesLoan.delete(db);
      open.delete(db);
    } else if (head.startsWith('SAVEPOINT')) tx.savepoints += 1;
    else if (open.get(db) === 'write' && LOAN_WRITE.test(key)) writesLoan.add(db);
  };

  const probe = new Database(':memory:');
  const Statement = Object.getPrototypeOf(probe.prepare('SELECT 1'));
  probe.close();
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = Statement[method];
    Statement[method] = function (...args) {
      note(this.database, this.source);
      return clocked(this.source, () => original.apply(this, args));
    };
  }
  const exec = Database.prototype.exec;
  Database.prototype.exec = function (sql) {
    note(this, sql);
    return clocked(sql, () => exec.call(this, sql));
  };

  process.on('exit', () => {
    mkdirSync(out, { recursive: true });
    writeFileSync(
      join(out, `${process.pid}-${threadId}.json`),
      JSON.stringify({
        pid: process.pid,
        threadId,
        tx,
        statements: Object.fromEntries(statements),
        ...(timed ? { ms: Object.fromEntries(times) } : {}),
      }),
    );
  });
}
