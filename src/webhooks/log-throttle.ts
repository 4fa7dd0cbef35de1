/**
 * Bounds how often one kind of event is logged: a flood of forged deliveries must not flood the
 * log (or the disk under it). Allows `perWindow` lines per key per window, then counts the rest
 * and reports how many were suppressed with the next line that gets through.
 */
export interface LogThrottle {
  /** null: drop this line; a number: log it, mentioning that many suppressed since the last one. */
  admit(key: string, now: number): number | null;
}

export function createLogThrottle(perWindow = 20, windowMs = 60_000): LogThrottle {
  const state = new Map<string, { windowStart: number; logged: number; suppressed: number }>();
  return {
    admit(key, now) {
      let s = state.get(key);
      if (!s || now - s.windowStart >= windowMs) {
        const suppressed = s?.suppressed ?? 0;
        s = { windowStart: now, logged: 0, suppressed: 0 };
        state.set(key, s);
        s.logged = 1;
        return suppressed;
      }
      if (s.logged < perWindow) {
        s.logged += 1;
        return 0;
      }
      s.suppressed += 1;
      return null;
    },
  };
}
