import { CoreRejectedError } from '../port.js';

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

/**
 * The look-up-before-create loop of every record an HTTP core writes by an id of its own (a
 * client, a group, a loan): the record found by its id is the answer; else a record that
 * `reuse` finds (a customer that already holds the tax id: never doubled; it may also refuse,
 * throwing); else the create, whose refusal as a duplicate is answered by looking up again
 * (createOrFindDuplicate). Safe to run again after any failure, a timeout after the core
 * committed included.
 */
export async function lookUpOrCreate<T>(o: {
  lookUp: () => Promise<T | null>;
  reuse?: () => Promise<T | null>;
  create: () => Promise<T>;
  isDuplicate: (detail: unknown) => boolean;
  /** The look-up after a duplicate refusal (default: lookUp); null when the record is not ours. */
  lookUpAgain?: () => Promise<T | null>;
}): Promise<T> {
  const found = await o.lookUp();
  if (found !== null) return found;
  const reused = o.reuse === undefined ? null : await o.reuse();
  if (reused !== null) return reused;
  return createOrFindDuplicate({
    create: o.create,
    isDuplicate: o.isDuplicate,
    found: o.lookUpAgain ?? o.lookUp,
  });
}
