import { CoreRejectedError } from './port.js';

/**
 * The HTTP cores' create step, after their look-up found nothing: a create the core refuses as a
 * duplicate of its id (a concurrent writer, or a replay whose look-up raced the first write) is
 * answered by the record that exists, looked up again; any other failure, or a duplicate that the
 * second look-up does not find (or finds belonging to another loan: `found` returns null), stands.
 */
export async function createOrFindDuplicate<T>(o: {
  create: () => Promise<T>;
  /** The core's refusal detail says the id is taken (Fineract: external id; Mambu: id). */
  isDuplicate: (detail: unknown) => boolean;
  /** The record that holds the id now, or null when it is not ours to take. */
  found: () => Promise<T | null>;
}): Promise<T> {
  try {
    return await o.create();
  } catch (err) {
    if (err instanceof CoreRejectedError && o.isDuplicate(err.detail)) {
      const existing = await o.found();
      if (existing !== null) return existing;
    }
    throw err;
  }
}
