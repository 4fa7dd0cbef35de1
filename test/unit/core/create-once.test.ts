import { describe, expect, it } from 'vitest';
import { createOrFindDuplicate, lookUpOrCreate } from '../../../src/core/http-core/create-once.js';
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

describe('lookUpOrCreate (the look-up-before-create loop of every HTTP core)', () => {
  it('answers what the look-up finds, and never creates', async () => {
    let creates = 0;
    await expect(
      lookUpOrCreate({
        lookUp: () => Promise.resolve(5),
        reuse: () => Promise.resolve(6),
        create: () => Promise.resolve((creates += 1)),
        isDuplicate,
      }),
    ).resolves.toBe(5);
    expect(creates).toBe(0);
  });

  it('reuses what the guard finds (a customer holding the tax id) before any create', async () => {
    let creates = 0;
    await expect(
      lookUpOrCreate({
        lookUp: () => Promise.resolve(null),
        reuse: () => Promise.resolve(6),
        create: () => Promise.resolve((creates += 1)),
        isDuplicate,
      }),
    ).resolves.toBe(6);
    expect(creates).toBe(0);
  });

  it('creates when nothing is found; a duplicate refusal is answered by the look-up again', async () => {
    await expect(
      lookUpOrCreate({
        lookUp: () => Promise.resolve(null),
        create: () => Promise.resolve(7),
        isDuplicate,
      }),
    ).resolves.toBe(7);
    let lookups = 0;
    await expect(
      lookUpOrCreate({
        lookUp: () => Promise.resolve(lookups++ === 0 ? null : 9),
        create: () => Promise.reject(duplicate),
        isDuplicate,
      }),
    ).resolves.toBe(9);
    await expect(
      lookUpOrCreate({
        lookUp: () => Promise.resolve(null),
        create: () => Promise.reject(duplicate),
        isDuplicate,
        lookUpAgain: () => Promise.resolve(null),
      }),
    ).rejects.toBe(duplicate);
  });
});
