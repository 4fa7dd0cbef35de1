/**
 * The one failure taxonomy's vocabulary (issue 44): what a caller does about a failure. Each layer
 * classifies its own errors at its boundary into a subset of these words (the platform client in
 * src/platform/errors.ts, the cores in src/core/port.ts), and src/pipeline/failures.ts classifies
 * any error into one (`dispositionOf`); callers switch on the word, never on error classes, codes
 * or status numbers. Not to be confused with a report exception's sign-off disposition
 * (src/reports/dispositions.ts), which records a person's verdict, not a failure's handling.
 *
 * - `retry-call`: transient (network, timeout, 5xx, 429, a write still in progress); the platform
 *   client retries the call itself (writes with the same Idempotency-Key); when it gives up, the
 *   loan's attempt is `retry-later`.
 * - `retry-later`: this attempt is lost, a later one may work (a download to fetch again, an answer
 *   of the wrong shape, a customer source that cannot tell now, something unclassified); after the
 *   last attempt: quarantined.
 * - `core-unavailable`: the core (or its customer search) did not answer and nothing was written:
 *   retried later, and counted towards the cycle's core-outage stop.
 * - `core-ambiguous`: the core did not answer after the write went out (it may have committed):
 *   retried later asking the core first; counted towards the core-outage stop.
 * - `quarantine`: no retry changes the outcome (a refusal of this loan's data, an ambiguous customer
 *   match): a person looks at it.
 * - `stop-cycle`: nothing is the loan's fault, but no further call may be made now (the platform
 *   client stopped all traffic after rate-limit strikes).
 * - `fatal`: every loan would fail alike (credentials refused, a number pool exhausted): stop, and
 *   a one-shot command exits non-zero.
 * - `stale`: someone else (an operator, another process) moved the loan meanwhile: it is theirs.
 * - `stepped-down`: this process no longer leads (fenced out) or the state machine refused the
 *   step: nothing more may be written.
 */
export type Disposition =
  | 'retry-call'
  | 'retry-later'
  | 'core-unavailable'
  | 'core-ambiguous'
  | 'quarantine'
  | 'stop-cycle'
  | 'fatal'
  | 'stale'
  | 'stepped-down';

/** The dispositions under which a loan waits in retry_wait for another attempt. */
export type RetryDisposition = Extract<Disposition, 'retry-later' | 'core-unavailable' | 'core-ambiguous'>;
