import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/lib/logger.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import { clientFor } from './helpers.js';

const FULL_EIN = '12-3456789';

function capture(): { text: () => string; stream: Writable } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return { text: () => chunks.join(''), stream };
}

describe('log output of a full client exchange', () => {
  let srv: RateLimitedServer;
  afterEach(async () => srv.close());

  it('never contains the API key, the Authorization value, a full EIN or a presigned query string', async () => {
    srv = await startRateLimitedServer({ apiKey: 'pk_test_LOGSECRET0123456789' });
    const out = capture();
    const logger = createLogger({ destination: out.stream, level: 'trace' });
    const client = clientFor(srv, {}, logger);

    srv.route('GET', '/public/v1/loans/{id}/entities', () => ({
      body: {
        data: {
          businesses: [{ id: 'B1', name: 'Acme', ein: FULL_EIN, einLast4: '6789', role: 'borrower' }],
          people: [],
        },
      },
    }));
    srv.route('GET', '/public/v1/loans/{id}/summary', () => ({
      body: { data: { loan: { id: 7, ein: FULL_EIN }, metrics: {} } },
    }));
    srv.route('GET', '/public/v1/products', () => ({ body: { data: [] }, headers: { deprecation: 'true' } }));
    srv.setQueue([{ id: 'L1' }, { id: 'L2', centsAmount: FULL_EIN, ein: FULL_EIN }]);
    const presigned = srv.presign('D1', Buffer.from('%PDF-1.7 hello'));
    const expired = srv.presign('D2', Buffer.from('x'), { ttlMs: -1 });
    const signature = new URL(presigned).searchParams.get('X-Signature')!;
    const expiredSignature = new URL(expired).searchParams.get('X-Signature')!;

    await client.getLoan('L1');
    const entities = await client.getEntities('L1');
    expect(entities.businesses[0]!.ein).toBe(FULL_EIN);
    await client.listProducts();
    await client.listProducts();
    for await (const page of client.boardingQueue()) expect(page.invalid).toHaveLength(1);
    await client.acknowledgeBoarding('L1', { ein: FULL_EIN }, { idempotencyKey: 'ack:L1:r1' });
    const addr = await client.getDownloadAddress('D1');
    const chunks: Buffer[] = [];
    await client.download(addr.url, new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) }), {
      maxBytes: 1000,
    });
    const errors: unknown[] = [];
    errors.push(
      await client
        .download(expired, new Writable({ write: (_c, _e, cb) => cb() }), { maxBytes: 10 })
        .catch((e: unknown) => e),
    );
    errors.push(await client.getLoanSummary('L1').catch((e: unknown) => e));
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 1 });
    // A 429 is not re-sent within the call: the call fails (retryable), the next one waits the pause.
    errors.push(await client.getLoan('L9').catch((e: unknown) => e));
    await client.getLoan('L9');
    const bad = clientFor(srv, { apiKey: 'pk_test_WRONGKEY987' }, logger);
    errors.push(await bad.getLoan('L1').catch((e: unknown) => e));
    await bad.close();
    await client.close();
    // A caller logs errors the usual way: the whole error object.
    for (const err of errors) {
      expect(isPlatformError(err)).toBe(true);
      logger.error({ err }, 'platform call failed');
    }
    logger.flush();

    const text = out.text();
    expect(text).toContain('deprecated');
    expect(text).toContain('rate limit hit');
    expect(text).toContain('response does not match');
    for (const secret of [
      srv.apiKey,
      'LOGSECRET',
      'WRONGKEY987',
      `Bearer ${srv.apiKey}`,
      FULL_EIN,
      '123456789',
      signature,
      expiredSignature,
      'X-Signature=',
      new URL(presigned).search,
    ]) {
      expect(text, `log output contains ${secret}`).not.toContain(secret);
    }
    // The deprecation warning appears once for the path, though both calls were counted.
    expect(text.match(/deprecated \(Deprecation header\)/g)).toHaveLength(1);
    expect(client.stats().deprecations).toBe(2);
  });
});
