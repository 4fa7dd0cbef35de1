import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { configSchema } from '../../../src/config/schema.js';
import { createCore } from '../../../src/app/core.js';
import { FileCore } from '../../../src/core/file/file-core.js';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { MambuCore } from '../../../src/core/mambu/mambu-core.js';
import { ConfigError } from '../../../src/lib/errors.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { testLayout } from '../core/batches-support.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const platform = { baseUrl: 'http://127.0.0.1:1/api', apiKey: 'pk_test_x', environment: 'staging' };

describe('createCore', () => {
  it('builds the file core by default', async () => {
    const core = createCore(configSchema.parse({ platform }), { clock: systemClock, logger: silentLogger() });
    expect(core).toBeInstanceOf(FileCore);
    expect(core.name).toBe('file');
    await core.close();
  });

  it('builds the Fineract core for adapter http', async () => {
    const config = configSchema.parse({
      platform,
      core: {
        adapter: 'http',
        http: { baseUrl: 'https://core.bank.local/fineract-provider/api/v1', username: 'u', password: 'p' },
      },
    });
    const core = createCore(config, { clock: systemClock, logger: silentLogger() });
    expect(core).toBeInstanceOf(FineractCore);
    await core.close();
  });

  it('builds the Mambu core for adapter mambu, and names core.mambu when it is missing', async () => {
    const config = configSchema.parse({
      platform,
      core: { adapter: 'mambu', mambu: { baseUrl: 'https://bank.mambu.com/api', auth: { apiKey: 'k' } } },
    });
    const core = createCore(config, { clock: systemClock, logger: silentLogger() });
    expect(core).toBeInstanceOf(MambuCore);
    expect(core.name).toBe('mambu');
    expect(core.customers).toBeDefined();
    await core.close();
    const bare = configSchema.parse({ platform, core: { adapter: 'mambu' } });
    expect(() => createCore(bare, { clock: systemClock, logger: silentLogger() })).toThrow(
      /core\.mambu: required when core\.adapter is mambu/,
    );
  });

  it('names the missing key when adapter is http without settings', () => {
    const config = configSchema.parse({ platform, core: { adapter: 'http' } });
    expect(() => createCore(config, { clock: systemClock, logger: silentLogger() })).toThrow(ConfigError);
    expect(() => createCore(config, { clock: systemClock, logger: silentLogger() })).toThrow(/core\.http/);
  });

  it('refuses a trigger file named like one of the layout files (the import job would start too early)', () => {
    const config = configSchema.parse({ platform, core: { file: { batch: { triggerFile: 'LOAN.CSV' } } } });
    const db = openDatabase(':memory:');
    try {
      expect(() =>
        createCore(config, {
          clock: systemClock,
          logger: silentLogger(),
          db: sqliteStore(db),
          layout: () => testLayout(),
        }),
      ).toThrow(/core\.file\.batch\.triggerFile: LOAN\.CSV is also a file of the layout/);
    } finally {
      db.close();
    }
  });
});
