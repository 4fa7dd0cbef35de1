import type { StoreDb } from '../sql.js';

/**
 * The cross-reference of platform ids a core stores as a digest (its external-reference field is
 * shorter than the id): digest → platform id. The HTTP cores' port (src/core/external-refs.ts
 * ExternalRefStore), matched structurally: the store imports no core.
 */
export interface ExternalRefRows {
  remember(core: string, ref: string, platformId: string, kind: string, now: number): Promise<void>;
  platformIdOf(core: string, ref: string): Promise<string | null>;
}

export function createExternalRefStore(db: StoreDb): ExternalRefRows {
  return {
    remember: async (core, ref, platformId, kind, now) => {
      await db.run(
        'INSERT INTO core_external_refs (core, ref, platform_id, ' +
          'kind, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
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
