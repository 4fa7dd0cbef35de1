import pRetry from 'p-retry';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Bucket } from './api.js';
import { PlatformError } from './errors.js';

/**
 * When a failed attempt is tried again. Network errors, 408 and 5xx are transient; reads retry
 * freely, writes only when they carry an Idempotency-Key (the same key every time, so a write the
 * server committed before the connection dropped is not done twice). 400/401/403/404/409/422 are
 * answers, not accidents: never retried. A 429 never reaches this policy: the rate budget pauses
 * the bucket and the request goes through the budget again (see transport.ts).
 */
export interface RetryPolicy {
  maxRetries: number;
  /** First backoff; doubles per attempt up to maxDelayMs, with jitter. */
  minDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxRetries: 5, minDelayMs: 500, maxDelayMs: 30_000 };

export interface RetryContext {
  bucket: Bucket;
  /** true when the write carries an Idempotency-Key (always, in this client). */
  idempotent: boolean;
  operation: string;
  signal?: AbortSignal | undefined;
}

export function isRetryable(err: unknown, ctx: Pick<RetryContext, 'bucket' | 'idempotent'>): boolean {
  if (!(err instanceof PlatformError)) return false;
  if (err.disposition !== 'retry-call' || err.code === 'rate_limit.exceeded') return false;
  return ctx.bucket === 'read' || ctx.idempotent;
}

/** Backoff before retry number `retry` (1-based): exponential, "equal jitter", floored by Retry-After. */
export function backoffMs(
  policy: RetryPolicy,
  retry: number,
  random: () => number,
  retryAfterSeconds: number | null = null,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** Math.max(0, retry - 1));
  const jittered = ceiling / 2 + random() * (ceiling / 2);
  const floor = retryAfterSeconds === null ? 0 : retryAfterSeconds * 1000;
  return Math.round(Math.max(jittered, floor));
}

export interface RetryDeps {
  policy: RetryPolicy;
  clock: Clock;
  logger: Logger;
  random?: () => number;
  /** Called before each retry's backoff (counters, the progress line's wait reason). */
  onRetry?: (err: PlatformError, retry: number, delayMs: number) => void;
}

/** Runs `attempt` under the policy. The backoff waits on the injected clock (p-retry's own delay is 0). */
export async function withRetry<T>(
  attempt: (attemptNumber: number) => Promise<T>,
  ctx: RetryContext,
  deps: RetryDeps,
): Promise<T> {
  const random = deps.random ?? Math.random;
  try {
    return await pRetry(attempt, {
      retries: deps.policy.maxRetries,
      minTimeout: 0,
      maxTimeout: 0,
      factor: 1,
      randomize: false,
      signal: ctx.signal,
      shouldRetry: async ({ error, attemptNumber }) => {
        if (!isRetryable(error, ctx)) return false;
        const err = error as PlatformError;
        const delay = backoffMs(deps.policy, attemptNumber, random, err.retryAfterSeconds);
        deps.logger.warn(
          {
            operation: ctx.operation,
            code: err.code,
            status: err.status,
            retry: attemptNumber,
            delayMs: delay,
          },
          'platform call failed; retrying',
        );
        deps.onRetry?.(err, attemptNumber, delay);
        await deps.clock.sleep(delay, ctx.signal);
        return true;
      },
    });
  } catch (err) {
    if (err instanceof PlatformError) throw err;
    // p-retry rejects with the abort reason when the signal fires between attempts.
    throw new PlatformError({
      code: 'aborted',
      message: `${ctx.operation}: aborted`,
      operation: ctx.operation,
      cause: err,
    });
  }
}
