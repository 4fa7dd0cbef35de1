import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FaultInjector } from './faults.js';
import type { SandboxState } from './state.js';

/** Route key of presigned downloads in counters and fault rules. */
export const BLOB_ROUTE = 'GET /blobs/:id';

export const DOWNLOAD_TTL_MS = 5 * 60_000;

/**
 * Presigned downloads on their own port, like an object store: the signature in the query is
 * the only credential, and a request carrying an Authorization header is refused (real stores
 * reject a second auth mechanism) and counted, so tests can prove the client never sends the key.
 */
export class BlobServer {
  private server: Server | null = null;
  private origin = '';
  private readonly secret = randomBytes(32);

  constructor(
    private readonly state: SandboxState,
    private readonly host: string,
    private readonly faults: FaultInjector,
  ) {}

  async listen(): Promise<void> {
    const server = createServer((req, res) => {
      const counters = this.state.counters;
      counters.requests[BLOB_ROUTE] = (counters.requests[BLOB_ROUTE] ?? 0) + 1;
      const fault = this.faults.decide(BLOB_ROUTE);
      const run = (): void => {
        if (fault.action === 'reset') {
          counters.faults.resets += 1;
          req.socket.destroy();
          return;
        }
        if (fault.action === '5xx') {
          counters.faults.injected5xx += 1;
          res
            .writeHead(503, { 'content-type': 'application/xml' })
            .end(
              '<?xml version="1.0" encoding="UTF-8"?>' +
                '<Error><Code>SlowDown</Code><Message>injected fault</Message></Error>',
            );
          return;
        }
        // resetAfterCommit on a download: headers and half the body are sent, then the socket drops.
        const truncate = fault.action === 'resetAfterCommit';
        if (truncate) counters.faults.resetsAfterCommit += 1;
        this.handle(
          req.url ?? '/',
          req.headers.authorization !== undefined,
          req.method ?? 'GET',
          res,
          truncate,
          () => req.socket.destroy(),
        );
      };
      if (fault.latencyMs > 0) {
        counters.faults.delayed += 1;
        setTimeout(run, fault.latencyMs);
      } else run();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, this.host, () => resolve());
    });
    const addr = server.address() as AddressInfo;
    this.origin = `http://${this.host.includes(':') ? `[${this.host}]` : this.host}:${addr.port}`;
    this.server = server;
  }

  get baseUrl(): string {
    return this.origin;
  }

  sign(documentId: string): { url: string; expiresAt: string } {
    const expires = this.state.nowMs() + DOWNLOAD_TTL_MS;
    const sig = this.signature(documentId, expires);
    return {
      url: `${this.origin}/blobs/${encodeURIComponent(documentId)}?expires=${expires}&signature=${sig}`,
      expiresAt: new Date(expires).toISOString(),
    };
  }

  private signature(documentId: string, expires: number): string {
    return createHmac('sha256', this.secret).update(`${documentId}.${expires}`).digest('base64url');
  }

  private handle(
    rawUrl: string,
    hasAuthorization: boolean,
    method: string,
    res: ServerResponse,
    truncate: boolean,
    drop: () => void,
  ): void {
    const counters = this.state.counters;
    const refuse = (status: number, code: string, message: string): void => {
      counters.downloadsRejected += 1;
      res.writeHead(status, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`,
      );
    };
    if (hasAuthorization) {
      counters.downloadsWithAuthorization += 1;
      refuse(
        403,
        'InvalidArgument',
        'Only one auth mechanism allowed; a presigned URL must not carry an Authorization header',
      );
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') return refuse(405, 'MethodNotAllowed', 'use GET');
    const url = new URL(rawUrl, 'http://blob.invalid');
    const m = /^\/blobs\/([^/]+)$/.exec(url.pathname);
    const expires = Number(url.searchParams.get('expires'));
    const sig = url.searchParams.get('signature') ?? '';
    if (!m?.[1] || !Number.isFinite(expires)) return refuse(403, 'AccessDenied', 'missing signature');
    const documentId = decodeURIComponent(m[1]);
    const expected = Buffer.from(this.signature(documentId, expires));
    const given = Buffer.from(sig);
    if (expected.length !== given.length || !timingSafeEqual(expected, given))
      return refuse(403, 'SignatureDoesNotMatch', 'bad signature');
    if (this.state.nowMs() > expires) return refuse(403, 'AccessDenied', 'Request has expired');
    const doc = this.state.documents.get(documentId);
    if (!doc) return refuse(404, 'NoSuchKey', 'The specified key does not exist.');
    counters.downloads += 1;
    res.writeHead(200, {
      'content-type': doc.type,
      'content-length': String(doc.bytes.length),
      'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(doc.name)}`,
      etag: `"${createHmac('sha256', 'etag').update(doc.bytes).digest('hex').slice(0, 32)}"`,
    });
    if (truncate) {
      res.write(doc.bytes.subarray(0, Math.floor(doc.bytes.length / 2)), () => drop());
      return;
    }
    res.end(method === 'HEAD' ? undefined : doc.bytes);
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
