export interface BackoffSettings {
  retryBaseMs: number;
  retryMaxMs: number;
}

/**
 * Delay before attempt `attempts + 1`: base × 2^(attempts−1), capped, with up to 20 % taken off
 * at random so loans that failed together (a platform outage) do not all come back at once.
 */
export function retryDelayMs(
  attempts: number,
  s: BackoffSettings,
  random: () => number = Math.random,
): number {
  const exp = Math.min(30, Math.max(0, attempts - 1));
  const raw = Math.min(s.retryMaxMs, s.retryBaseMs * 2 ** exp);
  const jitter = 1 - 0.2 * Math.min(1, Math.max(0, random()));
  return Math.max(1, Math.round(raw * jitter));
}
