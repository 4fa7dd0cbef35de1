/**
 * RateBudget with a shared ledger (issue 26 point 3), against an in-memory ledger that decides like
 * the PostgreSQL one (a sliding window of grants, pause, strikes, stop at 2) and can be made
 * unreachable. The real ledger on a real PostgreSQL is covered in
 * test/integration/platform/shared-budget-pg.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/lib/logger.js';
import { RateBudget } from '../../../src/platform/rate-budget/budget.js';
import { SharedLedgerRateSpend } from '../../../src/platform/rate-budget/shared-ledger.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import {
  type RateClass,
  type RateLedger,
  type TakeResult,
} from '../../../src/platform/rate-budget/ledger.js';
import { FakeClock, settle } from '../../support/fake-clock.js';

class MemoryLedger implements RateLedger {
  down = false;
  grants: Record<RateClass, number[]> = { read: [], write: [] };
  pauses: Record<RateClass, number> = { read: 0, write: 0 };
  strikes: Array<{ cls: RateClass; path: string | null; cleared: boolean }> = [];
  takes = 0;
  /** Grant ids handed out, and those whose answers were booked (in booking order). */
  granted = 0;
  answers: string[] = [];
  answeredCalls = 0;
  constructor(
    private readonly clock: FakeClock,
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  private check(): void {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
  }

  private active(): number {
    return this.strikes.filter((s) => !s.cleared).length;
  }

  take(cls: RateClass): Promise<TakeResult> {
    this.check();
    this.takes += 1;
    const now = this.clock.now();
    const strikes = this.active();
    if (strikes >= 2) return Promise.resolve({ decision: 'stopped', atMs: now, strikes });
    if (this.pauses[cls] > now)
      return Promise.resolve({ decision: 'paused', waitMs: this.pauses[cls] - now, atMs: now, strikes });
    const inWindow = this.grants[cls].filter((g) => g > now - this.windowMs);
    const limit = strikes > 0 ? Math.max(1, Math.floor(this.limit / 2)) : this.limit;
    if (inWindow.length >= limit)
      return Promise.resolve({
        decision: 'wait',
        waitMs: (inWindow[inWindow.length - limit] as number) + this.windowMs - now,
        atMs: now,
        strikes,
      });
    this.grants[cls].push(now);
    this.granted += 1;
    return Promise.resolve({
      decision: 'granted',
      atMs: now,
      atUs: BigInt(now) * 1000n,
      strikes,
      grant: `g${this.granted}`,
    });
  }

  answered(grants: readonly string[]): Promise<void> {
    this.check();
    this.answeredCalls += 1;
    this.answers.push(...grants);
    return Promise.resolve();
  }

  recordRateLimited(
    cls: RateClass,
    info: { path: string | null; retryAfterMs: number | null },
  ): Promise<number> {
    this.check();
    this.pauses[cls] = Math.max(this.pauses[cls], this.clock.now() + (info.retryAfterMs ?? this.windowMs));
    this.strikes.push({ cls, path: info.path, cleared: false });
    return Promise.resolve(this.active());
  }

  activeStrikes(): Promise<number> {
    this.check();
    return Promise.resolve(this.active());
  }

  clearStrikes(): Promise<number> {
    this.check();
    const n = this.active();
    for (const s of this.strikes) s.cleared = true;
    return Promise.resolve(n);
  }
}

function setup(): { clock: FakeClock; ledger: MemoryLedger; budget: RateBudget } {
  const clock = new FakeClock({ start: 1_800_000_000_000 });
  const ledger = new MemoryLedger(clock, 9, 1000);
  const budget = new RateBudget({
    readsPerWindow: 10,
    writesPerWindow: 10,
    windowMs: 1000,
    headroom: 0.9,
    clock,
    spend: new SharedLedgerRateSpend(ledger),
    logger: silentLogger(),
    random: () => 0,
    pauseJitterMs: [0, 0],
    maxInFlight: 4,
  });
  return { clock, ledger, budget };
}

describe('RateBudget with a shared ledger', () => {
  it("every token is the ledger's grant: a denial is slept on the process clock and asked again", async () => {
    const { clock, ledger, budget } = setup();
    const tokens: number[] = [];
    for (let i = 0; i < 12; i++) void budget.acquire('read').then((t) => tokens.push(t.seq));
    await settle();
    // The in-flight cap (a probe before any answer) holds them; settle each one as a response would.
    for (let i = 0; i < 12 && tokens.length < 9; i++) {
      budget.observe({ bucket: 'read', seq: tokens.length, at: clock.now() }, {});
      budget.settle({ bucket: 'read', seq: tokens.length, at: clock.now() });
      await settle();
    }
    expect(tokens).toHaveLength(9);
    expect(ledger.grants.read).toHaveLength(9);
    const asked = ledger.takes;
    await clock.advance(999);
    expect(tokens).toHaveLength(9);
    for (const seq of tokens) budget.settle({ bucket: 'read', seq, at: clock.now() });
    await clock.advance(2);
    await settle();
    expect(tokens.length).toBeGreaterThan(9);
    expect(ledger.takes).toBeGreaterThan(asked);
  });

  it("every grant's answer is booked in the ledger: at settle, and at once for a grant whose caller gave up", async () => {
    const { ledger, budget } = setup();
    const first = await budget.acquire('write');
    budget.observe(first, {});
    const second = await budget.acquire('write');
    expect(ledger.answers).toEqual([]);
    budget.settle(second);
    budget.settle(first);
    await settle();
    expect([...ledger.answers].sort()).toEqual(['g1', 'g2']);
    // A caller that gives up while the ledger decides: its grant is spent, and answered at once.
    const gaveUp = new AbortController();
    const pending = budget.acquire('write', gaveUp.signal).catch((e: unknown) => e);
    gaveUp.abort();
    expect(isPlatformError(await pending)).toBe(true);
    await settle();
    expect(ledger.granted).toBe(3);
    expect(ledger.answers).toContain('g3');
  });

  it('the ledger unreachable while taking a token: the call fails with the retryable network code and no token is granted', async () => {
    const { ledger, budget } = setup();
    ledger.down = true;
    const err = await budget.acquire('write').catch((e: unknown) => e);
    expect(isPlatformError(err) && err.code).toBe('network');
    expect(isPlatformError(err) && err.retryable).toBe(true);
    expect((err as Error).message).toContain('ECONNREFUSED');
    expect(ledger.grants.write).toHaveLength(0);
    ledger.down = false;
    await expect(budget.acquire('write')).resolves.toMatchObject({ bucket: 'write', seq: 1 });
  });

  it('a 429 while the ledger is unreachable: the strike counts at once, no token leaves before it is recorded, and it is recorded exactly once', async () => {
    const { ledger, budget } = setup();
    const t = await budget.acquire('write');
    budget.observe(t, {});
    ledger.down = true;
    await budget.onRateLimited(t, {
      path: '/public/v1/boardings/{id}/ack',
      retryAfterSeconds: 0,
      headers: {},
    });
    budget.settle(t);
    expect(ledger.strikes).toHaveLength(0);
    // Counted here: half pace, one in flight.
    expect(budget.strikes24h()).toBe(1);
    expect(budget.inFlightCap('write')).toBe(1);
    // Reads too: nothing leaves while a strike is known only to this process.
    for (const bucket of ['read', 'write'] as const) {
      await expect(budget.acquire(bucket)).rejects.toMatchObject({ code: 'network' });
    }
    expect(ledger.grants.read).toHaveLength(0);
    expect(ledger.grants.write).toHaveLength(1);

    ledger.down = false;
    const [r, w] = await Promise.all([budget.acquire('read'), budget.acquire('write')]);
    expect(r.bucket).toBe('read');
    expect(w.bucket).toBe('write');
    expect(ledger.strikes).toEqual([{ cls: 'write', path: '/public/v1/boardings/{id}/ack', cleared: false }]);
    expect(budget.strikes24h()).toBe(1);
  });

  it("a 429 pauses the class in the ledger (for every process) and the ledger's pause holds this process too", async () => {
    const { clock, ledger, budget } = setup();
    const t = await budget.acquire('read');
    await budget.onRateLimited(t, { path: '/x', retryAfterSeconds: 2, headers: {} });
    budget.settle(t);
    expect(ledger.pauses.read).toBe(clock.now() + 2000);
    // Another process's 429 on writes: this one learns it from the ledger's answer.
    ledger.pauses.write = clock.now() + 3000;
    let got = false;
    void budget.acquire('write').then(() => (got = true));
    await clock.advance(2999);
    expect(got).toBe(false);
    await clock.advance(2);
    await settle();
    expect(got).toBe(true);
  });

  it("the traffic stop is the ledger's answer: 2 strikes stop both buckets, a clear on another host resumes at the next call", async () => {
    const { ledger, budget } = setup();
    ledger.strikes.push(
      { cls: 'read', path: null, cleared: false },
      { cls: 'write', path: null, cleared: false },
    );
    await expect(budget.acquire('read')).rejects.toMatchObject({ code: 'rate_limit.traffic_stopped' });
    await expect(budget.acquire('write')).rejects.toMatchObject({ code: 'rate_limit.traffic_stopped' });
    expect(budget.stopped()).toBe(true);
    // Cleared elsewhere: this process's view still says stopped, but the ledger decides.
    await ledger.clearStrikes();
    expect(budget.stopped()).toBe(true);
    await expect(budget.acquire('write')).resolves.toMatchObject({ bucket: 'write' });
    expect(budget.stopped()).toBe(false);
    expect(await budget.clearStrikes('ops')).toBe(0);
  });
});
