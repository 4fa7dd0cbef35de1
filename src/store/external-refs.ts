import type { Db } from './db.js';

/**
 * Platform ids stored in a core as a digest because the core's external-reference field is
 * shorter than the id (Fineract externalId: 100 characters). The digest is deterministic, so the
 * adapter finds its records again by computing it; this table maps a digest the core lists back
 * to the platform id (reconciliation, `loans show`). Written before the core write that uses it.
 */
export interface ExternalRefStore {
  remember(core: string, ref: string, platformId: string, kind: string, now: number): void;
  platformIdOf(core: string, ref: string): string | null;
}

export function createExternalRefStore(db: Db): ExternalRefStore {
  const insert = db.prepare('INSERT OR IGNORE INTO core_external_refs (core, ref, platform_id, kind, created_at) VALUES (?, ?, ?, ?, ?)');
  const select = db.prepare<[string, string], { platform_id: string }>('SELECT platform_id FROM core_external_refs WHERE core = ? AND ref = ?');
  return {
    remember: (core, ref, platformId, kind, now) => {
      insert.run(core, ref, platformId, kind, now);
    },
    platformIdOf: (core, ref) => select.get(core, ref)?.platform_id ?? null,
  };
}
