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
 * write joins it (issue 44 item 5: a savepoint per repository call was two statements of every
 * five a board ran): its statements commit or roll back with the outer transaction. When a joined
 * write throws after it ran a statement, the outer transaction can no longer commit (it is marked
 * rollback-only, and its commit throws the inner error) — half of a unit never commits because a
 * caller caught its error. A caller that truly rolls back part of its work and goes on asks for
 * `write(fn, { savepoint: true })` (the webhook inbox's row-by-row pass does).
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

export interface WriteOptions {
  /** Checked inside the transaction; given: this fence, not the scope's. */
  fence?: Fence;
  /** Not fenced by the caller's scope: the lease statements, and what every replica may write. */
  unfenced?: boolean;
  /** Nested: a savepoint that rolls back alone (the caller goes on after its failure). */
  savepoint?: boolean;
}

interface TxContext {
  /** null: a unit whose transaction has not begun (nothing written yet). */
  conn: DatabaseConnection | null;
  readOnly: boolean;
  depth: number;
  done: boolean;
  /** Statements run on conn so far (a joined write that failed after running one spoils the unit). */
  statements: number;
  /** A joined write failed after it changed something: the transaction may only roll back. */
  spoiled: { err: unknown } | null;
  /** The fence still to check in this transaction (SQLite: by a statement or before COMMIT). */
  fence: Fence | null;
  fenceHeld: boolean;
  afterCommit: Array<() => Promise<void>>;
  /** The leader's scope the transaction was started in (told when it is fenced out). */
  scope: FenceScope | undefined;
  explicitFence: Fence | null;
  /** Unpins the connection once the transaction ended. */
  release: (() => void) | null;
  /** The begin under way (two writes started at once in a unit begin one transaction). */
  beginning?: Promise<DatabaseConnection>;
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

/**
 * The transaction and the fence scope each StoreDb's caller runs in, carried by ONE
 * AsyncLocalStorage for the whole process, keyed by StoreDb: on Node 20 every AsyncLocalStorage
 * ever run stays in the process's list until disabled, and each promise made copies a slot for
 * every one in that list. One pair per StoreDb made every promise of the process dearer with each
 * store opened (the console's, a test's, a re-opened one): in the unit tests, which share a
 * process, a mapping file's CPU-bound test took 15 times as long as alone. The transaction and the
 * fence share the one storage too: each storage costs every promise a copy.
 */
interface DbContext {
  readonly tx?: TxContext | undefined;
  readonly fence?: FenceScope | undefined;
}
const contextStorage = new AsyncLocalStorage<ReadonlyMap<StoreDb, DbContext>>();

/** The context map with key's entry changed by patch, a copy: outer contexts keep theirs. */
function withEntry(key: StoreDb, patch: DbContext): Map<StoreDb, DbContext> {
  const next = new Map(contextStorage.getStore());
  const entry = { ...next.get(key), ...patch };
  if (entry.tx === undefined && entry.fence === undefined) next.delete(key);
  else next.set(key, entry);
  return next;
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
    const ctx = this.txContext();
    return ctx !== undefined && !ctx.done && ctx.conn !== null;
  }

  /** The transaction the caller runs in on this StoreDb, if any. */
  private txContext(): TxContext | undefined {
    return contextStorage.getStore()?.get(this)?.tx;
  }

  /** Runs fn with ctx as this StoreDb's transaction (other StoreDbs' stay as they are). */
  private runIn<T>(ctx: TxContext, fn: () => Promise<T>): Promise<T> {
    return contextStorage.run(withEntry(this, { tx: ctx }), fn);
  }

  private compile(text: string, params: Params): CompiledQuery {
    return CompiledQuery.raw(this.dialect.compile(text), params as unknown[]);
  }

  private async execute<R>(text: string, params: Params): Promise<{ rows: R[]; numAffectedRows?: bigint }> {
    this.onStatement?.(text, params);
    const ctx = this.txContext();
    const q = this.compile(text, params);
    if (ctx !== undefined && !ctx.done && ctx.conn !== null) {
      ctx.statements += 1;
      return ctx.conn.executeQuery<R>(q);
    }
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
    return contextStorage.run(withEntry(this, { fence: scope }), fn);
  }

  /** The fence scope the caller runs in, if any (the leader's work). */
  get fenceScope(): FenceScope | undefined {
    return contextStorage.getStore()?.get(this)?.fence;
  }

  /** Runs fn in one write transaction; nested: joins it (or a savepoint when asked). See the file comment. */
  async write<T>(fn: () => Promise<T>, opts: WriteOptions = {}): Promise<T> {
    const outer = this.txContext();
    if (outer !== undefined && !outer.done) {
      if (outer.readOnly) throw new Error('a write transaction cannot start inside a read transaction');
      // A unit's transaction begins at its first write (see unit()).
      const conn = outer.conn ?? (await this.beginUnit(outer));
      if (opts.fence) await this.checkFence(conn, opts.fence);
      return opts.savepoint === true ? this.savepoint(outer, conn, fn) : this.join(outer, fn);
    }
    const ctx = this.newContext(false, opts);
    return this.runWrite(ctx, async () => {
      await this.beginUnit(ctx);
      return this.runIn(ctx, fn);
    });
  }

  /**
   * A unit of work whose write transaction begins lazily, at the first write() made inside it (by
   * any repository), and commits when fn returns: what fn reads before that runs outside any
   * transaction, as it would without the unit, and what it writes from then on commits together.
   * A board's step is one: the customer look-ups (which may ask the core) run before the step's
   * transaction; the claims, the bank number, the transitions and their events commit as one
   * (issue 44 item 5). Inside a transaction it joins it. Nothing after the first write may wait on
   * another system: the write lock is held until fn returns.
   */
  async unit<T>(fn: () => Promise<T>, opts: WriteOptions = {}): Promise<T> {
    const outer = this.txContext();
    if (outer !== undefined && !outer.done) {
      if (outer.readOnly) throw new Error('a write transaction cannot start inside a read transaction');
      return this.join(outer, fn);
    }
    const ctx = this.newContext(false, opts);
    return this.runWrite(ctx, () => this.runIn(ctx, fn));
  }

  /**
   * Runs fn with no transaction of the caller's: its writes are transactions of their own. Only
   * where the caller's unit has not begun (on SQLite its pinned connection would wait for fn):
   * the file core's crash recovery at a first board, whose seal must commit before the batch's key
   * is destroyed, whatever the board's own step does next.
   */
  outside<T>(fn: () => Promise<T>): Promise<T> {
    return contextStorage.run(withEntry(this, { tx: undefined }), fn);
  }

  /**
   * Runs `then` once the caller's write transaction has committed (at once outside a transaction, or
   * in a unit that has written nothing): work outside the database that may only follow a commit,
   * such as writing a batch's files once its freeze is durable. Never after a rollback.
   */
  async afterCommit(then: () => Promise<void>): Promise<void> {
    const ctx = this.txContext();
    if (ctx === undefined || ctx.done || ctx.readOnly || ctx.conn === null) return then();
    ctx.afterCommit.push(then);
  }

  /**
   * The fence as a condition a statement carries in its WHERE (issue 44 item 5, graphile-worker's
   * `locked_by = $3`): `{ sql, params }` to AND into an UPDATE when the caller's write transaction
   * still has its fence to check and the engine checks it in statements (SQLite); null otherwise
   * (no fence, already checked by a statement, or PostgreSQL, whose fence locks the lease row FOR
   * SHARE when the transaction begins). After such an UPDATE changed a row, call fenceHeld();
   * when it changed none, checkFenceNow() tells a lost lease (FencedOut) from a stale row.
   */
  fenceCondition(): { sql: string; params: unknown[] } | null {
    const ctx = this.txContext();
    if (ctx === undefined || ctx.done || ctx.fence === null || ctx.fenceHeld) return null;
    return this.dialect.fenceCondition?.(ctx.fence) ?? null;
  }

  /** A statement that carried fenceCondition() changed a row: the fence holds for this transaction. */
  fenceHeld(): void {
    const ctx = this.txContext();
    if (ctx !== undefined && !ctx.done) ctx.fenceHeld = true;
  }

  /** Checks the caller's transaction's fence now (throws FencedOut); nothing when it has none. */
  async checkFenceNow(): Promise<void> {
    const ctx = this.txContext();
    if (ctx === undefined || ctx.done || ctx.conn === null || ctx.fence === null) return;
    await this.checkFence(ctx.conn, ctx.fence);
    ctx.fenceHeld = true;
  }

  private newContext(readOnly: boolean, opts: WriteOptions): TxContext {
    // unfenced: the lease statements themselves, and what every replica may write (the inbox).
    const scope =
      opts.fence || opts.unfenced === true ? undefined : contextStorage.getStore()?.get(this)?.fence;
    return {
      conn: null,
      readOnly,
      depth: 0,
      done: false,
      statements: 0,
      spoiled: null,
      fence: null,
      fenceHeld: false,
      afterCommit: [],
      scope,
      explicitFence: opts.fence ?? null,
      release: null,
    };
  }

  /**
   * Begins ctx's write transaction on a pinned connection, which stays ctx's until ctx ends. The
   * fence: PostgreSQL checks it now (the lease row FOR SHARE); SQLite, where the IMMEDIATE lock
   * already keeps a takeover out until COMMIT, checks it in the first statement that carries it
   * (fenceCondition) or else right before COMMIT — the same answer, one statement fewer.
   */
  private async beginUnit(ctx: TxContext): Promise<DatabaseConnection> {
    let fence: Fence | null = ctx.explicitFence;
    const scope = ctx.scope;
    if (fence === null && scope !== undefined) {
      fence = scope.current();
      if (fence === null)
        throw new FencedOut({ name: scope.name, holder: scope.holder, epoch: 0 }, null, {
          reason: 'not_leader',
          why: 'this replica no longer leads',
        });
    }
    const idle = fence !== null && scope !== undefined ? scope.idleTimeoutMs : undefined;
    ctx.beginning ??= this.pinAndBegin(ctx, fence, idle);
    return ctx.beginning;
  }

  private async pinAndBegin(
    ctx: TxContext,
    fence: Fence | null,
    idle: number | undefined,
  ): Promise<DatabaseConnection> {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const conn = await new Promise<DatabaseConnection>((resolve, reject) => {
      this.kysely
        .connection()
        .execute(async (k) => {
          // connection() pins one connection until this callback ends: at the unit's end.
          await k.getExecutor().provideConnection(async (c) => {
            await this.dialect.beginWrite(c, fence ?? undefined, idle);
            resolve(c);
            await released;
          });
        })
        .catch(reject);
    });
    ctx.conn = conn;
    ctx.release = release;
    if (fence !== null) {
      if (this.dialect.fenceCondition !== undefined) ctx.fence = fence;
      else await this.checkFence(conn, fence);
    }
    return conn;
  }

  /** Runs a write context's fn, then commits (or rolls back) whatever transaction it began. */
  private async runWrite<T>(ctx: TxContext, fn: () => Promise<T>): Promise<T> {
    let out: T;
    try {
      out = await fn();
      if (ctx.conn !== null) {
        if (ctx.spoiled !== null) throw ctx.spoiled.err;
        if (ctx.fence !== null && !ctx.fenceHeld) await this.checkFence(ctx.conn, ctx.fence);
        await ctx.conn.executeQuery(CompiledQuery.raw('COMMIT'));
      }
    } catch (err) {
      if (ctx.conn !== null) {
        try {
          await ctx.conn.executeQuery(CompiledQuery.raw('ROLLBACK'));
        } catch {
          // Nothing to roll back (the failure ended the transaction) or the connection is gone.
        }
      }
      if (err instanceof FencedOut) ctx.scope?.onFencedOut(err);
      throw err;
    } finally {
      ctx.done = true;
      ctx.release?.();
    }
    let failed: { err: unknown } | null = null;
    for (const then of ctx.afterCommit) {
      try {
        await then();
      } catch (err) {
        failed ??= { err };
      }
    }
    if (failed !== null) throw failed.err;
    return out;
  }

  /** Runs fn in one read transaction (a consistent snapshot); inside a transaction, in that one. */
  async read<T>(fn: () => Promise<T>): Promise<T> {
    const outer = this.txContext();
    if (outer !== undefined && !outer.done && outer.conn !== null) return fn();
    return this.kysely.connection().execute(async (k) => {
      let conn: DatabaseConnection | null = null;
      await k.getExecutor().provideConnection(async (c) => {
        conn = c;
        await c.executeQuery(CompiledQuery.raw(this.dialect.beginRead));
      });
      const ctx = this.newContext(true, { unfenced: true });
      ctx.conn = conn;
      return this.runWrite(ctx, () => this.runIn(ctx, fn));
    });
  }

  /** A nested write without a savepoint: its statements are the outer transaction's. */
  private async join<T>(ctx: TxContext, fn: () => Promise<T>): Promise<T> {
    const before = ctx.statements;
    try {
      return await fn();
    } catch (err) {
      // Nothing ran: nothing to undo, the caller may go on. Otherwise only a rollback is left.
      if (ctx.statements !== before) ctx.spoiled ??= { err };
      throw err;
    }
  }

  private async savepoint<T>(ctx: TxContext, conn: DatabaseConnection, fn: () => Promise<T>): Promise<T> {
    ctx.depth += 1;
    const name = `sp_${ctx.depth}`;
    await conn.executeQuery(CompiledQuery.raw(`SAVEPOINT ${name}`));
    try {
      const out = await fn();
      await conn.executeQuery(CompiledQuery.raw(`RELEASE SAVEPOINT ${name}`));
      return out;
    } catch (err) {
      await conn.executeQuery(CompiledQuery.raw(`ROLLBACK TO SAVEPOINT ${name}`));
      await conn.executeQuery(CompiledQuery.raw(`RELEASE SAVEPOINT ${name}`));
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
    const ctx = this.txContext();
    if (ctx !== undefined && !ctx.done && ctx.conn !== null) return this.dialect.exec(ctx.conn, text);
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
