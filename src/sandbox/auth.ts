import { apiError } from './api-error.js';
import type { ApiKeyRecord } from './keys.js';
import type { SandboxState } from './state.js';

/** Header the sandbox reads as the caller's GeoIP country (a real platform derives it from the IP). */
export const COUNTRY_HEADER = 'x-sandbox-country';

/**
 * Resolves the bearer key and applies the documented checks in a fixed order. 401 only for an
 * unknown/expired/missing key; every other refusal is 403 (see docs/sandbox.md).
 */
export function authenticate(
  state: SandboxState,
  authorization: string | undefined,
  addressOrg: string | null,
  country: string,
): ApiKeyRecord {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m?.[1])
    throw apiError(401, 'auth.invalid_key', 'missing or malformed Authorization: Bearer <API_KEY> header');
  const key = state.keys.get(m[1]);
  if (!key) throw apiError(401, 'auth.invalid_key', 'API key invalid or expired');
  if (key.expired) throw apiError(401, 'auth.invalid_key', 'API key invalid or expired');
  if (key.revokedAt !== null)
    throw apiError(
      401,
      'auth.invalid_key',
      `API key revoked at ${key.revokedAt} after repeated rate-limit violations`,
    );
  if (key.environment === 'production') {
    if (!key.productionApproved) {
      throw apiError(
        403,
        'api_key.production_not_allowed',
        'the organization is not approved for production keys',
      );
    }
    throw apiError(
      403,
      'auth.env_mismatch',
      `a live key (pk_live_) does not work on the ${state.environment} environment`,
    );
  }
  if (key.environment !== state.environment) {
    throw apiError(
      403,
      'auth.env_mismatch',
      `this key belongs to the ${key.environment} environment, not ${state.environment}`,
    );
  }
  if (!key.orgEnvironments.includes(state.environment)) {
    throw apiError(
      403,
      'auth.env_not_available',
      `the ${state.environment} environment is not available to organization ${key.orgId}`,
    );
  }
  if (addressOrg !== null && addressOrg !== key.orgId) {
    throw apiError(403, 'auth.org_mismatch', `the key does not belong to organization ${addressOrg}`);
  }
  if (key.allowedCountries !== null && !key.allowedCountries.includes(country.toUpperCase())) {
    throw apiError(
      403,
      'auth.country_restricted',
      `requests from ${country.toUpperCase()} are not allowed for this key`,
    );
  }
  return key;
}

export function requirePermission(key: ApiKeyRecord, permission: string): void {
  if (!key.permissions.has(permission)) {
    throw apiError(403, 'auth.insufficient_permissions', `the key lacks the permission ${permission}`, {
      requiredPermission: permission,
    });
  }
}
