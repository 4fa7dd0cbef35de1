import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/store/db.js';
import { createMemoryRateState, createSqliteRateState, type RateStateStore } from '../../../src/store/rate-state.js';

const stores: Array<[string, () => RateStateStore]> = [
  ['sqlite', () => createSqliteRateState(openDatabase(':memory:'))],
  ['memory', () => createMemoryRateState()],
];

describe.each(stores)('%s rate state', (_name, make) => {
  it('keeps spend per bucket, a pause that only grows, and strikes until cleared or pruned', () => {
    const s = make();
    s.recordSpend('read', 100);
    s.recordSpend('read', 300);
    s.recordSpend('write', 200);
    expect(s.loadSpend('read', 150)).toEqual([300]);
    expect(s.loadSpend('write', 0)).toEqual([200]);
    s.savePause('write', 5000);
    s.savePause('write', 4000);
    expect(s.loadPause('write')).toBe(5000);
    expect(s.loadPause('read')).toBeNull();
    s.recordStrike({ at: 1000, bucket: 'read', path: '/a', retryAfterMs: 2000 });
    s.recordStrike({ at: 2000, bucket: 'write', path: null, retryAfterMs: null });
    expect(s.activeStrikes(1500).map((x) => x.bucket)).toEqual(['write']);
    expect(s.clearStrikes('ops', 3000)).toBe(2);
    expect(s.activeStrikes(0)).toEqual([]);
    s.prune(250, 1500);
    expect(s.loadSpend('read', 0)).toEqual([300]);
    expect(s.loadSpend('write', 0)).toEqual([]);
  });
});
