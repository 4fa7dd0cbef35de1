import type { DatabaseConnection, Dialect as KyselyDialect } from 'kysely';
import type { Fence } from './leadership/fence.js';

/** The engines the state store runs on (store.engine). */
export type Engine = 'sqlite' | 'postgres';

/**
 * What differs between the store's engines, in one object per engine (store/sqlite/dialect.ts,
 * store/pg/dialect.ts): the repositories and StoreDb ask it instead of branching on the engine's
 * name, so an engine is a strategy and the SQL that differs is found in one place per engine.
 */
export interface Dialect {
  readonly name: Engine;
  /** Kysely's connection provider for this engine (one serialised connection, or a pool). */
  readonly kysely: KyselyDialect;
  /**
   * The database runs on another host with its own clock (PostgreSQL), so this host's clock can
   * drift from the one leadership and the shared rate budget decide on. SQLite lives on the host.
   */
  readonly hasServerClock: boolean;
  /** The function that replaces a NULL (IFNULL / COALESCE): the partial indexes' expressions use it. */
  readonly ifnull: 'IFNULL' | 'COALESCE';
  /** SQL for the 1-based position of needle in haystack, 0 when absent (instr / strpos). */
  position(haystack: string, needle: string): string;
  /** `LIMIT <no limit>`, for an OFFSET without a limit. */
  readonly limitAll: string;
  /** Opens a read transaction (a consistent snapshot). */
  readonly beginRead: string;
  /** `?` placeholders → the engine's placeholders. */
  compile(text: string): string;
  /**
   * Opens a write transaction on conn: SQLite BEGIN IMMEDIATE (see sqlite/db.ts); PostgreSQL BEGIN
   * plus the one advisory lock that serialises writers, and an idle timeout (see pg/dialect.ts).
   */
  beginWrite(
    conn: DatabaseConnection,
    fence: Fence | undefined,
    idleTimeoutMs: number | undefined,
  ): Promise<void>;
  /**
   * The fence as a WHERE condition a write statement carries (SQLite, whose IMMEDIATE lock keeps a
   * takeover out until COMMIT, so a check anywhere in the transaction is as good as one at BEGIN).
   * Absent: the fence is checked when the transaction begins (PostgreSQL: the lease row FOR SHARE).
   */
  fenceCondition?(fence: Fence): { sql: string; params: unknown[] };
  /** Throws FencedOut unless the lease still has the fence's holder and epoch and is unexpired (on conn). */
  checkFence(conn: DatabaseConnection, fence: Fence): Promise<void>;
  /** Runs a multi-statement script (migrations, DDL) on conn. */
  exec(conn: DatabaseConnection, text: string): Promise<void>;
  /**
   * After content was cleared (a batch's seal): what the engine still keeps of it on this host is
   * dropped. SQLite: the WAL checkpointed and truncated (secure_delete already zeroed the pages).
   * PostgreSQL: nothing to do here (its rows were only ever stored encrypted).
   */
  scrubLog(): { done: boolean; frames: number };
  /** Why a write would be refused now beyond "closed" (read-only handle / standby), or null. */
  writeBlocker(probe: {
    write(): Promise<void>;
    get<R>(text: string): Promise<R | undefined>;
  }): Promise<string | null>;
}
