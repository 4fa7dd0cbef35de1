import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import type { Config } from '../config/schema.js';
import { ConfigError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';

/**
 * The HMAC key of the tax id hashes: `customers.tinHashKey` (or BOARDING_TIN_HASH_KEY), else a key
 * the connector generates once into `<store.path>.tinkey` (owner-only) beside the state database —
 * not inside it, so a copy of the database alone does not let anyone test tax ids against its
 * hashes. Banks set their own (a secret store) and keep it: hashes made with another key never match.
 * On PostgreSQL the key is required (every replica the same one): never generated.
 */
export function tinHashKey(
  config: Config,
  logger: Logger,
  opts: { mayGenerate: boolean } = { mayGenerate: true },
): string {
  if (config.customers.tinHashKey !== undefined) return config.customers.tinHashKey;
  // Replicas must share one key: never one generated per host (the config schema says so first).
  if (config.store.engine === 'postgres') {
    throw new ConfigError(
      'customers.tinHashKey: required when store.engine is postgres (or BOARDING_TIN_HASH_KEY): every replica ' +
        'hashes tax ids with this one key',
    );
  }
  const path = `${config.store.path}.tinkey`;
  // A state database whose customers were hashed with a key that is not here: a new key could never
  // match them, so say so instead of writing one (it would only be refused, and stay behind).
  if (!existsSync(path) && !opts.mayGenerate) {
    throw new ConfigError(
      `customers.tinHashKey: not set, and ${path} (the key this state database's customers were hashed with) is ` +
        `missing; restore that file or set customers.tinHashKey (or BOARDING_TIN_HASH_KEY) to the key`,
    );
  }
  if (!existsSync(path)) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      try {
        writeSync(fd, `${randomBytes(32).toString('base64url')}\n`);
      } finally {
        closeSync(fd);
      }
      logger.warn(
        { path },
        'customers.tinHashKey is not set: generated a key for the tax id hashes beside the state database; set ' +
          'customers.tinHashKey (or BOARDING_TIN_HASH_KEY) to that value and keep it with your secrets',
      );
    } catch (err) {
      if ((err as { code?: string }).code !== 'EEXIST')
        throw new ConfigError(
          `customers.tinHashKey: not set, and ${path} cannot be created: ${(err as Error).message}`,
        );
    }
  }
  const key = readFileSync(path, 'utf8').trim();
  if (key.length < 16)
    throw new ConfigError(
      `customers.tinHashKey: ${path} holds no usable key (expected at least 16 characters)`,
    );
  return key;
}
