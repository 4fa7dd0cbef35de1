/**
 * Two rules of the rate budget's window that both of its homes apply: the in-process strategy
 * (src/platform/rate-budget/in-process.ts) and the shared PostgreSQL ledger
 * (src/store/rate-budget/pg.ts, whose statement is given them as parameters).
 */

/** The client's timeouts of one platform call (config `platform.timeouts`). */
export interface CallTimeouts {
  connectMs: number;
  headersMs: number;
  bodyMs: number;
}

/**
 * The longest a platform call may take from its grant to its answer: connect, headers and body
 * timeouts together. A call whose answer is never booked (its process died) counts in the window
 * until its grant plus this plus a window.
 */
export function callFlightMs(t: CallTimeouts): number {
  return t.connectMs + t.headersMs + t.bodyMs;
}

/** How soon to ask again when the window is held by calls still in flight (their answers unknown). */
export function reAskMs(windowMs: number): number {
  return Math.max(10, Math.min(1000, Math.floor(windowMs / 10)));
}
