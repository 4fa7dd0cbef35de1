import { afterEach, describe, expect, it } from 'vitest';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import type { PlatformClient } from '../../../src/platform/client.js';
import { clientFor } from './helpers.js';

let srv: RateLimitedServer | undefined;
let client: PlatformClient | undefined;
afterEach(async () => {
  await client?.close();
  await srv?.close();
  client = undefined;
  srv = undefined;
});

describe('Idempotency-Key on writes', () => {
  it('a key no header can carry is refused before it leaves, never retried as a network failure (regression: an ack keyed by a non-ASCII loan id looped)', async () => {
    srv = await startRateLimitedServer();
    client = clientFor(srv);
    for (const key of ['ack:loan/Zürich:brd_1', 'ack:東京', 'tab\there', ' leading', '']) {
      const err = await client
        .acknowledgeBoarding('L1', {}, { idempotencyKey: key })
        .catch((e: unknown) => e);
      expect(isPlatformError(err), key).toBe(true);
      expect((err as { code: string }).code, key).toBe('input.invalid');
    }
    expect(srv.requests).toEqual([]);
    expect(client.stats().retries).toBe(0);
    // A printable-ASCII key with inner spaces and any id in the path go out.
    await client
      .acknowledgeBoarding('loan/2026 Q1 ü', {}, { idempotencyKey: 'ack:loan/2026 Q1:brd_1' })
      .catch(() => undefined);
    expect(srv.requests).toHaveLength(1);
    expect(srv.requests[0]!.path).toBe(`/public/v1/loans/${encodeURIComponent('loan/2026 Q1 ü')}/boarding`);
  });
});
