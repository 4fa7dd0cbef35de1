import { inTransaction, type PgPool } from './pool.js';

/**
 * The PostgreSQL schema of the shared state (issue 26, preview): leadership and the shared rate
 * budget. Append-only like src/store/migrations.ts: a released migration is never edited.
 *
 * Several replicas may start at once: every run takes a transaction-scoped advisory lock first
 * (pg_advisory_xact_lock, released at COMMIT, so it is safe behind a transaction-pooling
 * PgBouncer, unlike a session lock), then reads the applied versions, so exactly one applies each
 * migration and the others find it done.
 */
export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

/** Any constant; one per schema owner. */
const MIGRATION_LOCK = 0x626f6172; // 'boar'

export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: 'leadership and shared rate budget',
    sql: `
      -- One row per leadership (e.g. 'daemon'). holder NULL: released. epoch: the fencing token,
      -- incremented by every acquisition. Times are the database's clock only.
      CREATE TABLE leader_lease (
        name        text PRIMARY KEY,
        holder      text,
        epoch       bigint NOT NULL DEFAULT 0,
        acquired_at timestamptz,
        renewed_at  timestamptz,
        expires_at  timestamptz NOT NULL DEFAULT '-infinity'
      );

      -- GCRA: the theoretical arrival time of the next call per (key, class).
      CREATE TABLE rate_gcra (
        key   text NOT NULL,
        class text NOT NULL,
        tat   timestamptz NOT NULL,
        PRIMARY KEY (key, class)
      );

      -- A 429 pauses the class for every replica; a pause only ever grows.
      CREATE TABLE rate_pause (
        key   text NOT NULL,
        class text NOT NULL,
        until timestamptz NOT NULL,
        PRIMARY KEY (key, class)
      );

      CREATE TABLE rate_strikes (
        seq            bigserial PRIMARY KEY,
        key            text NOT NULL,
        at             timestamptz NOT NULL DEFAULT clock_timestamp(),
        class          text NOT NULL,
        path           text,
        retry_after_ms bigint,
        cleared_at     timestamptz,
        cleared_by     text
      );
      CREATE INDEX rate_strikes_active ON rate_strikes (key, at) WHERE cleared_at IS NULL;

      -- One call of the shared budget, decided in one statement by the caller
      -- (SELECT * FROM boarding_rate_take(...)): the GCRA row is locked first and only then the
      -- database clock read once, so the decision time is the time the grant is recorded.
      -- Order: traffic stop (strikes), pause, then the budget; a denied call consumes nothing, a
      -- granted one is never refunded. One active strike halves the pace (doubles the interval).
      CREATE FUNCTION boarding_rate_take(p_key text, p_class text, p_interval_us bigint, p_tau_us bigint,
                                         p_stop_at int, p_strike_window_us bigint)
        RETURNS TABLE (decision text, at timestamptz, wait_us bigint, strikes int)
        LANGUAGE plpgsql AS $fn$
      DECLARE
        v_tat   timestamptz;
        v_now   timestamptz;
        v_until timestamptz;
        v_int   interval;
        v_tau   interval := make_interval(secs => p_tau_us / 1e6);
        v_str   int;
      BEGIN
        INSERT INTO rate_gcra (key, class, tat) VALUES (p_key, p_class, '-infinity')
          ON CONFLICT (key, class) DO NOTHING;
        SELECT g.tat INTO v_tat FROM rate_gcra g WHERE g.key = p_key AND g.class = p_class FOR UPDATE;
        v_now := clock_timestamp();
        SELECT count(*) INTO v_str FROM rate_strikes s
          WHERE s.key = p_key AND s.cleared_at IS NULL AND s.at >= v_now - make_interval(secs => p_strike_window_us / 1e6);
        IF v_str >= p_stop_at THEN
          RETURN QUERY SELECT 'stopped'::text, v_now, 0::bigint, v_str;
          RETURN;
        END IF;
        SELECT p.until INTO v_until FROM rate_pause p WHERE p.key = p_key AND p.class = p_class;
        IF v_until IS NOT NULL AND v_until > v_now THEN
          RETURN QUERY SELECT 'paused'::text, v_now,
            ceil(extract(epoch FROM v_until - v_now) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        v_int := make_interval(secs => (CASE WHEN v_str > 0 THEN 2 ELSE 1 END) * p_interval_us / 1e6);
        v_tat := greatest(v_tat, v_now);
        IF v_tat - v_now > v_tau THEN
          RETURN QUERY SELECT 'wait'::text, v_now,
            ceil(extract(epoch FROM (v_tat - v_now) - v_tau) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        UPDATE rate_gcra g SET tat = v_tat + v_int WHERE g.key = p_key AND g.class = p_class;
        RETURN QUERY SELECT 'granted'::text, v_now, 0::bigint, v_str;
      END
      $fn$;
    `,
  },
];

/** Applies the migrations not yet applied; safe when several replicas call it at once. */
export async function migratePg(pool: PgPool, migrations: readonly PgMigration[] = PG_MIGRATIONS): Promise<number[]> {
  return inTransaction(pool, async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())',
    );
    const done = new Set((await tx.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await tx.query(m.sql);
      } catch (err) {
        throw new Error(`PostgreSQL migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, { cause: err });
      }
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}
