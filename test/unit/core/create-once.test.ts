import { describe, expect, it } from 'vitest';
import { createOrFindDuplicate } from '../../../src/core/http-core/create-once.js';
import { CoreRejectedError, CoreUnavailableError } from '../../../src/core/port.js';

const duplicate = new CoreRejectedError('id taken', 400, { code: 'dup' });
const isDuplicate = (d: unknown): boolean => (d as { code?: string } | undefined)?.code === 'dup';

describe('createOrFindDuplicate (the HTTP cores after a look-up that found nothing)', () => {
  it('returns what the create returns', async () => {
    await expect(
      createOrFindDuplicate({
        create: () => Promise.resolve(7),
        isDuplicate,
        found: () => Promise.resolve(9),
      }),
    ).resolves.toBe(7);
  });

  it('answers a duplicate refusal with the record found again', async () => {
    await expect(
      createOrFindDuplicate({
        create: () => Promise.reject(duplicate),
        isDuplicate,
        found: () => Promise.resolve(9),
      }),
    ).resolves.toBe(9);
  });

  it('keeps the refusal when the record is not found again (or not ours)', async () => {
    await expect(
      createOrFindDuplicate({
        create: () => Promise.reject(duplicate),
        isDuplicate,
        found: () => Promise.resolve(null),
      }),
    ).rejects.toBe(duplicate);
  });

  it('never looks up after another refusal or an unavailable core', async () => {
    let lookups = 0;
    const found = (): Promise<number> => {
      lookups += 1;
      return Promise.resolve(9);
    };
    const other = new CoreRejectedError('bad field', 400, { code: 'other' });
    await expect(
      createOrFindDuplicate({ create: () => Promise.reject(other), isDuplicate, found }),
    ).rejects.toBe(other);
    const down = new CoreUnavailableError('timeout', true);
    await expect(
      createOrFindDuplicate({ create: () => Promise.reject(down), isDuplicate, found }),
    ).rejects.toBe(down);
    expect(lookups).toBe(0);
  });
});
