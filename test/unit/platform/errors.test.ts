import { describe, expect, it } from 'vitest';
import {
  classifyResponse,
  classifyThrown,
  CLIENT_CODES,
  DOCUMENTED_CODES,
  platformDisposition,
  parseRetryAfter,
  PlatformError,
} from '../../../src/platform/errors.js';
import { backoffMs, isRetryable } from '../../../src/platform/retry.js';

const ctx = { operation: 'getLoan', method: 'GET', path: '/api/public/v1/loans/L1' };
const NOW = 1_800_000_000_000;
const classify = (status: number, body: unknown, retryAfter?: string): PlatformError =>
  classifyResponse(ctx, status, body, { retryAfter }, NOW);

describe('error classification at the boundary', () => {
  it.each([
    [401, { code: 'auth.invalid_key', message: 'bad key' }, 'auth.invalid_key', true],
    [403, { code: 'auth.insufficient_permissions' }, 'auth.insufficient_permissions', true],
    [403, { code: 'auth.org_mismatch' }, 'auth.org_mismatch', true],
    [403, { code: 'auth.env_mismatch' }, 'auth.env_mismatch', true],
    [403, { code: 'auth.env_not_available' }, 'auth.env_not_available', true],
    [403, { code: 'auth.country_restricted' }, 'auth.country_restricted', true],
    [403, { code: 'api_key.production_not_allowed' }, 'api_key.production_not_allowed', true],
    [403, { code: 'auth.some_new_rule' }, 'auth.insufficient_permissions', true],
    [401, null, 'auth.invalid_key', true],
    [404, { code: 'loan.not_found' }, 'loan.not_found', false],
    [404, { code: 'document.missing' }, 'not_found', false],
    [400, { code: 'input.invalid', message: 'limit too large' }, 'input.invalid', false],
    [400, { code: 'period_key_required' }, 'period_key_required', false],
    [
      400,
      { success: false, error: [{ path: ['name'], message: 'Required' }], data: null },
      'validation',
      false,
    ],
    [400, { code: 'role.unknown', message: 'unknown role' }, 'input.invalid', false],
    [409, { code: 'idempotency.conflict' }, 'conflict', false],
    [422, { message: 'nope' }, 'validation', false],
  ] as const)('%i %j → %s (fatal %s), never retried', (status, body, code, fatal) => {
    const e = classify(status, body);
    expect(e.code).toBe(code);
    expect(e.fatal).toBe(fatal);
    expect(e.retryable).toBe(false);
    expect(e.status).toBe(status);
    expect(isRetryable(e, { bucket: 'read', idempotent: true })).toBe(false);
  });

  it('a 409 saying the same idempotent request is still in progress is retried later, with the same key', () => {
    const e = classify(409, {
      code: 'idempotency.in_progress',
      message: 'a request with this key is being processed',
    });
    expect(e.code).toBe('in_progress');
    expect(e.retryable).toBe(true);
    expect(e.fatal).toBe(false);
    expect(isRetryable(e, { bucket: 'write', idempotent: true })).toBe(true);
  });

  it('knows every documented code', () => {
    for (const code of DOCUMENTED_CODES) {
      if (code === 'validation' || code === 'rate_limit.exceeded') continue;
      expect(classify(code.startsWith('auth') ? 403 : 400, { code }).code).toBe(code);
    }
  });

  it('keeps the validation body error array and names the fields in the message', () => {
    const e = classify(400, {
      success: false,
      error: [{ path: ['naics'], message: 'at most 6 characters' }],
      data: null,
    });
    expect(e.validationErrors).toEqual([{ path: ['naics'], message: 'at most 6 characters' }]);
    expect(e.message).toContain('naics: at most 6 characters');
  });

  it('5xx and 408 are retryable; a 429 is rate_limit.exceeded with the longest wait named', () => {
    expect(classify(503, 'oops')).toMatchObject({ code: 'server', retryable: true, fatal: false });
    expect(classify(500, { code: 'internal' })).toMatchObject({ code: 'server', retryable: true });
    expect(classify(408, null)).toMatchObject({ code: 'timeout', retryable: true });
    const rl = classify(429, { code: 'rate_limit.exceeded', retryAfter: 7 }, '3');
    expect(rl).toMatchObject({ code: 'rate_limit.exceeded', retryAfterSeconds: 7 });
    expect(classify(429, { code: 'whatever' }, '4').retryAfterSeconds).toBe(4);
    // The budget owns 429s: the retry policy never retries one itself.
    expect(isRetryable(rl, { bucket: 'read', idempotent: true })).toBe(false);
  });

  it('never carries the API key or a presigned query in its message', () => {
    const e = classify(401, {
      code: 'auth.invalid_key',
      message: 'key pk_live_ABCDEF123 rejected; see https://x.example/p?sig=SECRET',
    });
    expect(e.message).not.toContain('ABCDEF123');
    expect(e.message).not.toContain('SECRET');
  });

  it('classifies thrown network errors, timeouts and aborts', () => {
    const undiciErr = (code: string): Error => Object.assign(new Error(code), { code });
    expect(classifyThrown(ctx, undiciErr('UND_ERR_CONNECT_TIMEOUT'))).toMatchObject({
      code: 'timeout',
      retryable: true,
    });
    expect(classifyThrown(ctx, undiciErr('UND_ERR_HEADERS_TIMEOUT'))).toMatchObject({ code: 'timeout' });
    expect(classifyThrown(ctx, undiciErr('UND_ERR_SOCKET'))).toMatchObject({
      code: 'network',
      retryable: true,
    });
    expect(classifyThrown(ctx, new Error('x', { cause: undiciErr('ECONNRESET') }))).toMatchObject({
      code: 'network',
    });
    expect(classifyThrown(ctx, undiciErr('ECONNREFUSED'))).toMatchObject({ code: 'network' });
    const ac = new AbortController();
    ac.abort();
    expect(classifyThrown(ctx, new Error('whatever'), ac.signal)).toMatchObject({
      code: 'aborted',
      retryable: false,
    });
    expect(classifyThrown(ctx, new TypeError('bug'))).toMatchObject({ code: 'unknown', retryable: false });
  });

  it('retries network errors on reads, and on writes only with an Idempotency-Key', () => {
    const net = new PlatformError({ code: 'network', message: 'reset' });
    expect(isRetryable(net, { bucket: 'read', idempotent: false })).toBe(true);
    expect(isRetryable(net, { bucket: 'write', idempotent: true })).toBe(true);
    expect(isRetryable(net, { bucket: 'write', idempotent: false })).toBe(false);
  });

  it('backs off exponentially with jitter, capped, and never below Retry-After', () => {
    const policy = { maxRetries: 5, minDelayMs: 500, maxDelayMs: 4000 };
    expect(backoffMs(policy, 1, () => 0)).toBe(250);
    expect(backoffMs(policy, 1, () => 0.999)).toBeLessThanOrEqual(500);
    expect(backoffMs(policy, 3, () => 0.5)).toBe(1500);
    expect(backoffMs(policy, 10, () => 0.999)).toBeLessThanOrEqual(4000);
    expect(backoffMs(policy, 1, () => 0, 10)).toBe(10_000);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('2', NOW)).toBe(2);
    expect(parseRetryAfter(new Date(NOW + 5000).toUTCString(), NOW)).toBeCloseTo(5, 0);
    expect(parseRetryAfter('soon', NOW)).toBeNull();
    // An HTTP date is the platform's instant: read against its Date header when this host is off.
    const server = NOW - 180_000; // this host is 3 min ahead
    expect(parseRetryAfter(new Date(server + 5000).toUTCString(), NOW, server - NOW)).toBeCloseTo(5, 0);
    expect(
      classifyResponse(
        { operation: 'op', method: 'POST', path: '/x' },
        429,
        null,
        { retryAfter: new Date(server + 4000).toUTCString(), date: new Date(server).toUTCString() },
        NOW,
      ).retryAfterSeconds,
    ).toBeCloseTo(4, 0);
    expect(parseRetryAfter(undefined, NOW)).toBeNull();
  });
});

describe('disposition (what the pipeline does about a failed call, decided once)', () => {
  it('classifies every code, consistently with retryable and fatal', () => {
    for (const code of [...DOCUMENTED_CODES, ...CLIENT_CODES]) {
      const e = new PlatformError({ code, message: code });
      expect(e.disposition).toBe(platformDisposition(code));
      expect(e.disposition === 'fatal').toBe(e.fatal);
      expect(e.disposition === 'retry-call').toBe(e.retryable);
    }
  });

  it('the cases the boarding pipeline relies on', () => {
    expect(platformDisposition('auth.invalid_key')).toBe('fatal');
    expect(platformDisposition('rate_limit.traffic_stopped')).toBe('stop-cycle');
    expect(platformDisposition('server')).toBe('retry-call');
    expect(platformDisposition('rate_limit.exceeded')).toBe('retry-call');
    expect(platformDisposition('download.expired')).toBe('retry-later');
    expect(platformDisposition('response.invalid')).toBe('retry-later');
    expect(platformDisposition('aborted')).toBe('retry-later');
    expect(platformDisposition('download.too_large')).toBe('quarantine');
    expect(platformDisposition('loan.not_found')).toBe('quarantine');
    expect(platformDisposition('validation')).toBe('quarantine');
  });

  it('is carried to logs and the loans table', () => {
    expect(
      classifyResponse({ operation: 'op', method: 'GET', path: '/x' }, 503, null, {}, 0).toJSON(),
    ).toMatchObject({ code: 'server', disposition: 'retry-call' });
  });
});
