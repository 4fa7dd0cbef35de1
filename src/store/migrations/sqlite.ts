import type Database from 'better-sqlite3';
import { MIGRATIONS, migrationSql, type Migration } from './migrations.js';

/**
 * Applies the migrations an SQLite state file lacks (its version is PRAGMA user_version), one
 * IMMEDIATE transaction per step. PostgreSQL's runner is pg.ts; the history is migrations.ts.
 */
export function migrate(db: Database.Database): void {
  // Up to date (versions only grow): no write lock needed, which is every open but the first.
  if ((db.pragma('user_version', { simple: true }) as number) === MIGRATIONS.length) return;
  // The version is read inside each step's write lock: another process (the daemon and an
  // operator's command starting together on a new install) may have applied the step meanwhile.
  for (;;) {
    const done = db
      .transaction((): boolean => {
        const v = db.pragma('user_version', { simple: true }) as number;
        if (v > MIGRATIONS.length) {
          throw new Error(
            `state database schema version ${v} is newer than this ` +
              `connector knows (${MIGRATIONS.length}); upgrade the connector`,
          );
        }
        if (v === MIGRATIONS.length) return true;
        db.exec(migrationSql(MIGRATIONS[v] as Migration, 'sqlite'));
        db.pragma(`user_version = ${v + 1}`);
        return false;
      })
      .immediate();
    if (done) return;
  }
}
