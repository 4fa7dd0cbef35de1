import { describe, expect, it, vi } from 'vitest';
import { debounceTrigger } from '../../../src/webhooks/debounce.js';

describe('debounceTrigger', () => {
  it('collapses a burst into one call carrying the distinct reasons', () => {
    vi.useFakeTimers();
    try {
      const calls: string[][] = [];
      const t = debounceTrigger((r) => calls.push(r), 100);
      t('a');
      t('b');
      t('a');
      vi.advanceTimersByTime(99);
      expect(calls).toEqual([]);
      vi.advanceTimersByTime(1);
      expect(calls).toEqual([['a', 'b']]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('fires by maxWait even when calls keep coming', () => {
    vi.useFakeTimers();
    try {
      const calls: string[][] = [];
      const t = debounceTrigger((r) => calls.push(r), 100, 250);
      for (let i = 0; i < 10; i++) {
        t('x');
        vi.advanceTimersByTime(50);
      }
      expect(calls.length).toBeGreaterThanOrEqual(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('cancel drops a pending call; flush runs it now', () => {
    const calls: string[][] = [];
    const t = debounceTrigger((r) => calls.push(r), 10_000);
    t('a');
    expect(t.pending).toBe(true);
    t.cancel();
    expect(t.pending).toBe(false);
    t('b');
    t.flush();
    expect(calls).toEqual([['b']]);
  });
});
