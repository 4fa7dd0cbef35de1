import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SandboxState } from './state.js';

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
  ) {}

  async listen(): Promise<void> {
    const server = createServer((req, res) => this.handle(req.url ?? '/', req.headers.authorization !== undefined, req.method ?? 'GET', res));
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
    return { url: `${this.origin}/blobs/${encodeURIComponent(documentId)}?expires=${expires}&signature=${sig}`, expiresAt: new Date(expires).toISOString() };
  }

  private signature(documentId: string, expires: number): string {
    return createHmac('sha256', this.secret).update(`${documentId}.${expires}`).digest('base64url');
  }

  private handle(rawUrl: string, hasAuthorization: boolean, method: string, res: ServerResponse): void {
    const counters = this.state.counters;
    const refuse = (status: number, code: string, message: string): void => {
      counters.downloadsRejected += 1;
      res.writeHead(status, { 'content-type': 'application/xml' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`);
    };
    if (hasAuthorization) {
      counters.downloadsWithAuthorization += 1;
      refuse(403, 'InvalidArgument', 'Only one auth mechanism allowed; a presigned URL must not carry an Authorization header');
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
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return refuse(403, 'SignatureDoesNotMatch', 'bad signature');
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
