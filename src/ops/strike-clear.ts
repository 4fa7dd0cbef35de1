/**
 * Clearing the 429-strike ledger so platform traffic resumes (`platform strikes clear`, the
 * console's strike-clear request): only once the platform has confirmed the key is in good
 * standing. The ledger keeps who and why (500 characters at most).
 */
import { UsageError } from '../lib/errors.js';

export async function clearStrikes(
  ledger: { clearStrikes(by: string): number | Promise<number> },
  input: { by: string | undefined; reason: string },
): Promise<number> {
  if (!input.by) throw new UsageError('--by: expected who clears the strikes (no $USER to default to)');
  if (input.reason.trim() === '') throw new UsageError('--reason: expected a non-empty reason');
  return ledger.clearStrikes(`${input.by}: ${input.reason.trim()}`.slice(0, 500));
}
