/**
 * Issue 43 F6: a core (or a proxy's error page in front of it) streaming 400 MiB took the Mambu
 * client from 66 to 880 MiB RSS, Fineract 60 → 669 MiB. Every core answer now has a cap
 * (core.http.maxResponseBytes, core.mambu.maxResponseBytes): reading stops there, the connection is
 * dropped, and the error names the key. The server below would stream 400 MiB; it counts what it
 * could send before the client hung up.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FineractHttp } from '../../../src/core/fineract/http.js';
import { MambuHttp } from '../../../src/core/mambu/http.js';
import { CoreUnavailableError } from '../../../src/core/port.js';

const TOTAL = 400 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 'x');

interface Flood {
  url: string;
  sent(): number;
  closed: Promise<void>;
  server: Server;
}

/** A server answering every request with a 400 MiB body (status given), written as fast as the client reads. */
async function flood(status: number): Promise<Flood> {
  let sent = 0;
  let onClosed: () => void = () => undefined;
  const closed = new Promise<void>((r) => (onClosed = r));
  const server = createServer((req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(TOTAL) });
    const write = (): void => {
      while (sent < TOTAL) {
        sent += CHUNK.length;
        if (!res.write(CHUNK)) {
          res.once('drain', write);
          return;
        }
      }
      res.end();
    };
    res.on('close', onClosed);
    write();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, sent: () => sent, closed, server };
}

let servers: Server[] = [];
afterEach(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  servers = [];
});

describe('core answers have a size cap (issue 43 F6)', () => {
  it('Fineract: a 400 MiB answer stops at core.http.maxResponseBytes, memory stays flat, the key is named', async () => {
    const f = await flood(200);
    servers.push(f.server);
    const http = new FineractHttp({
      baseUrl: `${f.url}/fineract-provider/api/v1`,
      username: 'u',
      password: 'p',
      tenantId: 'default',
      timeoutMs: 30_000,
      insecureTls: false,
      maxResponseBytes: 4 * 1024 * 1024,
    });
    const before = process.memoryUsage().rss;
    const err = await http.get('/clients/1').then(
      () => null,
      (e: unknown) => e,
    );
    await f.closed;
    const grew = process.memoryUsage().rss - before;
    await http.close();
    expect(err).toBeInstanceOf(CoreUnavailableError);
    expect((err as Error).message).toMatch(/larger than 4194304 bytes \(core\.http\.maxResponseBytes\)/);
    // The server could push no more than the cap plus what sat in socket buffers when the client hung up.
    expect(f.sent()).toBeLessThan(64 * 1024 * 1024);
    expect(grew).toBeLessThan(100 * 1024 * 1024);
  });

  it('Mambu: an error page of 400 MiB stops at the default cap (8 MiB), naming core.mambu.maxResponseBytes', async () => {
    const f = await flood(502);
    servers.push(f.server);
    const http = new MambuHttp({
      baseUrl: `${f.url}/api`,
      auth: { apiKey: 'k' },
      timeoutMs: 30_000,
      insecureTls: false,
    });
    const err = await http.get('/clients/1').then(
      () => null,
      (e: unknown) => e,
    );
    await f.closed;
    expect(err).toBeInstanceOf(CoreUnavailableError);
    expect((err as Error).message).toMatch(/larger than 8388608 bytes \(core\.mambu\.maxResponseBytes\)/);
    expect(f.sent()).toBeLessThan(64 * 1024 * 1024);
  });
});
