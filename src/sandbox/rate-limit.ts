/** Fixed-window request budgets per API key and bucket, as the platform documents them. */
export type LimitBucket = 'read' | 'write' | 'legacy';

export interface RateLimitSettings {
  windowMs: number;
  readsPerWindow: number;
  writesPerWindow: number;
  legacyPerWindow: number;
  /**
   * Revoke a key at this many 429s within 24 h, as the platform does to live keys (3); null = never.
   * Off by default: the sandbox is a staging environment, where the rule does not apply.
   */
  revokeAfterStrikes: number | null;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Epoch ms when the current window ends. */
  resetMs: number;
  retryAfterSeconds: number;
}

interface Window {
  startMs: number;
  count: number;
}

export class RateLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly forcedUntil: Partial<Record<LimitBucket, number>> = {};

  constructor(
    public settings: RateLimitSettings,
    private readonly now: () => number,
  ) {}

  update(patch: Partial<RateLimitSettings>): void {
    this.settings = { ...this.settings, ...patch };
    this.windows.clear();
  }

  /** Every key's next request on `bucket` gets 429 until `seconds` have passed. */
  force(bucket: LimitBucket, seconds: number): void {
    this.forcedUntil[bucket] = this.now() + seconds * 1000;
  }

  limitOf(bucket: LimitBucket): number {
    const s = this.settings;
    return bucket === 'read' ? s.readsPerWindow : bucket === 'write' ? s.writesPerWindow : s.legacyPerWindow;
  }

  /** Spends one request of the budget, or refuses it (a refused request is not spent). */
  take(apiKey: string, bucket: LimitBucket): RateDecision {
    const now = this.now();
    const limit = this.limitOf(bucket);
    const id = `${bucket}:${apiKey}`;
    let w = this.windows.get(id);
    // A window opens at the key's first request after the previous one ended (fixed, not aligned
    // to the clock), so a client's own window rarely lines up with ours.
    if (!w || now >= w.startMs + this.settings.windowMs) {
      w = { startMs: now, count: 0 };
      this.windows.set(id, w);
    }
    const resetMs = w.startMs + this.settings.windowMs;
    const forced = this.forcedUntil[bucket];
    if (forced !== undefined && now < forced) {
      return {
        allowed: false,
        limit,
        remaining: 0,
        resetMs: Math.max(resetMs, forced),
        retryAfterSeconds: Math.max(1, Math.ceil((forced - now) / 1000)),
      };
    }
    if (w.count >= limit) {
      return {
        allowed: false,
        limit,
        remaining: 0,
        resetMs,
        retryAfterSeconds: Math.max(1, Math.ceil((resetMs - now) / 1000)),
      };
    }
    w.count += 1;
    return { allowed: true, limit, remaining: limit - w.count, resetMs, retryAfterSeconds: 0 };
  }
}
