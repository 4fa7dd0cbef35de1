import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../../src/sandbox/rate-limit.js';

describe('RateLimiter', () => {
  it('opens a fixed window at the first request, refuses without spending, and reopens after it', () => {
    let now = 1_000_000;
    const rl = new RateLimiter(
      {
        windowMs: 1_000,
        readsPerWindow: 2,
        writesPerWindow: 1,
        legacyPerWindow: 5,
        revokeAfterStrikes: null,
      },
      () => now,
    );
    expect(rl.take('k', 'read')).toMatchObject({ allowed: true, remaining: 1, resetMs: 1_001_000 });
    now += 500;
    expect(rl.take('k', 'read')).toMatchObject({ allowed: true, remaining: 0 });
    expect(rl.take('k', 'read')).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    expect(rl.take('k', 'write')).toMatchObject({ allowed: true, limit: 1 });
    expect(rl.take('other', 'read').allowed).toBe(true);
    now += 500;
    expect(rl.take('k', 'read')).toMatchObject({ allowed: true, remaining: 1, resetMs: 1_002_000 });
  });

  it('force makes a bucket refuse until the given seconds pass', () => {
    let now = 0;
    const rl = new RateLimiter(
      {
        windowMs: 60_000,
        readsPerWindow: 100,
        writesPerWindow: 30,
        legacyPerWindow: 100,
        revokeAfterStrikes: null,
      },
      () => now,
    );
    rl.force('write', 30);
    expect(rl.take('k', 'write')).toMatchObject({ allowed: false, retryAfterSeconds: 30 });
    expect(rl.take('k', 'read').allowed).toBe(true);
    now = 30_000;
    expect(rl.take('k', 'write').allowed).toBe(true);
  });
});
