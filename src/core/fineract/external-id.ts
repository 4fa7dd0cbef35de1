import { createHash } from 'node:crypto';

/** Fineract's m_client.external_id and m_loan.external_id: VARCHAR(100). */
export const FINERACT_EXTERNAL_ID_MAX = 100;

/** Marks a digest: a platform id that itself starts with it is digested too, so the two never meet. */
export const DIGEST_PREFIX = 'sha256:';

/**
 * Characters an externalId may carry as it is: they pass every hop of a request path
 * (`GET /loans/external-id/{id}`) unchanged. Tomcat refuses an encoded slash or backslash, Spring's
 * firewall an encoded percent, `;` and dot segments, and `?`, `#`, spaces and non-ASCII need
 * escaping that proxies and servlet containers do not all undo alike.
 */
const PATH_SAFE = /^[A-Za-z0-9._~:-]+$/;

function digest(platformId: string): string {
  return `${DIGEST_PREFIX}${createHash('sha256').update(platformId, 'utf8').digest('base64url')}`;
}

/**
 * The externalId a platform id is stored under in Fineract (docs/core.md "Account and customer
 * numbers"): the id itself when it fits (at most 100 characters), is made of letters, digits and
 * `. _ ~ : -` only (not `.` or `..`), and does not start with `sha256:`; otherwise `sha256:` + the
 * base64url SHA-256 of the id's UTF-8 bytes (50 characters, path-safe). Deterministic, so a retry
 * or a restart looks the client or loan up by the same value; collision-resistant (SHA-256). The
 * pair is kept in the state database (core_external_refs) so a listing of the core maps back to
 * the platform id.
 */
export function fineractExternalId(platformId: string): string {
  const plain =
    platformId.length <= FINERACT_EXTERNAL_ID_MAX &&
    !platformId.startsWith(DIGEST_PREFIX) &&
    PATH_SAFE.test(platformId) &&
    platformId !== '.' &&
    platformId !== '..';
  return plain ? platformId : digest(platformId);
}

/**
 * The externalId versions before the path-safe rule used: the id itself whenever it fit 100
 * characters, whatever its characters. Clients and loans boarded then carry it; the adapter
 * looks them up by it (with a query, never a path) when the current form finds nothing, so they
 * are found, never boarded twice, and Fineract needs no migration. Document markers
 * (`[doc:…]` in a description, not a path) keep this form, so earlier uploads are recognised.
 */
export function fineractExternalIdBeforePathSafe(platformId: string): string {
  return platformId.length <= FINERACT_EXTERNAL_ID_MAX && !platformId.startsWith(DIGEST_PREFIX)
    ? platformId
    : digest(platformId);
}
