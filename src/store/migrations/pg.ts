import { inTransaction, type PgPool } from '../pg/pool.js';
import { MIGRATIONS, migrationSql } from './migrations.js';

/**
 * The state store's schema on PostgreSQL (issue 26): the one migration history of
 * src/store/migrations/migrations.ts (portable migrations translated, per-engine bodies as written), applied
 * in one transaction and recorded in schema_migrations.
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

/** The one migration history (src/store/migrations/migrations.ts) as PostgreSQL runs it. */
export const PG_MIGRATIONS: readonly PgMigration[] = MIGRATIONS.map((m, i) => ({
  version: i + 1,
  name: `migration ${i + 1}`,
  sql: migrationSql(m, 'postgres'),
}));

/** Applies the migrations not yet applied; safe when several replicas call it at once. */
export async function migratePg(
  pool: PgPool,
  migrations: readonly PgMigration[] = PG_MIGRATIONS,
): Promise<number[]> {
  return inTransaction(pool, async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at ' +
        'timestamptz NOT NULL DEFAULT clock_timestamp())',
    );
    const done = new Set(
      (await tx.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map(
        (r) => r.version,
      ),
    );
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await tx.query(m.sql);
      } catch (err) {
        throw new Error(`PostgreSQL migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, {
          cause: err,
        });
      }
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}
