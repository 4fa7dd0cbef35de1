import { describe, expect, it } from 'vitest';
import { debounceTrigger } from '../../../src/webhooks/debounce.js';
import { FakeClock } from '../../support/fake-clock.js';

describe('debounceTrigger', () => {
  it('collapses a burst into one call carrying the distinct reasons', async () => {
    const clock = new FakeClock();
    const calls: string[][] = [];
    const t = debounceTrigger(clock, (r) => calls.push(r), 100);
    t('a');
    t('b');
    t('a');
    await clock.advance(99);
    expect(calls).toEqual([]);
    await clock.advance(1);
    expect(calls).toEqual([['a', 'b']]);
  });

  it('fires by maxWait even when calls keep coming', async () => {
    const clock = new FakeClock();
    const calls: string[][] = [];
    const t = debounceTrigger(clock, (r) => calls.push(r), 100, 250);
    for (let i = 0; i < 5; i++) {
      t('x');
      await clock.advance(50);
    }
    // 250 ms after the first call, although a call came every 50 ms.
    expect(calls).toEqual([['x']]);
  });

  it('cancel drops a pending call; flush runs it now', async () => {
    const clock = new FakeClock();
    const calls: string[][] = [];
    const t = debounceTrigger(clock, (r) => calls.push(r), 10_000);
    t('a');
    expect(t.pending).toBe(true);
    t.cancel();
    expect(t.pending).toBe(false);
    await clock.advance(10_000);
    expect(calls).toEqual([]);
    t('b');
    t.flush();
    expect(calls).toEqual([['b']]);
    expect(clock.pendingSleepers()).toBe(0);
  });
});
