import { createRng, type Rng } from './rng.js';

export interface FaultRule {
  /** "<METHOD> <route pattern>", e.g. "POST /public/v1/loans/:id/boarding", or "*". */
  route: string;
  status5xxRate?: number;
  resetRate?: number;
  /** Drops the connection after the write was committed: the client sees a socket error. */
  resetAfterCommitRate?: number;
  latencyMs?: number;
  /**
   * Share of requests answered 429 with Retry-After: the platform throttling on its own (the key
   * was within its limit). Counted apart from the limiter's own 429s (counters.faults.injected429).
   */
  status429Rate?: number;
  /** Retry-After of an injected 429 (default 2 s). */
  retryAfterSeconds?: number;
  /** Share of responses whose body trickles out over slowBodyMs (headers at once, then pieces). */
  slowBodyRate?: number;
  /** How long a slow body takes to arrive whole (default 2000 ms). */
  slowBodyMs?: number;
  /** How many times the rule may fire (any effect); unlimited when absent. */
  count?: number;
}

export type FaultAction = 'none' | '5xx' | 'reset' | 'resetAfterCommit' | '429';

export interface FaultDecision {
  latencyMs: number;
  action: FaultAction;
  /** For a 429: its Retry-After. */
  retryAfterSeconds: number;
  /** > 0: send the body in pieces over this long (a slow body: the headers came in time). */
  slowBodyMs: number;
}

/** Seeded fault injection per route: the same seed and request sequence give the same faults. */
export class FaultInjector {
  private rules: Array<FaultRule & { fired: number }> = [];
  private rng: Rng = createRng(1);
  private seed = 1;

  set(seed: number | undefined, rules: FaultRule[]): void {
    this.seed = seed ?? 1;
    this.rng = createRng(this.seed);
    this.rules = rules.map((r) => ({ ...r, fired: 0 }));
  }

  clear(): void {
    this.rules = [];
  }

  describe(): { seed: number; rules: Array<FaultRule & { fired: number }> } {
    return { seed: this.seed, rules: this.rules.map((r) => ({ ...r })) };
  }

  decide(routeKey: string): FaultDecision {
    const decision: FaultDecision = { latencyMs: 0, action: 'none', slowBodyMs: 0, retryAfterSeconds: 0 };
    for (const rule of this.rules) {
      if (rule.route !== '*' && rule.route !== routeKey) continue;
      if (rule.count !== undefined && rule.fired >= rule.count) continue;
      let fired = false;
      if (rule.latencyMs) {
        decision.latencyMs = Math.max(decision.latencyMs, rule.latencyMs);
        fired = true;
      }
      if (decision.action === 'none') {
        // One draw per effect keeps decisions independent and reproducible.
        const r5 = this.rng.next();
        const rr = this.rng.next();
        const rc = this.rng.next();
        if (rule.resetRate && rr < rule.resetRate) decision.action = 'reset';
        else if (rule.status5xxRate && r5 < rule.status5xxRate) decision.action = '5xx';
        else if (rule.resetAfterCommitRate && rc < rule.resetAfterCommitRate)
          decision.action = 'resetAfterCommit';
        if (decision.action !== 'none') fired = true;
      }
      // Drawn only by rules that ask for them, so the other rules' seeded sequences stay as they were.
      if (rule.status429Rate && decision.action === 'none' && this.rng.next() < rule.status429Rate) {
        decision.action = '429';
        decision.retryAfterSeconds = rule.retryAfterSeconds ?? 2;
        fired = true;
      }
      // Drawn only by rules that ask for slow bodies, so the other rules' seeded sequences stay as they were.
      if (rule.slowBodyRate && decision.slowBodyMs === 0 && this.rng.next() < rule.slowBodyRate) {
        decision.slowBodyMs = rule.slowBodyMs ?? 2000;
        fired = true;
      }
      if (fired) rule.fired += 1;
    }
    return decision;
  }
}
