import type { StoreDb } from './sql.js';

/**
 * Platform ids stored in a core as a digest because the core's external-reference field is
 * shorter than the id (Fineract externalId: 100 characters). The digest is deterministic, so the
 * adapter finds its records again by computing it; this table maps a digest the core lists back
 * to the platform id (reconciliation, `loans show`). Written before the core write that uses it.
 */
export interface ExternalRefStore {
  remember(core: string, ref: string, platformId: string, kind: string, now: number): Promise<void>;
  platformIdOf(core: string, ref: string): Promise<string | null>;
}

export function createExternalRefStore(db: StoreDb): ExternalRefStore {
  return {
    remember: async (core, ref, platformId, kind, now) => {
      await db.run(
        'INSERT INTO core_external_refs (core, ref, platform_id, kind, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
        [core, ref, platformId, kind, now],
      );
    },
    platformIdOf: async (core, ref) =>
      (
        await db.get<{ platform_id: string }>(
          'SELECT platform_id FROM core_external_refs WHERE core = ? AND ref = ?',
          [core, ref],
        )
      )?.platform_id ?? null,
  };
}
