import { describe, expect, it } from 'vitest';
import { maxInSlidingWindow, RequestLog, type RequestLogEntry } from '../../../src/sandbox/request-log.js';

const entry = (at: number): RequestLogEntry => ({
  at,
  key: 'k',
  bucket: 'read',
  route: 'GET /x',
  status: 200,
});

describe('RequestLog', () => {
  it('keeps the newest entries up to its capacity and counts what it dropped', () => {
    const log = new RequestLog(3);
    for (let t = 1; t <= 8; t++) log.add(entry(t));
    expect(log.since().map((e) => e.at)).toEqual([6, 7, 8]);
    expect(log.dropped).toBe(5);
    expect(log.since(7).map((e) => e.at)).toEqual([7, 8]);
    log.clear();
    expect(log.since()).toEqual([]);
    expect(log.dropped).toBe(0);
  });
});

describe('maxInSlidingWindow', () => {
  it('finds the most requests in any half-open window, wherever it starts', () => {
    // Fixed windows [0,1000) and [1000,2000) hold 2 each; the window [900,1900) holds 4.
    expect(maxInSlidingWindow([0, 900, 950, 1000, 1100, 1900], 1000)).toEqual({ max: 4, at: 900 });
    // Exactly windowMs apart: not in the same window.
    expect(maxInSlidingWindow([0, 1000, 2000], 1000).max).toBe(1);
    expect(maxInSlidingWindow([], 1000)).toEqual({ max: 0, at: null });
  });
});
