import { describe, expect, it } from 'vitest';
import { FaultInjector } from '../../../src/sandbox/faults.js';

describe('sandbox fault injection', () => {
  it('a 429 rule answers with its Retry-After, as many times as its count allows', () => {
    const f = new FaultInjector();
    f.set(1, [{ route: 'POST /x', status429Rate: 1, retryAfterSeconds: 3, count: 1 }]);
    expect(f.decide('GET /y')).toMatchObject({ action: 'none' });
    expect(f.decide('POST /x')).toEqual({ latencyMs: 0, action: '429', slowBodyMs: 0, retryAfterSeconds: 3 });
    expect(f.decide('POST /x')).toMatchObject({ action: 'none' });
  });

  it('a slow-body rule slows the body of a response that is otherwise sent', () => {
    const f = new FaultInjector();
    f.set(1, [{ route: '*', slowBodyRate: 1, slowBodyMs: 1500 }]);
    expect(f.decide('GET /y')).toEqual({
      latencyMs: 0,
      action: 'none',
      slowBodyMs: 1500,
      retryAfterSeconds: 0,
    });
  });

  it('rules without the new effects draw the same seeded sequence as before (replayable seeds stay valid)', () => {
    const rules = [{ route: '*', status5xxRate: 0.3, resetRate: 0.2 }];
    const a = new FaultInjector();
    a.set(42, rules);
    const b = new FaultInjector();
    b.set(42, [...rules, { route: 'POST /other', status429Rate: 1 }]);
    const seq = (f: FaultInjector): string[] => Array.from({ length: 50 }, () => f.decide('GET /y').action);
    expect(seq(b)).toEqual(seq(a));
  });
});
