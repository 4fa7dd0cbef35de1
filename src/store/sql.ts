import { AsyncLocalStorage } from 'node:async_hooks';
import type Database from 'better-sqlite3';
import { CompiledQuery, Kysely, type DatabaseConnection } from 'kysely';
import type { Dialect, Engine } from './dialect.js';
import { FencedOut, type Fence, type FenceScope } from './leadership/fence.js';
import type { PgPool } from './pg/pool.js';

/**
 * The one query layer of the state store (issue 26): every repository in src/store runs its SQL
 * through a StoreDb, whichever engine holds the state. Kysely provides the connections: its
 * SqliteDialect over better-sqlite3 (one connection, which Kysely serialises with a mutex, so a
 * transaction that awaits keeps the connection to itself until it ends) and its PostgresDialect
 * over a pg pool. The repositories keep their SQL text (portable SQL, `?` placeholders; the few
 * statements that differ ask the engine's Dialect, store/sqlite/dialect.ts and store/pg/dialect.ts),
 * which compiles them to `$1…` for PostgreSQL.
 *
 * Units of work: `write(fn)` runs fn in one transaction (SQLite: BEGIN IMMEDIATE, see sqlite/db.ts;
 * PostgreSQL: BEGIN), `read(fn)` in one read transaction (a consistent snapshot). Every query made
 * while fn runs — by any repository, however deep — goes to that transaction's connection: the
 * transaction is carried by AsyncLocalStorage, so the repositories keep one interface and a caller
 * groups their calls with `store.write(async () => { await a(); await b(); })`. A write inside a
 * write is a savepoint (as better-sqlite3's nested transactions were): it rolls back alone.
 *
 * The fence (issue 26 point 2, the hook): `write(fn, { fence })` first checks, inside the same
 * transaction, that the lease is still held by the fence's holder and epoch and unexpired on the
 * database's clock (PostgreSQL: the leader_lease row locked FOR KEY SHARE, so a takeover, which
 * locks it FOR UPDATE, waits for this transaction, and a renewal does not; SQLite: the leases
 * row, read under the IMMEDIATE write lock that a takeover also needs). Otherwise it throws
 * FencedOut before fn runs: the transaction changes 0 rows.
 */

export type { Engine, Dialect } from './dialect.js';
export { FencedOut, type Fence, type FenceScope } from './leadership/fence.js';

export interface RunResult {
  changes: number;
}

export type Params = readonly unknown[];

interface TxContext {
  conn: DatabaseConnection;
  readOnly: boolean;
  depth: number;
  done: boolean;
}

/** The parts of a StoreDb, built by its engine's module (store/sqlite/store.ts, store/pg/store.ts). */
export interface StoreDbParts {
  dialect: Dialect;
  /** The better-sqlite3 handle (SQLite only). */
  sqlite?: Database.Database;
  /** The pool (PostgreSQL only). */
  pool?: PgPool;
  location: string;
  instance?: string | null;
}

export class StoreDb {
  /** What differs between the engines: ask it, never the engine's name (dialect.ts). */
  readonly dialect: Dialect;
  /** The better-sqlite3 handle (SQLite only): pragmas, backups, WAL checkpoints. */
  readonly sqlite: Database.Database | null;
  /** The pool (PostgreSQL only). */
  readonly pool: PgPool | null;
  /** Where the state lives, for messages: the SQLite path or the redacted URL. */
  readonly location: string;
  /**
   * PostgreSQL: this process's connections carry `application_name` = `boarding-connector <instance>`,
   * and its leadership holder id ends in it, so a replica that takes over the lease from a stale
   * holder can end that holder's sessions (src/store/leadership/pg.ts evict). null on SQLite.
   */
  instance: string | null;
  /**
   * Hears every statement a repository runs, with its parameters, before it runs: the tests that check
   * the per-loan statements' query plans (an index, never a scan of a table that grows with the
   * loans) collect them here. Unset in the connector.
   */
  onStatement: ((text: string, params: Params) => void) | undefined = undefined;
  private readonly kysely: Kysely<unknown>;
  private readonly als = new AsyncLocalStorage<TxContext>();
  private readonly fenceAls = new AsyncLocalStorage<FenceScope>();
  private closed = false;

  constructor(parts: StoreDbParts) {
    this.dialect = parts.dialect;
    this.kysely = new Kysely<unknown>({ dialect: parts.dialect.kysely });
    this.sqlite = parts.sqlite ?? null;
    this.pool = parts.pool ?? null;
    this.location = parts.location;
    this.instance = parts.instance ?? null;
  }

  /** The engine's name, for messages (branch on a dialect capability instead). */
  get engine(): Engine {
    return this.dialect.name;
  }

  get isOpen(): boolean {
    return !this.closed && (this.sqlite === null || this.sqlite.open);
  }

  /** True while the caller runs inside write()/read(). */
  get inTransaction(): boolean {
    const ctx = this.als.getStore();
    return ctx !== undefined && !ctx.done;
  }

  private compile(text: string, params: Params): CompiledQuery {
    return CompiledQuery.raw(this.dialect.compile(text), params as unknown[]);
  }

  private async execute<R>(text: string, params: Params): Promise<{ rows: R[]; numAffectedRows?: bigint }> {
    this.onStatement?.(text, params);
    const ctx = this.als.getStore();
    const q = this.compile(text, params);
    if (ctx !== undefined && !ctx.done) return ctx.conn.executeQuery<R>(q);
    return this.kysely.executeQuery<R>(q);
  }

  async all<R>(text: string, params: Params = []): Promise<R[]> {
    return (await this.execute<R>(text, params)).rows;
  }

  async get<R>(text: string, params: Params = []): Promise<R | undefined> {
    return (await this.execute<R>(text, params)).rows[0];
  }

  async run(text: string, params: Params = []): Promise<RunResult> {
    const r = await this.execute<unknown>(text, params);
    return { changes: r.numAffectedRows === undefined ? r.rows.length : Number(r.numAffectedRows) };
  }

  /**
   * Runs fn with every write transaction it starts (directly or through any repository) fenced by
   * the scope: see FenceScope and Leadership.guard.
   */
  withFence<T>(scope: FenceScope, fn: () => Promise<T>): Promise<T> {
    return this.fenceAls.run(scope, fn);
  }

  /** The fence scope the caller runs in, if any (the leader's work). */
  get fenceScope(): FenceScope | undefined {
    return this.fenceAls.getStore();
  }

  /** Runs fn in one write transaction; nested: a savepoint. See the file comment. */
  async write<T>(fn: () => Promise<T>, opts: { fence?: Fence; unfenced?: boolean } = {}): Promise<T> {
    const outer = this.als.getStore();
    if (outer !== undefined && !outer.done) {
      if (outer.readOnly) throw new Error('a write transaction cannot start inside a read transaction');
      if (opts.fence) await this.checkFence(outer.conn, opts.fence);
      return this.savepoint(outer, fn);
    }
    // unfenced: the lease statements themselves, and what every replica may write (the inbox).
    const scope = opts.fence || opts.unfenced === true ? undefined : this.fenceAls.getStore();
    if (scope !== undefined) {
      const fence = scope.current();
      if (fence === null) {
        const err = new FencedOut({ name: scope.name, holder: scope.holder, epoch: 0 }, null, {
          reason: 'not_leader',
          why: 'this replica no longer leads',
        });
        scope.onFencedOut(err);
        throw err;
      }
      try {
        return await this.writeTx(fn, fence, scope.idleTimeoutMs);
      } catch (err) {
        if (err instanceof FencedOut) scope.onFencedOut(err);
        throw err;
      }
    }
    return this.writeTx(fn, opts.fence);
  }

  private async writeTx<T>(
    fn: () => Promise<T>,
    fence: Fence | undefined,
    idleTimeoutMs?: number,
  ): Promise<T> {
    return this.kysely.connection().execute(async (k) => {
      // connection() pins one connection; its executor gives us that connection's raw handle.
      let conn: DatabaseConnection | null = null;
      await k.getExecutor().provideConnection(async (c) => {
        conn = c;
        await this.dialect.beginWrite(c, fence, idleTimeoutMs);
      });
      return this.runTx(conn as unknown as DatabaseConnection, false, fn, fence);
    });
  }

  /** Runs fn in one read transaction (a consistent snapshot); inside a transaction, in that one. */
  async read<T>(fn: () => Promise<T>): Promise<T> {
    const outer = this.als.getStore();
    if (outer !== undefined && !outer.done) return fn();
    return this.kysely.connection().execute(async (k) => {
      let conn: DatabaseConnection | null = null;
      await k.getExecutor().provideConnection(async (c) => {
        conn = c;
        await c.executeQuery(CompiledQuery.raw(this.dialect.beginRead));
      });
      return this.runTx(conn as unknown as DatabaseConnection, true, fn);
    });
  }

  private async runTx<T>(
    conn: DatabaseConnection,
    readOnly: boolean,
    fn: () => Promise<T>,
    fence?: Fence,
  ): Promise<T> {
    const ctx: TxContext = { conn, readOnly, depth: 0, done: false };
    try {
      if (fence) await this.checkFence(conn, fence);
      const out = await this.als.run(ctx, fn);
      await conn.executeQuery(CompiledQuery.raw('COMMIT'));
      return out;
    } catch (err) {
      try {
        await conn.executeQuery(CompiledQuery.raw('ROLLBACK'));
      } catch {
        // Nothing to roll back (the failure ended the transaction) or the connection is gone.
      }
      throw err;
    } finally {
      ctx.done = true;
    }
  }

  private async savepoint<T>(ctx: TxContext, fn: () => Promise<T>): Promise<T> {
    ctx.depth += 1;
    const name = `sp_${ctx.depth}`;
    await ctx.conn.executeQuery(CompiledQuery.raw(`SAVEPOINT ${name}`));
    try {
      const out = await fn();
      await ctx.conn.executeQuery(CompiledQuery.raw(`RELEASE SAVEPOINT ${name}`));
      return out;
    } catch (err) {
      await ctx.conn.executeQuery(CompiledQuery.raw(`ROLLBACK TO SAVEPOINT ${name}`));
      await ctx.conn.executeQuery(CompiledQuery.raw(`RELEASE SAVEPOINT ${name}`));
      throw err;
    } finally {
      ctx.depth -= 1;
    }
  }

  /** The fence check, on the transaction's connection (see the file comment). */
  private checkFence(conn: DatabaseConnection, fence: Fence): Promise<void> {
    return this.dialect.checkFence(conn, fence);
  }

  /**
   * Why the store would refuse a write now, or null when it would take one (the readiness check).
   * SQLite: BEGIN IMMEDIATE takes the write lock, then rolls back. PostgreSQL: the server answers
   * and is not read-only (a standby after a failover is).
   */
  async writeBlocker(): Promise<string | null> {
    if (!this.isOpen) return 'state database is closed';
    try {
      return await this.dialect.writeBlocker({
        write: () => this.write(() => Promise.resolve()),
        get: <R>(text: string) => this.get<R>(text),
      });
    } catch (err) {
      return `state database not writable: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  /** Runs DDL / several statements in one text (migrations), in the caller's transaction if any. */
  async exec(text: string): Promise<void> {
    const ctx = this.als.getStore();
    if (ctx !== undefined && !ctx.done) return this.dialect.exec(ctx.conn, text);
    await this.kysely.connection().execute(async (k) => {
      await k.getExecutor().provideConnection((c) => this.dialect.exec(c, text));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.kysely.destroy();
  }
}

/** `@name` placeholders with a map of values → `?` placeholders with the values in order. */
export function named(text: string, params: Readonly<Record<string, unknown>>): [string, unknown[]] {
  const values: unknown[] = [];
  const out = text.replace(/@([A-Za-z_][A-Za-z0-9_]*)/g, (_m, k: string) => {
    if (!Object.hasOwn(params, k)) throw new Error(`SQL parameter @${k} has no value`);
    values.push(params[k]);
    return '?';
  });
  return [out, values];
}
