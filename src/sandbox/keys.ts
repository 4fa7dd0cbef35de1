import { randomBytes } from 'node:crypto';

export type Environment = 'production' | 'staging' | 'development';

/** Permission names (the spec lists only the two unmasking ones; the rest are invented). */
export const PERMISSIONS = [
  'read:loans',
  'write:loans',
  'read:boarding',
  'write:boarding',
  'read:businesses',
  'write:businesses',
  'read:people',
  'read:documents',
  'write:documents',
  'read:products',
  'read:webhooks',
  'write:webhooks',
  'read:businesses:ein',
  'read:people:ssn',
] as const;
export const DEFAULT_PERMISSIONS: string[] = PERMISSIONS.filter(
  (p) => p !== 'read:businesses:ein' && p !== 'read:people:ssn',
);

export const DEFAULT_ORG = 'org_sandbox';

export interface ApiKeyRecord {
  key: string;
  orgId: string;
  environment: Environment;
  permissions: Set<string>;
  expired: boolean;
  /** Revoked after too many rate-limit strikes (only when strike revocation is on). */
  revokedAt: string | null;
  /** Epoch ms of each 429 this key received (the platform revokes live keys at 3 in 24 h). */
  strikes: number[];
  /** ISO country codes allowed to call with this key; null = anywhere. */
  allowedCountries: string[] | null;
  /** Whether the key's organisation is approved for production (live) keys. */
  productionApproved: boolean;
  /** Environments available to the key's organisation. */
  orgEnvironments: Environment[];
}

export interface NewKeyOptions {
  environment?: Environment;
  org?: string;
  permissions?: string[];
  expired?: boolean;
  allowedCountries?: string[] | null;
  productionApproved?: boolean;
  orgEnvironments?: Environment[];
}

export function makeKey(opts: NewKeyOptions = {}): ApiKeyRecord {
  const environment = opts.environment ?? 'staging';
  const prefix = environment === 'production' ? 'pk_live_' : 'pk_test_';
  return {
    key: prefix + randomBytes(18).toString('base64url'),
    orgId: opts.org ?? DEFAULT_ORG,
    environment,
    permissions: new Set(opts.permissions ?? DEFAULT_PERMISSIONS),
    expired: opts.expired ?? false,
    revokedAt: null,
    strikes: [],
    allowedCountries: opts.allowedCountries ?? null,
    productionApproved: opts.productionApproved ?? false,
    orgEnvironments: opts.orgEnvironments ?? ['staging', 'development'],
  };
}
