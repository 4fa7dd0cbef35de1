/**
 * Times the platform states as instants (X-RateLimit-Reset as a Unix timestamp, Retry-After as an
 * HTTP date) are on the PLATFORM's clock. A host whose clock is minutes behind would otherwise wait
 * minutes longer than the platform asked (issue 37: a replica 2 min behind boarded in bursts two
 * minutes apart, waiting out a window reset it read as 2 min away), and one ahead would not wait
 * at all. Every answer carries the platform's own "now" in its Date header (RFC 9110 §6.6.1), so
 * such an instant is read as a distance from that Date and laid on this host's clock.
 */

/**
 * The Date header counts whole seconds: an offset within this is its rounding, not a skew, and the
 * host clock is trusted as it is (an instant read against a truncated Date would come out up to a
 * second later than the platform meant).
 */
export const SERVER_DATE_RESOLUTION_MS = 2000;

/**
 * The platform's clock minus this host's, from an answer's Date header; 0 when the header is
 * absent or unreadable, or the two agree to within its resolution. The Date is truncated to the
 * second, so an instant laid on this host with it comes out at most a second late: the safe side.
 */
export function serverClockOffsetMs(date: string | null | undefined, nowMs: number): number {
  if (date === null || date === undefined || date.trim() === '') return 0;
  const at = Date.parse(date);
  if (Number.isNaN(at)) return 0;
  const offset = at - nowMs;
  return Math.abs(offset) <= SERVER_DATE_RESOLUTION_MS ? 0 : offset;
}

/** An instant on the platform's clock (epoch ms) as the same instant on this host's clock. */
export function toHostTime(serverMs: number, serverOffsetMs: number): number {
  return serverMs - serverOffsetMs;
}
