/**
 * Platform ids stored in a core as a digest because the core's external-reference field is
 * shorter than the id (Fineract externalId: 100 characters). The digest is deterministic, so the
 * adapter finds its records again by computing it; this store maps a digest the core lists back
 * to the platform id (reconciliation, `loans show`). Written before the core write that uses it.
 * The port of the HTTP cores (Fineract, Mambu); src/store/identity/external-refs.ts implements it.
 */
export interface ExternalRefStore {
  remember(core: string, ref: string, platformId: string, kind: string, now: number): Promise<void>;
  platformIdOf(core: string, ref: string): Promise<string | null>;
}
