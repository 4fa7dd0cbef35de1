import { createHash } from 'node:crypto';
import type { LimitBucket } from './rate-limit.js';

/** One rate-limited API request as the sandbox saw it arrive (GET /admin/requests). */
export interface RequestLogEntry {
  /** Arrival, epoch ms on the sandbox clock (the moment the rate limiter counted it). */
  at: number;
  /** The API key, as a short digest (never the key itself). */
  key: string;
  bucket: LimitBucket;
  /** "<METHOD> <route pattern>", as in the counters. */
  route: string;
  /** The status answered; 0 when the connection closed before an answer. */
  status: number;
}

/** The newest entries kept: enough for hours of a test at full budget, bounded for a long demo. */
export const REQUEST_LOG_CAPACITY = 100_000;

export function keyDigest(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 12);
}

/**
 * Every API request that reached the rate limiter, with its arrival time, key and bucket: what a
 * test needs to check a client's traffic against the documented limit in EVERY sliding window (the
 * limiter itself only enforces its own fixed windows) and to time events such as the first
 * acknowledgement after a failover. Bounded: the oldest entries are dropped past the capacity.
 */
export class RequestLog {
  private entries: RequestLogEntry[] = [];
  private head = 0;
  dropped = 0;

  constructor(private readonly capacity = REQUEST_LOG_CAPACITY) {}

  add(e: RequestLogEntry): void {
    this.entries.push(e);
    if (this.entries.length - this.head > this.capacity) {
      this.head += 1;
      this.dropped += 1;
      // Compact now and then, so dropping stays O(1) amortised.
      if (this.head >= this.capacity) {
        this.entries = this.entries.slice(this.head);
        this.head = 0;
      }
    }
  }

  /** Entries that arrived at or after sinceMs, oldest first. */
  since(sinceMs = 0): RequestLogEntry[] {
    const out: RequestLogEntry[] = [];
    for (let i = this.head; i < this.entries.length; i++) {
      const e = this.entries[i]!;
      if (e.at >= sinceMs) out.push(e);
    }
    return out;
  }

  clear(): void {
    this.entries = [];
    this.head = 0;
    this.dropped = 0;
  }
}

/**
 * The most requests inside any window [t, t + windowMs) over ascending times (two pointers: one
 * pass). A client within a documented limit of N per window never exceeds N here.
 */
export function maxInSlidingWindow(
  times: readonly number[],
  windowMs: number,
): { max: number; at: number | null } {
  let best = 0;
  let at: number | null = null;
  let lo = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while (times[hi]! - times[lo]! >= windowMs) lo += 1;
    if (hi - lo + 1 > best) {
      best = hi - lo + 1;
      at = times[lo]!;
    }
  }
  return { max: best, at };
}
