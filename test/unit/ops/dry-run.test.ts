import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadMapper } from '../../../src/mapping-sets/loader.js';
import { dryRun } from '../../../src/ops/dry-run.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import { FakePlatform, fakeLoan, type FakeFault } from '../../support/fake-platform.js';

/**
 * sync --dry-run decides what a failed read means by its disposition (issue 44): a loan whose data
 * cannot be read now is listed and the run goes on; refused credentials or all traffic stopped
 * after rate-limit strikes end the run, since every next loan would fail alike.
 */
const GENERIC = join(import.meta.dirname, '..', '..', '..', 'mappings', 'generic');

async function run(fault: FakeFault): Promise<{ platform: FakePlatform; result: unknown }> {
  const platform = new FakePlatform().add(fakeLoan('A'), fakeLoan('B'), fakeLoan('C'), fakeLoan('D'));
  platform.faults = [fault];
  const result = await dryRun({ platform, mapper: await loadMapper(GENERIC), concurrency: 1 }).catch(
    (e: unknown) => e,
  );
  return { platform, result };
}

describe('dryRun by disposition', () => {
  it('retry-later (a 503 on one loan): listed as unreadable, the other loans are mapped', async () => {
    const { result } = await run({ op: 'entities', loanId: 'B', code: 'server', status: 503 });
    expect(result).toMatchObject({ loans: 3, unreadable: [{ loanId: 'B' }] });
  });

  it('stop-cycle (traffic stopped after strikes): the run ends at that loan, no later loan is read', async () => {
    const { platform, result } = await run({
      op: 'entities',
      loanId: 'B',
      code: 'rate_limit.traffic_stopped',
    });
    expect(isPlatformError(result) && result.code).toBe('rate_limit.traffic_stopped');
    // A, then B's failed read: C and D never asked for.
    expect(platform.calls['entities']).toBe(2);
  });

  it('fatal (the key refused): the run ends', async () => {
    const { platform, result } = await run({
      op: 'entities',
      loanId: 'A',
      code: 'auth.invalid_key',
      status: 401,
    });
    expect(isPlatformError(result) && result.code).toBe('auth.invalid_key');
    expect(platform.calls['entities']).toBe(1);
  });
});
