/**
 * A real local HTTP server that behaves like the Loan Platform where rate limits are concerned,
 * for integration tests and benches of anything that talks to the platform.
 *
 *   const srv = await startRateLimitedServer({ readsPerWindow: 100, writesPerWindow: 30, windowMs: 1000 });
 *   srv.baseUrl          // http://127.0.0.1:<port>/api   (port 0: never a fixed port)
 *   srv.apiKey           // the only key accepted (401 auth.invalid_key otherwise)
 *   srv.requests         // every API request: { seq, at, method, path, query, headers, bucket, status, forced }
 *   srv.forceRateLimit({ retryAfterSeconds: 2, bucket: 'read' })  // next matching request → 429;
 *                        // the bucket then answers 429 until Retry-After has passed (like a real limiter)
 *   srv.refuseAll({ bucket: 'read', retryAfterSeconds: 1, holdMs: 200 })  // EVERY matching request
 *                        // → 429 (answered after holdMs, so requests pile up in flight) until
 *   srv.stopRefusing()   // (e.g. another process spent the key, or the platform lowered its limit)
 *   srv.maxConcurrent('read')       // most requests of a bucket the server held at once
 *   srv.route('GET', '/public/v1/loans/{id}', (req) => ({ status: 200, body: { data: { id: req.params.id } } }))
 *   srv.setQueue(items, { mode: 'cursor' | 'offset' })   // boarding-queue content
 *   srv.presign('doc-1', Buffer.from('…'), { ttlMs })     // URL on a SECOND origin (blob store)
 *   srv.downloads        // every blob request: { at, path, hadAuthorization, headers, status }
 *   srv.windowCounts('read')        // requests per server window (served, not forced 429s)
 *   srv.maxInAnyWindow('read', ms)  // largest count of requests arriving in any interval of ms
 *   await srv.close()
 *
 * Limits are enforced with the server's OWN fixed windows, started `windowOffsetMs` off the
 * server's start (default: a random offset), so they never line up with a client's windows.
 * GET/HEAD count as reads; POST/PATCH/DELETE as writes. Every response to /api carries
 * X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix seconds of the window end);
 * a 429 carries Retry-After (seconds) and a body { code: 'rate_limit.exceeded', message, retryAfter }.
 * Paths are matched relative to /api; a route template uses {name} for a path segment.
 */
import { randomBytes } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

export type ServerBucket = 'read' | 'write';

export interface RecordedRequest {
  seq: number;
  /** Arrival time, epoch ms. */
  at: number;
  method: string;
  /** Path relative to /api, without query string. */
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  bucket: ServerBucket;
  status: number;
  /** true when forceRateLimit (or the pause that follows it) produced the 429. */
  forced: boolean;
}

export interface RouteRequest {
  method: string;
  path: string;
  params: Record<string, string>;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: unknown;
}

export interface RouteResponse {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Destroy the socket after reading the request (a dropped connection). */
  dropConnection?: boolean;
}

export type RouteHandler = (req: RouteRequest) => RouteResponse | Promise<RouteResponse>;

export interface DownloadRecord {
  at: number;
  path: string;
  hadAuthorization: boolean;
  headers: IncomingHttpHeaders;
  status: number;
}

export interface RateLimitedServerOptions {
  readsPerWindow?: number;
  writesPerWindow?: number;
  windowMs?: number;
  /** Where the server's fixed windows start relative to its own start. Default: random. */
  windowOffsetMs?: number;
  apiKey?: string;
}

export interface RateLimitedServer {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly blobOrigin: string;
  readonly requests: RecordedRequest[];
  readonly downloads: DownloadRecord[];
  readonly limits: { read: number; write: number; windowMs: number };
  forceRateLimit(opts?: {
    retryAfterSeconds?: number;
    bucket?: ServerBucket;
    count?: number;
    bodyRetryAfter?: number;
    /** The 429's status line and headers go at once, its body this much later (a slow body). */
    bodyDelayMs?: number;
  }): void;
  /** Every request (of `bucket`, or all) answers 429 until stopRefusing(); the answer waits holdMs. */
  refuseAll(opts?: { retryAfterSeconds?: number; bucket?: ServerBucket; holdMs?: number }): void;
  stopRefusing(): void;
  /** Most API requests of this bucket the server had open (received, not yet answered) at once. */
  maxConcurrent(bucket: ServerBucket): number;
  route(method: string, template: string, handler: RouteHandler): void;
  setQueue(items: unknown[], opts?: { mode?: 'cursor' | 'offset' }): void;
  presign(name: string, content: Buffer, opts?: { ttlMs?: number; omitContentLength?: boolean }): string;
  windowCounts(bucket: ServerBucket): Map<number, number>;
  maxInAnyWindow(bucket: ServerBucket, windowMs?: number): number;
  /** 429s the server produced on its own (limit exceeded), not forced ones. */
  organic429s(): number;
  close(): Promise<void>;
}

interface Route {
  method: string;
  re: RegExp;
  names: string[];
  handler: RouteHandler;
}

function compile(template: string): { re: RegExp; names: string[] } {
  const names: string[] = [];
  const src = template
    .split('/')
    .map((seg) => {
      const m = /^\{(\w+)\}$/.exec(seg);
      if (m) {
        names.push(m[1]!);
        return '([^/]+)';
      }
      return seg.replace(/[.*+?^$()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return { re: new RegExp(`^${src}$`), names };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

export async function startRateLimitedServer(
  opts: RateLimitedServerOptions = {},
): Promise<RateLimitedServer> {
  const limits = {
    read: opts.readsPerWindow ?? 100,
    write: opts.writesPerWindow ?? 30,
    windowMs: opts.windowMs ?? 1000,
  };
  const apiKey = opts.apiKey ?? `pk_test_${randomBytes(12).toString('hex')}`;
  const startedAt = Date.now();
  const offset = opts.windowOffsetMs ?? Math.floor(Math.random() * limits.windowMs);
  const epoch = startedAt - offset;
  const windowOf = (t: number): number => Math.floor((t - epoch) / limits.windowMs);
  const windowEnd = (w: number): number => epoch + (w + 1) * limits.windowMs;

  const used: Record<ServerBucket, Map<number, number>> = { read: new Map(), write: new Map() };
  const blockedUntil: Record<ServerBucket, number> = { read: 0, write: 0 };
  let refusing: { bucket: ServerBucket | undefined; retryAfterSeconds: number; holdMs: number } | null = null;
  const open: Record<ServerBucket, number> = { read: 0, write: 0 };
  const maxOpen: Record<ServerBucket, number> = { read: 0, write: 0 };
  const forced: Array<{
    bucket: ServerBucket | undefined;
    retryAfterSeconds: number;
    bodyRetryAfter: number | undefined;
    bodyDelayMs?: number | undefined;
  }> = [];
  const requests: RecordedRequest[] = [];
  const downloads: DownloadRecord[] = [];
  const routes: Route[] = [];
  let queue: unknown[] = [];
  let queueMode: 'cursor' | 'offset' = 'cursor';
  const blobs = new Map<
    string,
    { content: Buffer; signature: string; expiresAt: number; omitContentLength: boolean }
  >();
  let seq = 0;
  let organic = 0;
  let blobOrigin = '';

  const send = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ): void => {
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  };

  const defaultRoutes: Array<[string, string, RouteHandler]> = [
    [
      'GET',
      '/public/v1/loans/boarding-queue',
      (req) => {
        const limit = Math.min(100, Math.max(1, Number(req.query['limit'] ?? 50)));
        const cursorMode = queueMode === 'cursor' && req.query['cursor'] !== undefined;
        if (cursorMode) {
          const c = req.query['cursor'] ?? '';
          const start =
            c === '' ? 0 : Number(Buffer.from(c, 'base64url').toString('utf8').replace(/^pos:/, ''));
          if (!Number.isInteger(start) || start < 0)
            return { status: 400, body: { code: 'input.invalid', message: 'invalid cursor' } };
          const data = queue.slice(start, start + limit);
          const hasMore = start + limit < queue.length;
          const nextCursor = hasMore ? Buffer.from(`pos:${start + limit}`).toString('base64url') : null;
          return { body: { data, meta: { mode: 'cursor', limit, hasMore, nextCursor } } };
        }
        const off = Number(req.query['offset'] ?? 0);
        const data = queue.slice(off, off + limit);
        return {
          body: { data, meta: { mode: 'offset', limit, offset: off, hasMore: off + limit < queue.length } },
        };
      },
    ],
    [
      'GET',
      '/public/v1/loans/{id}',
      (req) => ({
        body: {
          data: {
            id: req.params['id'],
            loanNumber: `LN-${req.params['id']}`,
            status: 'funded',
            centsAmount: 100_000_00,
          },
        },
      }),
    ],
    [
      'POST',
      '/public/v1/loans/{id}/boarding',
      (req) => ({ body: { data: { loanId: req.params['id'], boarded: true } } }),
    ],
    [
      'POST',
      '/public/v1/loans/search',
      () => ({ body: { data: [], meta: { mode: 'offset', limit: 50, offset: 0, hasMore: false } } }),
    ],
    ['GET', '/public/v1/products', () => ({ body: { data: [{ id: 'p1', name: 'Term loan' }] } })],
    [
      'GET',
      '/public/v1/documents/{id}/download',
      (req) => {
        const id = req.params['id'] ?? '';
        if (!blobs.has(id))
          return { status: 404, body: { code: 'not_found', message: 'document not found' } };
        const b = blobs.get(id)!;
        return {
          body: {
            data: {
              url: `${blobOrigin}/blobs/${encodeURIComponent(id)}?X-Signature=${b.signature}&X-Expires=${b.expiresAt}`,
            },
          },
        };
      },
    ],
  ];

  const api = createServer((req, res) => {
    void (async () => {
      const at = Date.now();
      const url = new URL(req.url ?? '/', 'http://x');
      const method = (req.method ?? 'GET').toUpperCase();
      const path = url.pathname.replace(/^\/api/, '');
      const query = Object.fromEntries(url.searchParams);
      const bucket: ServerBucket = method === 'GET' || method === 'HEAD' ? 'read' : 'write';
      open[bucket] += 1;
      maxOpen[bucket] = Math.max(maxOpen[bucket], open[bucket]);
      res.once('close', () => {
        open[bucket] -= 1;
      });
      const rawBody = await readBody(req);
      const record: RecordedRequest = {
        seq: ++seq,
        at,
        method,
        path,
        query,
        headers: req.headers,
        bucket,
        status: 0,
        forced: false,
      };
      requests.push(record);
      const w = windowOf(at);
      const count = used[bucket].get(w) ?? 0;
      const limit = limits[bucket];
      const reset = String(Math.ceil(windowEnd(w) / 1000));
      const rl = (remaining: number): Record<string, string> => ({
        'x-ratelimit-limit': String(limit),
        'x-ratelimit-remaining': String(Math.max(0, remaining)),
        'x-ratelimit-reset': reset,
      });
      const too = (
        retryAfterSeconds: number,
        isForced: boolean,
        bodyRetryAfter?: number,
        bodyDelayMs = 0,
      ): void => {
        record.status = 429;
        record.forced = isForced;
        const body = {
          code: 'rate_limit.exceeded',
          message: 'Too many requests',
          retryAfter: bodyRetryAfter ?? retryAfterSeconds,
        };
        const headers = { ...rl(limit - count), 'retry-after': String(retryAfterSeconds) };
        if (bodyDelayMs <= 0) {
          send(res, 429, body, headers);
          return;
        }
        const text = JSON.stringify(body);
        res.writeHead(429, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          ...headers,
        });
        res.flushHeaders();
        setTimeout(() => res.end(text), bodyDelayMs);
      };
      const r0 = refusing;
      if (r0 !== null && (r0.bucket === undefined || r0.bucket === bucket)) {
        if (r0.holdMs > 0) await new Promise((resolve) => setTimeout(resolve, r0.holdMs));
        too(r0.retryAfterSeconds, true);
        return;
      }
      // Forced 429, then the whole bucket stays refused until Retry-After has passed.
      const fi = forced.findIndex((f) => f.bucket === undefined || f.bucket === bucket);
      if (fi >= 0) {
        const f = forced.splice(fi, 1)[0]!;
        blockedUntil[bucket] = Math.max(blockedUntil[bucket], at + f.retryAfterSeconds * 1000);
        too(f.retryAfterSeconds, true, f.bodyRetryAfter, f.bodyDelayMs);
        return;
      }
      if (blockedUntil[bucket] > at) {
        too(Math.ceil((blockedUntil[bucket] - at) / 1000), true);
        return;
      }
      if (req.headers.authorization !== `Bearer ${apiKey}`) {
        record.status = 401;
        send(
          res,
          401,
          { code: 'auth.invalid_key', message: 'API key invalid or expired' },
          rl(limit - count),
        );
        return;
      }
      if (count >= limit) {
        organic += 1;
        too(Math.max(1, Math.ceil((windowEnd(w) - at) / 1000)), false);
        return;
      }
      used[bucket].set(w, count + 1);
      let body: unknown = undefined;
      if (rawBody.length > 0) {
        try {
          body = JSON.parse(rawBody) as unknown;
        } catch {
          body = rawBody;
        }
      }
      const all = [
        ...routes,
        ...defaultRoutes.map(([m, t, h]) => ({ method: m, ...compile(t), handler: h })),
      ];
      for (const r of all) {
        if (r.method !== method) continue;
        const m = r.re.exec(path);
        if (!m) continue;
        const params = Object.fromEntries(r.names.map((n, i) => [n, decodeURIComponent(m[i + 1] ?? '')]));
        const out = await r.handler({ method, path, params, query, headers: req.headers, body });
        if (out.dropConnection) {
          record.status = -1;
          req.socket.destroy();
          return;
        }
        record.status = out.status ?? 200;
        send(res, record.status, out.body, { ...rl(limit - count - 1), ...out.headers });
        return;
      }
      record.status = 404;
      send(res, 404, { code: 'not_found', message: `no route ${method} ${path}` }, rl(limit - count - 1));
    })();
  });

  const blob = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const id = decodeURIComponent(url.pathname.replace(/^\/blobs\//, ''));
    const b = blobs.get(id);
    const rec: DownloadRecord = {
      at: Date.now(),
      path: url.pathname,
      hadAuthorization: req.headers.authorization !== undefined,
      headers: req.headers,
      status: 0,
    };
    downloads.push(rec);
    if (!b) {
      rec.status = 404;
      res.writeHead(404).end('NoSuchKey');
      return;
    }
    if (url.searchParams.get('X-Signature') !== b.signature || Date.now() > b.expiresAt) {
      rec.status = 403;
      res
        .writeHead(403, { 'content-type': 'application/xml' })
        .end('<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>');
      return;
    }
    rec.status = 200;
    const headers: Record<string, string> = { 'content-type': 'application/pdf' };
    if (!b.omitContentLength) headers['content-length'] = String(b.content.length);
    res.writeHead(200, headers);
    // Several chunks, so a size cap trips mid-stream when the length is not declared.
    const step = 16 * 1024;
    for (let i = 0; i < b.content.length; i += step) res.write(b.content.subarray(i, i + step));
    res.end();
  });

  const [apiPort, blobPort] = await Promise.all([listen(api), listen(blob)]);
  blobOrigin = `http://127.0.0.1:${blobPort}`;

  return {
    baseUrl: `http://127.0.0.1:${apiPort}/api`,
    apiKey,
    blobOrigin,
    requests,
    downloads,
    limits,
    forceRateLimit(o = {}) {
      forced.push({
        bucket: o.bucket,
        retryAfterSeconds: o.retryAfterSeconds ?? 2,
        bodyRetryAfter: o.bodyRetryAfter,
        bodyDelayMs: o.bodyDelayMs,
      });
      for (let i = 1; i < (o.count ?? 1); i++)
        forced.push({
          bucket: o.bucket,
          retryAfterSeconds: o.retryAfterSeconds ?? 2,
          bodyRetryAfter: o.bodyRetryAfter,
        });
    },
    refuseAll(o = {}) {
      refusing = { bucket: o.bucket, retryAfterSeconds: o.retryAfterSeconds ?? 1, holdMs: o.holdMs ?? 0 };
    },
    stopRefusing() {
      refusing = null;
    },
    maxConcurrent(bucket) {
      return maxOpen[bucket];
    },
    route(method, template, handler) {
      routes.unshift({ method: method.toUpperCase(), ...compile(template), handler });
    },
    setQueue(items, o = {}) {
      queue = items;
      queueMode = o.mode ?? 'cursor';
    },
    presign(name, content, o = {}) {
      const signature = randomBytes(16).toString('hex');
      const expiresAt = Date.now() + (o.ttlMs ?? 5 * 60_000);
      blobs.set(name, { content, signature, expiresAt, omitContentLength: o.omitContentLength ?? false });
      return `${blobOrigin}/blobs/${encodeURIComponent(name)}?X-Signature=${signature}&X-Expires=${expiresAt}`;
    },
    windowCounts(bucket) {
      const m = new Map<number, number>();
      for (const r of requests) {
        if (r.bucket !== bucket || r.status === 429) continue;
        const w = windowOf(r.at);
        m.set(w, (m.get(w) ?? 0) + 1);
      }
      return m;
    },
    maxInAnyWindow(bucket, windowMs = limits.windowMs) {
      const times = requests
        .filter((r) => r.bucket === bucket && r.status !== 429)
        .map((r) => r.at)
        .sort((a, b) => a - b);
      let max = 0;
      let j = 0;
      for (let i = 0; i < times.length; i++) {
        while ((times[i] as number) - (times[j] as number) >= windowMs) j += 1;
        max = Math.max(max, i - j + 1);
      }
      return max;
    },
    organic429s: () => organic,
    async close() {
      await Promise.all(
        [api, blob].map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
