import { AsyncLocalStorage } from 'node:async_hooks';
import type Database from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  SqliteDialect,
  type DatabaseConnection,
  type SqliteDatabase,
  type SqliteStatement,
} from 'kysely';
import type { PgPool } from './pg/pool.js';

/**
 * The one query layer of the state store (issue 26): every repository in src/store runs its SQL
 * through a StoreDb, whichever engine holds the state. Kysely provides the connections: its
 * SqliteDialect over better-sqlite3 (one connection, which Kysely serialises with a mutex, so a
 * transaction that awaits keeps the connection to itself until it ends) and its PostgresDialect
 * over a pg pool. The repositories keep their SQL text (portable SQL, `?` placeholders; the few
 * statements that differ have one text per engine, chosen by `engine`), which is compiled to
 * `$1…` for PostgreSQL here.
 *
 * Units of work: `write(fn)` runs fn in one transaction (SQLite: BEGIN IMMEDIATE, see db.ts;
 * PostgreSQL: BEGIN), `read(fn)` in one read transaction (a consistent snapshot). Every query made
 * while fn runs — by any repository, however deep — goes to that transaction's connection: the
 * transaction is carried by AsyncLocalStorage, so the repositories keep one interface and a caller
 * groups their calls with `store.write(async () => { await a(); await b(); })`. A write inside a
 * write is a savepoint (as better-sqlite3's nested transactions were): it rolls back alone.
 *
 * The fence (issue 26 point 2, the hook): `write(fn, { fence })` first checks, inside the same
 * transaction, that the lease is still held by the fence's holder and epoch and unexpired on the
 * database's clock (PostgreSQL: the leader_lease row locked FOR SHARE, so a takeover waits for
 * this transaction; SQLite: the leases row, read under the IMMEDIATE write lock that a takeover
 * also needs). Otherwise it throws FencedOut before fn runs: the transaction changes 0 rows.
 */

export type Engine = 'sqlite' | 'postgres';

export interface Fence {
  /** The lease's name (e.g. 'boarding'). */
  name: string;
  holder: string;
  epoch: number;
}

/** A stale holder's write: the lease moved on (another holder or epoch) or expired. Nothing was written. */
export class FencedOut extends Error {
  override readonly name = 'FencedOut';
  constructor(
    readonly fence: Fence,
    readonly found: { holder: string | null; epoch: number; live: boolean } | null,
    why?: string,
  ) {
    super(
      why !== undefined
        ? `lease ${fence.name}: ${why}: ${fence.holder} may not write`
        : found === null
          ? `lease ${fence.name} is not held: ${fence.holder} (epoch ${fence.epoch}) may not write`
          : `lease ${fence.name} is ${found.holder === fence.holder && found.epoch === fence.epoch ? 'expired' : `held by ${found.holder ?? 'nobody'} epoch ${found.epoch}`}: ${fence.holder} (epoch ${fence.epoch}) may not write`,
    );
  }
}

/**
 * The leader's work (Leadership.guard): every write transaction started inside it checks the
 * fence `current()` returns — null once the term it started in is over, and then the write is
 * refused before it runs.
 */
export interface FenceScope {
  name: string;
  holder: string;
  current(): Fence | null;
  /** A write was refused: the lease moved on (the replica steps down). */
  onFencedOut(err: FencedOut): void;
  /** PostgreSQL: a fenced transaction left idle this long is ended by the server (a paused leader cannot block a takeover). */
  idleTimeoutMs?: number;
}

/**
 * The fence's statement on PostgreSQL ($1 name, $2 holder, $3 epoch): one row when the lease still
 * has that holder and epoch and has not expired on the database's clock, and that row is then
 * locked FOR SHARE (a takeover's UPDATE waits for the transaction). A lease that no longer matches
 * is refused at once: the condition filters before the lock, so a stale holder never waits for
 * an uncommitted takeover. One text for the store's fenced writes and PgLeadership.fenced.
 */
export const PG_FENCE_SQL = `SELECT 1 FROM leader_lease
  WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp() FOR SHARE`;

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

/** `?` placeholders (outside quotes) → `$1, $2…`. */
export function toPgPlaceholders(text: string): string {
  let out = '';
  let n = 0;
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote !== null) {
      if (c === quote) quote = null;
      out += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      out += c;
    } else if (c === '?') {
      n += 1;
      out += `$${n}`;
    } else out += c;
  }
  return out;
}

/**
 * Prepared statements are compiled once per SQL text (better-sqlite3's prepare parses the SQL
 * every time; the repositories send a few dozen distinct texts). Kysely's SqliteDialect asks
 * `database.prepare` for every query; this answers from the cache.
 */
function cachingDatabase(db: Database.Database): SqliteDatabase {
  const cache = new Map<string, SqliteStatement>();
  return {
    close: () => {
      db.close();
    },
    prepare: (text: string) => {
      let stmt = cache.get(text);
      if (stmt === undefined) {
        stmt = db.prepare(text);
        if (cache.size < 2000) cache.set(text, stmt);
      }
      return stmt;
    },
  };
}

const SQLITE_HANDLES = new WeakMap<Database.Database, StoreDb>();

/** The advisory lock every PostgreSQL write transaction takes (any constant; 'boaw'). */
const WRITE_LOCK = 0x626f6177;
/** PostgreSQL: a write transaction left idle this long is ended by the server (see writeTx). */
const WRITE_IDLE_TIMEOUT_MS = 15_000;

export class StoreDb {
  readonly engine: Engine;
  /** The better-sqlite3 handle (SQLite only): pragmas, backups, WAL checkpoints. */
  readonly sqlite: Database.Database | null;
  /** The pool (PostgreSQL only). */
  readonly pool: PgPool | null;
  /** Where the state lives, for messages: the SQLite path or the redacted URL. */
  readonly location: string;
  /**
   * PostgreSQL: this process's connections carry `application_name` = `boarding-connector <instance>`,
   * and its leadership holder id ends in it, so a replica that takes over the lease from a stale
   * holder can end that holder's sessions (src/store/pg/leadership.ts evict). null on SQLite.
   */
  instance: string | null = null;
  /**
   * Hears every statement a repository runs, with its parameters, before it runs: the tests that check
   * the per-loan statements' query plans (an index, never a scan of a table that grows with the
   * loans) collect them here. Unset in the connector.
   */
  onStatement: ((text: string, params: Params) => void) | undefined = undefined;
  private readonly kysely: Kysely<unknown>;
  private readonly als = new AsyncLocalStorage<TxContext>();
  private readonly fenceAls = new AsyncLocalStorage<FenceScope>();
  private readonly pgText = new Map<string, string>();
  private closed = false;

  private constructor(
    engine: Engine,
    k: Kysely<unknown>,
    sqlite: Database.Database | null,
    pool: PgPool | null,
    location: string,
  ) {
    this.engine = engine;
    this.kysely = k;
    this.sqlite = sqlite;
    this.pool = pool;
    this.location = location;
  }

  /**
   * The StoreDb of a better-sqlite3 connection: always the same one for the same connection (its
   * transactions must share one queue, or two units of work would interleave on the connection).
   */
  static sqliteOn(db: Database.Database): StoreDb {
    let s = SQLITE_HANDLES.get(db);
    if (s === undefined) {
      const k = new Kysely<unknown>({ dialect: new SqliteDialect({ database: cachingDatabase(db) }) });
      s = new StoreDb('sqlite', k, db, null, db.name);
      SQLITE_HANDLES.set(db, s);
    }
    return s;
  }

  static postgresOn(pool: PgPool, location: string, instance: string | null = null): StoreDb {
    const k = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
    const db = new StoreDb('postgres', k, null, pool, location);
    db.instance = instance;
    return db;
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
    if (this.engine === 'sqlite') return CompiledQuery.raw(text, params as unknown[]);
    let pgText = this.pgText.get(text);
    if (pgText === undefined) {
      pgText = toPgPlaceholders(text);
      if (this.pgText.size < 2000) this.pgText.set(text, pgText);
    }
    return CompiledQuery.raw(pgText, params as unknown[]);
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
        const err = new FencedOut(
          { name: scope.name, holder: scope.holder, epoch: 0 },
          null,
          'this replica no longer leads',
        );
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
        await c.executeQuery(CompiledQuery.raw(this.engine === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN'));
        // PostgreSQL: write transactions take one transaction-scoped advisory lock first, so they
        // run one at a time across every replica, as SQLite's IMMEDIATE lock makes them: each
        // repository's read-then-write (a lease, a number, a transition) stays race-free without
        // a retry loop. Reads never wait for it. Released at COMMIT/ROLLBACK (PgBouncer-safe).
        //
        // A process paused inside a write transaction (SIGSTOP, a long GC, a hung host) holds that
        // lock, and in a fenced one the lease row FOR SHARE: the server ends the transaction once it
        // sits idle this long (the lease's TTL when fenced), so neither every other replica's
        // writes nor a takeover wait for ever. set_config(…, true) is SET LOCAL, in the same round trip.
        if (this.engine === 'postgres') {
          const idle = Math.max(
            1,
            Math.round(fence && idleTimeoutMs !== undefined ? idleTimeoutMs : WRITE_IDLE_TIMEOUT_MS),
          );
          await c.executeQuery(
            CompiledQuery.raw(
              `SELECT pg_advisory_xact_lock(${WRITE_LOCK}), set_config('idle_in_transaction_session_timeout', '${idle}', true)`,
            ),
          );
        }
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
        await c.executeQuery(
          CompiledQuery.raw(
            this.engine === 'sqlite' ? 'BEGIN' : 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY',
          ),
        );
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
  private async checkFence(conn: DatabaseConnection, fence: Fence): Promise<void> {
    if (this.engine === 'postgres') {
      if (
        (await conn.executeQuery(CompiledQuery.raw(PG_FENCE_SQL, [fence.name, fence.holder, fence.epoch])))
          .rows.length === 1
      )
        return;
      // Refused: who holds it now, for the message only (no lock).
      const row = (
        await conn.executeQuery<{ holder: string | null; epoch: number | string; live: boolean }>(
          CompiledQuery.raw(
            'SELECT holder, epoch, expires_at > clock_timestamp() AS live FROM leader_lease WHERE name = $1',
            [fence.name],
          ),
        )
      ).rows[0];
      throw new FencedOut(
        fence,
        row === undefined ? null : { holder: row.holder, epoch: Number(row.epoch), live: row.live },
      );
    }
    const row = (
      await conn.executeQuery<{ holder: string | null; epoch: number | string; live: number }>(
        CompiledQuery.raw(
          `SELECT owner AS holder, epoch,
                  (expires_at IS NULL OR expires_at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) AS live
             FROM leases WHERE name = ?`,
          [fence.name],
        ),
      )
    ).rows[0];
    const found =
      row === undefined ? null : { holder: row.holder, epoch: Number(row.epoch), live: row.live === 1 };
    if (found === null || !found.live || found.holder !== fence.holder || found.epoch !== fence.epoch)
      throw new FencedOut(fence, found);
  }

  /**
   * Why the store would refuse a write now, or null when it would take one (the readiness check).
   * SQLite: BEGIN IMMEDIATE takes the write lock, then rolls back. PostgreSQL: the server answers
   * and is not read-only (a standby after a failover is).
   */
  async writeBlocker(): Promise<string | null> {
    if (!this.isOpen) return 'state database is closed';
    if (this.sqlite?.readonly === true) return 'state database is read-only';
    try {
      if (this.engine === 'sqlite') {
        await this.write(() => Promise.resolve());
        return null;
      }
      const r = await this.get<{ ro: string }>("SELECT current_setting('transaction_read_only') AS ro");
      return r?.ro === 'on' ? 'state database (PostgreSQL) is read-only (a standby?)' : null;
    } catch (err) {
      return `state database not writable: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  /** Runs DDL / several statements in one text (migrations). */
  async exec(text: string): Promise<void> {
    const ctx = this.als.getStore();
    if (this.engine === 'sqlite') {
      // better-sqlite3's exec runs a multi-statement script; inside a transaction it is on the
      // transaction's (the only) connection.
      (this.sqlite as Database.Database).exec(text);
      return;
    }
    const q = CompiledQuery.raw(text, []);
    if (ctx !== undefined && !ctx.done) await ctx.conn.executeQuery(q);
    else await this.kysely.executeQuery(q);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.kysely.destroy();
  }
}

/** A repository's handle: a StoreDb, or a better-sqlite3 connection (its StoreDb). */
export type AnyDb = StoreDb | Database.Database;

export function toStoreDb(db: AnyDb): StoreDb {
  return db instanceof StoreDb ? db : StoreDb.sqliteOn(db);
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
