import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import {
  bucketFor,
  parseResetHeader,
  RateBudget,
  STRIKE_WINDOW_MS,
  type Token,
} from '../../../src/platform/rate-budget/budget.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import { serverClockOffsetMs } from '../../../src/platform/server-clock.js';
import { createMemoryRateState, type RateStateStore } from '../../../src/platform/rate-budget/ledger.js';
import { InProcessRateSpend } from '../../../src/platform/rate-budget/in-process.js';
import { FakeClock, settle } from '../../support/fake-clock.js';
import { countStatements } from '../../support/count-statements.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createSqliteRateState } from '../../../src/store/rate-budget/sqlite.js';

function budget(
  clock: FakeClock,
  o: {
    state?: RateStateStore;
    reads?: number;
    writes?: number;
    headroom?: number;
    logger?: ReturnType<typeof silentLogger>;
    flightMs?: number;
  } = {},
): RateBudget {
  return new RateBudget({
    readsPerWindow: o.reads ?? 100,
    writesPerWindow: o.writes ?? 30,
    windowMs: 1000,
    headroom: o.headroom ?? 0.9,
    clock,
    spend: new InProcessRateSpend(o.state ?? createMemoryRateState(), { flightMs: o.flightMs ?? 0 }),
    logger: o.logger ?? silentLogger(),
    random: () => 0,
    pauseJitterMs: [0, 0],
  });
}

/** Starts n acquisitions and reports how many resolved so far. */
function start(
  b: RateBudget,
  bucket: 'read' | 'write',
  n: number,
): { done: () => number; tokens: Token[]; errors: unknown[] } {
  const tokens: Token[] = [];
  const errors: unknown[] = [];
  for (let i = 0; i < n; i++) {
    b.acquire(bucket).then(
      (t) => tokens.push(t),
      (e: unknown) => errors.push(e),
    );
  }
  return { done: () => tokens.length, tokens, errors };
}

describe('rate budget math', () => {
  it('allows floor(limit × headroom) per window, at least 1', () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    expect(budget(clock).allowed('read')).toBe(90);
    expect(budget(clock).allowed('write')).toBe(27);
    expect(budget(clock, { headroom: 1 }).allowed('read')).toBe(100);
    expect(budget(clock, { reads: 1, headroom: 0.5 }).allowed('read')).toBe(1);
  });

  it('search (POST) and every other non-GET method spend the write bucket', () => {
    expect(bucketFor('GET')).toBe('read');
    expect(bucketFor('head')).toBe('read');
    for (const m of ['POST', 'PATCH', 'DELETE', 'PUT']) expect(bucketFor(m)).toBe('write');
  });

  it('is a sliding window: the 91st attempt waits until the 1st leaves the window', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const r = start(b, 'read', 91);
    await settle();
    expect(r.done()).toBe(90);
    await clock.advance(999);
    expect(r.done()).toBe(90);
    await clock.advance(2);
    expect(r.done()).toBe(91);
  });

  it('a call counts until a window after its answer (the platform counts its arrival): a late answer holds its token longer, one never booked holds it until its flight bound', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock, { flightMs: 5_000 });
    const r = start(b, 'write', 28);
    await settle();
    expect(r.done()).toBe(27);
    await clock.advance(600);
    // Answers come 600 ms after the grants for all but the first two; those two never come.
    for (const t of r.tokens.slice(2)) b.settle(t);
    await clock.advance(999);
    // More than a window after every grant, less than one after the answers: no token yet.
    expect(r.done()).toBe(27);
    await clock.advance(2);
    // The 25 answered calls have left; the 2 still in flight hold their tokens.
    expect(r.done()).toBe(28);
    const more = start(b, 'write', 26);
    await settle();
    expect(more.done()).toBe(24);
    // The two never answered leave at grant + flight bound + window.
    await clock.advance(5_000 + 1_000 - 1_601 - 1 + 100);
    expect(more.done()).toBe(26);
  });

  it('does not refill a whole window at a boundary: only the tokens that left free up', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const first = start(b, 'read', 45);
    await settle();
    await clock.advance(500);
    const second = start(b, 'read', 45);
    await settle();
    expect(first.done() + second.done()).toBe(90);
    const third = start(b, 'read', 90);
    await clock.advance(502); // first 45 have left; the second 45 are still in the window
    expect(third.done()).toBe(45);
    await clock.advance(500);
    expect(third.done()).toBe(90);
  });

  it('believes the server when it says fewer remain, until its reset', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const [t] = await Promise.all([b.acquire('read')]);
    b.observe(t, { limit: '100', remaining: '3', reset: String(Math.ceil((clock.now() + 5000) / 1000)) });
    const r = start(b, 'read', 5);
    await settle();
    expect(r.done()).toBe(3);
    await clock.advance(4000);
    expect(r.done()).toBe(3);
    await clock.advance(2000);
    expect(r.done()).toBe(5);
  });

  it('ignores a server count that is more generous than our own window', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const first = start(b, 'read', 90);
    await settle();
    b.observe(first.tokens[89]!, { remaining: '99', reset: '60' });
    const more = start(b, 'read', 1);
    await settle();
    expect(more.done()).toBe(0);
  });

  it('a 429 pauses the whole bucket until max(Retry-After, Reset) and never shorter', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const t = await b.acquire('read');
    const resetInFive = String(Math.ceil((clock.now() + 5000) / 1000));
    const until = await b.onRateLimited(t, {
      path: '/x',
      retryAfterSeconds: 2,
      headers: { reset: resetInFive },
    });
    expect(until).toBeGreaterThanOrEqual(clock.now() + 5000);
    const r = start(b, 'read', 3);
    await clock.advance(4999);
    expect(r.done()).toBe(0);
    await clock.advance(until - clock.now());
    expect(r.done()).toBe(3);
    // Writes are a separate bucket: not paused by a read 429.
    const w = start(b, 'write', 1);
    await settle();
    expect(w.done()).toBe(1);
  });

  it('a 429 that names no wait pauses for a full window', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const t = await b.acquire('write');
    expect(await b.onRateLimited(t, { path: '/x', retryAfterSeconds: null, headers: {} })).toBe(
      clock.now() + 1000,
    );
  });

  it('one strike halves the pace; two stop reads and writes (fail fast, alert once)', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const lines: string[] = [];
    const logger = createLogger({
      destination: new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }),
      level: 'info',
    });
    const b = budget(clock, { logger });
    await b.onRateLimited(await b.acquire('read'), { path: '/a', retryAfterSeconds: 1, headers: {} });
    expect(b.strikes24h()).toBe(1);
    expect(b.allowed('read')).toBe(45);
    expect(b.allowed('write')).toBe(13);
    expect(b.trafficStopped()).toBe(false);
    await clock.advance(2000);
    const pendingWrite = b.acquire('write');
    await b.onRateLimited(await b.acquire('read'), { path: '/b', retryAfterSeconds: 1, headers: {} });
    expect(b.trafficStopped()).toBe(true);
    const err = await pendingWrite.then(
      () => null,
      (e: unknown) => e,
    );
    // The write queued before the second strike was either granted before it or fails fast now.
    if (err !== null) expect(isPlatformError(err) && err.code).toBe('rate_limit.traffic_stopped');
    await expect(b.acquire('write')).rejects.toMatchObject({ code: 'rate_limit.traffic_stopped' });
    await clock.advance(2000);
    // Reads stop too (the platform counts a 429 to a read like any other), even after the pause.
    expect(b.stopped()).toBe(true);
    await expect(b.acquire('read')).rejects.toMatchObject({ code: 'rate_limit.traffic_stopped' });
    const alerts = lines.filter((l) => l.includes('"level":50') && l.includes('traffic stopped'));
    expect(alerts).toHaveLength(1);
    // The ledger ages out after 24 h.
    await clock.advance(STRIKE_WINDOW_MS);
    expect(b.trafficStopped()).toBe(false);
    expect(b.allowed('read')).toBe(90);
  });

  it('restores spend, pauses and strikes from the state store (a restart never bursts)', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const state = createMemoryRateState();
    const b1 = budget(clock, { state });
    const r = start(b1, 'read', 60);
    await settle();
    expect(r.done()).toBe(60);
    await b1.onRateLimited(await b1.acquire('write'), { path: '/w', retryAfterSeconds: 3, headers: {} });
    b1.close();
    await clock.advance(100);
    const b2 = budget(clock, { state });
    expect(b2.strikes24h()).toBe(1);
    // 60 spent in the window, and the pace is halved by the strike: nothing left for now.
    expect(b2.snapshot('read')).toMatchObject({ allowed: 45, spentInWindow: 60, remaining: 0 });
    expect(b2.snapshot('write').pausedUntil).toBeGreaterThanOrEqual(clock.now() + 2900);
    const more = start(b2, 'read', 1);
    await settle();
    expect(more.done()).toBe(0);
    await clock.advance(1000);
    expect(more.done()).toBe(1);
  });

  it('an aborted wait rejects without spending a token', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const state = createMemoryRateState();
    const b = budget(clock, { state, reads: 1, headroom: 1 });
    await b.acquire('read');
    const ac = new AbortController();
    const waiting = b.acquire('read', ac.signal);
    ac.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'aborted' });
    expect(state.spendRows()).toBe(1);
  });

  it('operator can clear strikes', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    await b.onRateLimited(await b.acquire('read'), { path: '/a', retryAfterSeconds: 1, headers: {} });
    await b.onRateLimited(await b.acquire('write'), { path: '/a', retryAfterSeconds: 1, headers: {} });
    expect(b.trafficStopped()).toBe(true);
    expect(await b.clearStrikes('ops:bob')).toBe(2);
    expect(b.trafficStopped()).toBe(false);
  });

  it('reads X-RateLimit-Reset as epoch seconds (spec), epoch ms or delta seconds', () => {
    const now = 1_800_000_000_000;
    expect(parseResetHeader('1800000005', now)).toBe(1_800_000_005_000);
    expect(parseResetHeader('1800000005000', now)).toBe(1_800_000_005_000);
    expect(parseResetHeader('30', now)).toBe(now + 30_000);
    expect(parseResetHeader('x', now)).toBeNull();
  });

  it("reads an epoch reset against the answer's Date header when this host's clock is off (issue 37)", () => {
    const now = 1_800_000_000_000;
    const server = now + 120_000; // the platform's clock: this host is 2 min behind
    const date = new Date(server).toUTCString();
    const reset = String(Math.ceil((server + 1500) / 1000));
    const at = parseResetHeader(reset, now, serverClockOffsetMs(date, now));
    // 2 s after this host's now at most (the Date header counts whole seconds), never 2 min.
    expect(at! - now).toBeGreaterThanOrEqual(1500);
    expect(at! - now).toBeLessThanOrEqual(2000);
    // A Date within the header's resolution is rounding, not skew: the host clock is trusted.
    expect(serverClockOffsetMs(new Date(now + 1500).toUTCString(), now)).toBe(0);
    expect(serverClockOffsetMs(new Date(now - 180_000).toUTCString(), now)).toBe(-180_000);
    expect(serverClockOffsetMs('not a date', now)).toBe(0);
    expect(serverClockOffsetMs(null, now)).toBe(0);
  });

  it('a host 2 min behind the platform waits out a spent server window in seconds, not minutes (issue 37)', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const server = (): number => clock.now() + 120_000;
    const b = budget(clock);
    const t = await b.acquire('read');
    b.observe(t, {
      remaining: '0',
      reset: String(Math.ceil((server() + 1000) / 1000)),
      date: new Date(server()).toUTCString(),
    });
    const r = start(b, 'read', 1);
    await clock.advance(900);
    expect(r.done()).toBe(0);
    await clock.advance(1200);
    expect(r.done()).toBe(1);
  });

  it('a 429 stops the bucket at its status line, before its body is read (issue 37)', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const [t1, t2] = await Promise.all([b.acquire('write'), b.acquire('write')]);
    b.holdAtRateLimitStatus(t1, { retryAfter: '3', date: new Date(clock.now()).toUTCString() });
    const r = start(b, 'write', 1);
    b.settle(t2);
    await clock.advance(2999);
    expect(r.done()).toBe(0);
    // The body names a longer wait: the pause grows, and the one strike is booked then.
    const until = await b.onRateLimited(t1, { path: '/x', retryAfterSeconds: 5, headers: {} });
    b.settle(t1);
    expect(until).toBe(clock.now() + 5000);
    await clock.advance(4999);
    expect(r.done()).toBe(0);
    await clock.advance(1);
    expect(r.done()).toBe(1);
    expect(b.strikes24h()).toBe(1);
  });

  it('bounds tokens in flight: 1 probe, then min(connections, strikes left before the stop, server remaining − taken)', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = new RateBudget({
      readsPerWindow: 100,
      writesPerWindow: 30,
      windowMs: 1000,
      headroom: 0.9,
      clock,
      spend: new InProcessRateSpend(createMemoryRateState()),
      logger: silentLogger(),
      random: () => 0,
      pauseJitterMs: [0, 0],
      maxInFlight: 8,
    });
    // Nothing answered yet: one probe at a time.
    const r = start(b, 'read', 6);
    await settle();
    expect(r.done()).toBe(1);
    expect(b.inFlightCap('read')).toBe(1);
    b.observe(r.tokens[0]!, { remaining: '50', reset: String(Math.ceil((clock.now() + 1000) / 1000)) });
    b.settle(r.tokens[0]!);
    await settle();
    // Clean ledger: never more in flight than the 2 strikes left before the stop.
    expect(b.inFlightCap('read')).toBe(2);
    expect(r.done()).toBe(3);
    // The server says only 1 remains after the last token we took: 1 in flight at most.
    b.observe(r.tokens[2]!, { remaining: '1', reset: String(Math.ceil((clock.now() + 1000) / 1000)) });
    expect(b.inFlightCap('read')).toBe(1);
    b.settle(r.tokens[1]!);
    b.settle(r.tokens[2]!);
    await settle();
    expect(r.done()).toBe(4);
    // A strike: 1 in flight (and the pause).
    await b.onRateLimited(r.tokens[3]!, { path: '/x', retryAfterSeconds: 1, headers: {} });
    b.settle(r.tokens[3]!);
    await clock.advance(5000);
    expect(b.inFlightCap('read')).toBe(1);
    expect(r.done()).toBe(5);
    await b.clearStrikes('ops:test');
    b.settle(r.tokens[4]!);
    await settle();
    expect(r.done()).toBe(6);
    expect(b.inFlightCap('read')).toBe(2);
  });
});

describe('rate budget waits are announced with their reason (issue 24 point 3: waiting is visible)', () => {
  it('a full window announces "budget/window" with when it ends, then "resumed" when the call goes out', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock, { reads: 2, headroom: 1 });
    const seen: unknown[] = [];
    b.onWait((w) => seen.push(w));
    await b.acquire('read');
    await b.acquire('read');
    const third = start(b, 'read', 1);
    await settle();
    expect(third.done()).toBe(0);
    expect(seen).toEqual([{ kind: 'budget', bucket: 'read', reason: 'window', until: clock.now() + 1001 }]);
    await clock.advance(1001);
    expect(third.done()).toBe(1);
    expect(seen.at(-1)).toEqual({ kind: 'resumed', bucket: 'read' });
  });

  it('a 429 announces the pause at once with its end, and a call held by it says "paused"', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock);
    const seen: Array<{ kind: string; until?: number; bucket?: string }> = [];
    const off = b.onWait((w) => seen.push(w));
    const t = await b.acquire('write');
    const until = await b.onRateLimited(t, { path: '/x', retryAfterSeconds: 3, headers: {} });
    expect(seen).toEqual([{ kind: 'paused', bucket: 'write', until }]);
    b.settle(t);
    const next = start(b, 'write', 1);
    await settle();
    expect(seen.at(-1)).toEqual({ kind: 'paused', bucket: 'write', until });
    await clock.advance(until - clock.now());
    expect(next.done()).toBe(1);
    expect(seen.at(-1)).toEqual({ kind: 'resumed', bucket: 'write' });
    off();
    await b.acquire('read');
    expect(seen.at(-1)).toEqual({ kind: 'resumed', bucket: 'write' });
  });

  it('a wait shorter than 200 ms is not announced (a progress line would only flicker)', async () => {
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const b = budget(clock, { reads: 1, headroom: 1 });
    const seen: unknown[] = [];
    b.onWait((w) => seen.push(w));
    await b.acquire('read');
    await clock.advance(900);
    const r = start(b, 'read', 1);
    await clock.advance(101);
    expect(r.done()).toBe(1);
    expect(seen).toEqual([]);
  });
});

describe('what the in-process budget costs the state database (issue 44 item 5)', () => {
  it('tokens inside one reservation write nothing; each new reservation is one statement; the close one more', async () => {
    const sqlite = openDatabase(':memory:');
    const state = createSqliteRateState(sqlite);
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const counter = countStatements(sqlite);
    try {
      const b = budget(clock, { state });
      counter.reset();
      const first = start(b, 'read', 40);
      await settle();
      expect(first.done()).toBe(40);
      // 40 platform calls in one reservation (windowMs 1000: half a second): one statement.
      expect(counter.seen, counter.seen.join('\n')).toHaveLength(1);
      expect(counter.seen[0]).toMatch(/^INSERT INTO rate_spend_windows .* RETURNING/);
      counter.reset();
      await clock.advance(600);
      const more = start(b, 'read', 10);
      await settle();
      expect(more.done()).toBe(10);
      expect(counter.seen).toHaveLength(1);
      counter.reset();
      b.close();
      // The exact total at shutdown, so the next run waits for what was spent, not for the reservation.
      expect(counter.seen).toHaveLength(1);
      const next = budget(clock, { state });
      expect(next.snapshot('read').spentInWindow).toBe(50);
      next.close();
    } finally {
      counter.stop();
      sqlite.close();
    }
  });
});
