import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { loadConfig } from '../../../src/config/load.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { platformClientFromConfig } from '../../../src/app/platform.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

/** A local sandbox address nothing calls (there are no built-in defaults to lean on). */
const CONFIG =
  'platform: { baseUrl: "http://127.0.0.1:4010/api", apiKey: pk_test_unused, environment: development }\n';

describe('platformClientFromConfig', () => {
  it('builds the budgets from config.platform.rateLimit', async () => {
    const config = loadConfig({ env: {}, fileText: CONFIG });
    const client = platformClientFromConfig(config, { clock: systemClock, logger: silentLogger() });
    expect(client.health().budgets.map((b) => [b.bucket, b.limit, b.allowed])).toEqual([
      ['read', 100, 90],
      ['write', 30, 27],
    ]);
    expect(client.health()).toMatchObject({ strikes24h: 0, trafficStopped: false, lastSuccessAt: null });
    await client.close();
  });

  it('persists through the state database when one is given', async () => {
    const db = openDatabase(':memory:');
    const client = platformClientFromConfig(loadConfig({ env: {}, fileText: CONFIG }), {
      clock: systemClock,
      logger: silentLogger(),
      db: sqliteStore(db),
    });
    expect(await client.clearStrikes('ops')).toBe(0);
    await client.close();
    db.close();
  });

  it('refuses a write without a usable Idempotency-Key before anything is sent', async () => {
    const client = platformClientFromConfig(loadConfig({ env: {}, fileText: CONFIG }), {
      clock: systemClock,
      logger: silentLogger(),
    });
    for (const key of ['', 'k'.repeat(256)]) {
      const err = await client
        .acknowledgeBoarding('L1', {}, { idempotencyKey: key })
        .catch((e: unknown) => e);
      expect(isPlatformError(err) && err.code).toBe('input.invalid');
    }
    expect(client.health().budgets.find((b) => b.bucket === 'write')?.spentInWindow).toBe(0);
    await client.close();
  });
});
