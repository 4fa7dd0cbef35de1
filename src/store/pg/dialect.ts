import { CompiledQuery, PostgresDialect } from 'kysely';
import type { Dialect } from '../dialect.js';
import { FencedOut, PG_FENCE_SQL } from '../leadership/fence.js';
import type { PgPool } from './pool.js';

/** The advisory lock every PostgreSQL write transaction takes (any constant; 'boaw'). */
const WRITE_LOCK = 0x626f6177;
/** A write transaction left idle this long is ended by the server (see beginWrite). */
const WRITE_IDLE_TIMEOUT_MS = 15_000;

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

/** PostgreSQL over a pg pool (Kysely's PostgresDialect). */
export function pgDialect(pool: PgPool): Dialect {
  const pgText = new Map<string, string>();
  return {
    name: 'postgres',
    kysely: new PostgresDialect({ pool }),
    hasServerClock: true,
    ifnull: 'COALESCE',
    position: (haystack, needle) => `strpos(${haystack}, ${needle})`,
    limitAll: 'LIMIT ALL',
    beginRead: 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY',
    compile: (text) => {
      let out = pgText.get(text);
      if (out === undefined) {
        out = toPgPlaceholders(text);
        if (pgText.size < 2000) pgText.set(text, out);
      }
      return out;
    },
    beginWrite: async (conn, fence, idleTimeoutMs) => {
      await conn.executeQuery(CompiledQuery.raw('BEGIN'));
      // Write transactions take one transaction-scoped advisory lock first, so they run one at a
      // time across every replica, as SQLite's IMMEDIATE lock makes them: each repository's
      // read-then-write (a lease, a number, a transition) stays race-free without a retry loop.
      // Reads never wait for it. Released at COMMIT/ROLLBACK (PgBouncer-safe).
      //
      // A process paused inside a write transaction (SIGSTOP, a long GC, a hung host) holds that
      // lock, and in a fenced one the lease row FOR KEY SHARE: the server ends the transaction once it
      // sits idle this long (the lease's TTL when fenced), so neither every other replica's
      // writes nor a takeover wait for ever. set_config(…, true) is SET LOCAL, in the same round trip.
      const idle = Math.max(
        1,
        Math.round(fence && idleTimeoutMs !== undefined ? idleTimeoutMs : WRITE_IDLE_TIMEOUT_MS),
      );
      await conn.executeQuery(
        CompiledQuery.raw(
          `SELECT pg_advisory_xact_lock(${WRITE_LOCK}), ` +
            `set_config('idle_in_transaction_session_timeout', '${idle}', true)`,
        ),
      );
    },
    checkFence: async (conn, fence) => {
      const locked = await conn.executeQuery(
        CompiledQuery.raw(PG_FENCE_SQL, [fence.name, fence.holder, fence.epoch]),
      );
      if (locked.rows.length === 1) return;
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
    },
    exec: async (conn, text) => {
      await conn.executeQuery(CompiledQuery.raw(text, []));
    },
    scrubLog: () => ({ done: true, frames: 0 }),
    // A standby after a failover is read-only.
    writeBlocker: async (probe) => {
      const r = await probe.get<{ ro: string }>("SELECT current_setting('transaction_read_only') AS ro");
      return r?.ro === 'on' ? 'state database (PostgreSQL) is read-only (a standby?)' : null;
    },
  };
}
