import Database from 'better-sqlite3';

/**
 * Counts the statements one better-sqlite3 handle runs (every run/get/all/iterate of a prepared
 * statement and every exec, BEGIN/COMMIT/SAVEPOINT included), as bench/sql-count.js does for a whole
 * process: the cost tests assert on the count, so a statement added to a hot path fails them.
 * The original methods run unchanged; stop() puts them back.
 */
export interface StatementCounter {
  /** The SQL texts run since the counter started (or since reset), whitespace folded. */
  readonly seen: string[];
  reset(): void;
  stop(): void;
}

export function countStatements(db: Database.Database): StatementCounter {
  const seen: string[] = [];
  const note = (sql: string): void => {
    seen.push(sql.replace(/\s+/g, ' ').trim());
  };
  const probe = new Database(':memory:');
  const Statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<
    'run' | 'get' | 'all' | 'iterate',
    (...args: unknown[]) => unknown
  >;
  probe.close();
  const restore: Array<() => void> = [];
  for (const method of ['run', 'get', 'all', 'iterate'] as const) {
    const original = Statement[method];
    Statement[method] = function (this: Database.Statement, ...args: unknown[]) {
      if (this.database === db) note(this.source);
      return original.apply(this, args);
    };
    restore.push(() => {
      Statement[method] = original;
    });
  }
  const exec = Database.prototype.exec;
  Database.prototype.exec = function (this: Database.Database, sql: string) {
    if (this === db) note(sql);
    return exec.call(this, sql);
  };
  restore.push(() => {
    Database.prototype.exec = exec;
  });
  return {
    seen,
    reset: () => {
      seen.length = 0;
    },
    stop: () => {
      for (const r of restore.splice(0)) r();
    },
  };
}
