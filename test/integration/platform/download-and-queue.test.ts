import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { isPlatformError } from '../../../src/platform/errors.js';
import { OFFSET_CURSOR_PREFIX } from '../../../src/platform/queue.js';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import { clientFor } from './helpers.js';

function sink(): { stream: Writable; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(c: Buffer, _e, cb) {
      chunks.push(c);
      cb();
    },
  });
  return { stream, bytes: () => Buffer.concat(chunks) };
}

function loan(i: number): Record<string, unknown> {
  return {
    id: `L${i}`,
    loanNumber: `N${i}`,
    status: 'funded',
    centsAmount: 1000 * i,
    boarding: { boarded: false, releasedAt: '2026-01-01T00:00:00Z' },
  };
}

describe('presigned download', () => {
  let srv: RateLimitedServer;
  afterEach(async () => srv.close());

  it('carries no Authorization header, streams to the sink and hashes while streaming', async () => {
    srv = await startRateLimitedServer();
    const client = clientFor(srv);
    const content = Buffer.alloc(200_000, 7);
    srv.presign('D1', content);
    const addr = await client.getDownloadAddress('D1');
    expect(addr.url.startsWith(srv.blobOrigin)).toBe(true);
    const s = sink();
    const result = await client.download(addr.url, s.stream, { maxBytes: 1_000_000 });
    await client.close();
    expect(result).toEqual({
      sha256: createHash('sha256').update(content).digest('hex'),
      bytes: 200_000,
      contentType: 'application/pdf',
    });
    expect(s.bytes().equals(content)).toBe(true);
    expect(srv.downloads).toHaveLength(1);
    expect(srv.downloads[0]!.hadAuthorization).toBe(false);
    expect(JSON.stringify(srv.downloads[0]!.headers)).not.toContain(srv.apiKey);
    // …while the API call that produced the address did carry it.
    expect(srv.requests[0]!.headers.authorization).toBe(`Bearer ${srv.apiKey}`);
    expect(client.stats().downloads).toEqual({ ok: 1, failed: 0 });
  });

  it('aborts past the size cap, declared or streamed', async () => {
    srv = await startRateLimitedServer();
    const client = clientFor(srv);
    const declared = srv.presign('big', Buffer.alloc(100_000, 1));
    const streamed = srv.presign('big-chunked', Buffer.alloc(100_000, 1), { omitContentLength: true });
    for (const url of [declared, streamed]) {
      const s = sink();
      const err = await client.download(url, s.stream, { maxBytes: 40_000 }).catch((e: unknown) => e);
      expect(isPlatformError(err) && err.code).toBe('download.too_large');
      expect(s.bytes().length).toBeLessThanOrEqual(40_000);
      expect(s.stream.destroyed).toBe(true);
      expect((err as Error).message).not.toContain('X-Signature');
    }
    await client.close();
  });

  it('an expired address is a typed error so the caller can ask for a new one', async () => {
    srv = await startRateLimitedServer();
    const client = clientFor(srv);
    const url = srv.presign('old', Buffer.from('x'), { ttlMs: -1 });
    const err = await client.download(url, sink().stream, { maxBytes: 10 }).catch((e: unknown) => e);
    await client.close();
    expect(isPlatformError(err) && { code: err.code, status: err.status }).toEqual({
      code: 'download.expired',
      status: 403,
    });
    expect((err as Error).message).not.toContain('X-Signature');
  });
});

describe('boarding queue walk', () => {
  let srv: RateLimitedServer;
  afterEach(async () => srv.close());

  it('walks in cursor mode from the first request and resumes from a saved cursor', async () => {
    srv = await startRateLimitedServer();
    srv.setQueue(Array.from({ length: 25 }, (_, i) => loan(i)));
    const client = clientFor(srv, { pageSize: 10 });
    const pages = [];
    for await (const p of client.boardingQueue()) pages.push(p);
    expect(pages.map((p) => p.items.length)).toEqual([10, 10, 5]);
    expect(pages[0]!.cursor).toBeNull();
    expect(pages[2]!.nextCursor).toBeNull();
    expect(pages[2]!.hasMore).toBe(false);
    // The first request already asks for cursor mode.
    expect(srv.requests[0]!.query).toMatchObject({ cursor: '', limit: '10' });

    const saved = pages[0]!.nextCursor;
    expect(typeof saved).toBe('string');
    const resumed = [];
    for await (const p of client.boardingQueue({ cursor: saved })) resumed.push(...p.items.map((i) => i.id));
    await client.close();
    expect(resumed).toEqual(Array.from({ length: 15 }, (_, i) => `L${i + 10}`));
  });

  it('falls back to offset when the server answers in offset mode, and resumes from that position', async () => {
    srv = await startRateLimitedServer();
    srv.setQueue(
      Array.from({ length: 12 }, (_, i) => loan(i)),
      { mode: 'offset' },
    );
    const client = clientFor(srv, { pageSize: 5 });
    const pages = [];
    for await (const p of client.boardingQueue()) pages.push(p);
    expect(pages.flatMap((p) => p.items.map((i) => i.id))).toEqual(
      Array.from({ length: 12 }, (_, i) => `L${i}`),
    );
    expect(pages[0]!.nextCursor).toBe(`${OFFSET_CURSOR_PREFIX}5`);
    const resumed = [];
    for await (const p of client.boardingQueue({ cursor: pages[1]!.nextCursor }))
      resumed.push(...p.items.map((i) => i.id));
    await client.close();
    expect(resumed).toEqual(['L10', 'L11']);
    expect(srv.requests.at(-1)!.query).toMatchObject({ offset: '10' });
  });

  it('reports a malformed item per item and keeps the rest of the page', async () => {
    srv = await startRateLimitedServer();
    srv.setQueue([loan(1), { id: 'BAD', centsAmount: 'lots' }, { loanNumber: 'no-id' }, loan(2)]);
    const client = clientFor(srv);
    const pages = [];
    for await (const p of client.boardingQueue()) pages.push(p);
    await client.close();
    expect(pages).toHaveLength(1);
    expect(pages[0]!.items.map((i) => i.id)).toEqual(['L1', 'L2']);
    expect(pages[0]!.invalid.map((i) => ({ id: i.id, index: i.index }))).toEqual([
      { id: 'BAD', index: 1 },
      { id: null, index: 2 },
    ]);
    expect(pages[0]!.invalid[0]!.problems.join(' ')).toContain('centsAmount');
  });

  it('asks for boarded loans since a date for reconciliation', async () => {
    srv = await startRateLimitedServer();
    srv.setQueue([loan(1)]);
    const client = clientFor(srv);
    for await (const _ of client.boardingQueue({ boarded: true, boardedSince: '2026-01-01T00:00:00Z' })) {
      /* drain */
    }
    await client.close();
    expect(srv.requests[0]!.query).toMatchObject({
      boarded: 'true',
      boardedSince: '2026-01-01T00:00:00Z',
      cursor: '',
    });
  });

  it('a page that does not match the documented shape is response.invalid naming the field', async () => {
    srv = await startRateLimitedServer();
    srv.route('GET', '/public/v1/loans/boarding-queue', () => ({
      body: { data: [], meta: { mode: 'cursor', limit: 10 } },
    }));
    const client = clientFor(srv);
    const err = await (async () => {
      for await (const _ of client.boardingQueue()) {
        /* drain */
      }
    })().catch((e: unknown) => e);
    await client.close();
    expect(isPlatformError(err) && err.code).toBe('response.invalid');
    expect((err as Error).message).toContain('meta');
  });

  it('a Deprecation header is counted and warned once per path', async () => {
    srv = await startRateLimitedServer();
    srv.route('GET', '/public/v1/products', () => ({
      body: { data: [] },
      headers: { deprecation: 'true', sunset: 'Wed, 01 Jul 2026 00:00:00 GMT' },
    }));
    const client = clientFor(srv);
    await client.listProducts();
    await client.listProducts();
    await client.close();
    expect(client.stats().deprecations).toBe(2);
  });

  it('follows pagination of the document list so no document is missed', async () => {
    srv = await startRateLimitedServer();
    const docs = Array.from({ length: 5 }, (_, i) => ({ id: `D${i}`, name: `doc ${i}.pdf` }));
    srv.route('GET', '/public/v1/loans/{id}/documents', (req) => {
      const start = req.query['cursor'] ? Number(req.query['cursor']) : 0;
      const next = start + 2 < docs.length ? String(start + 2) : null;
      return {
        body: {
          data: docs.slice(start, start + 2),
          meta: { mode: 'cursor', limit: 2, hasMore: next !== null, nextCursor: next },
        },
      };
    });
    const client = clientFor(srv);
    const list = await client.listDocuments('L1');
    await client.close();
    expect(list.map((d) => d.id)).toEqual(['D0', 'D1', 'D2', 'D3', 'D4']);
  });
});
