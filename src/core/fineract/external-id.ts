import { createHash } from 'node:crypto';

/** Fineract's m_client.external_id and m_loan.external_id: VARCHAR(100). */
export const FINERACT_EXTERNAL_ID_MAX = 100;

/** Marks a digest: a platform id that itself starts with it is digested too, so the two never meet. */
export const DIGEST_PREFIX = 'sha256:';

/**
 * The externalId a platform id is stored under in Fineract (docs/core.md "Account and customer
 * numbers"): the id itself when it fits (at most 100 UTF-16 code units, which is never more than
 * 100 characters) and does not start with `sha256:`; otherwise `sha256:` + the base64url SHA-256
 * of the id's UTF-8 bytes (50 characters). Deterministic, so a retry or a restart looks the
 * client or loan up by the same value; collision-resistant (SHA-256). The pair is kept in the
 * state database (core_external_refs) so a listing of the core maps back to the platform id.
 */
export function fineractExternalId(platformId: string): string {
  if (platformId.length <= FINERACT_EXTERNAL_ID_MAX && !platformId.startsWith(DIGEST_PREFIX)) return platformId;
  return `${DIGEST_PREFIX}${createHash('sha256').update(platformId, 'utf8').digest('base64url')}`;
}
