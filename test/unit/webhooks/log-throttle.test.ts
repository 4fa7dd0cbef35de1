import { describe, expect, it } from 'vitest';
import { createLogThrottle } from '../../../src/webhooks/log-throttle.js';

describe('createLogThrottle', () => {
  it('admits perWindow lines per key, then reports how many it dropped', () => {
    const t = createLogThrottle(2, 1000);
    expect([t.admit('a', 0), t.admit('a', 1), t.admit('a', 2), t.admit('a', 3), t.admit('b', 3)]).toEqual([
      0,
      0,
      null,
      null,
      0,
    ]);
    expect(t.admit('a', 1000)).toBe(2);
  });
});
