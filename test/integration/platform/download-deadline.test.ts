import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/lib/logger.js';
import { downloadPresigned } from '../../../src/platform/download.js';
import { documentHostGuard } from '../../../src/platform/download-guard.js';
import { isPlatformError } from '../../../src/platform/errors.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

// These tests serve documents from 127.0.0.1: allow-listed, as a bank with an internal store would.
const guard = documentHostGuard({ allow: ['127.0.0.1'], allowLoopback: false });
const nullSink = (): Writable => new Writable({ write: (_c, _e, cb) => cb() });

describe('presigned downloads: overall deadline and https in production', () => {
  it('a host dripping one byte at a time is cut at the deadline (regression: the idle timeout never fired)', async () => {
    let hits = 0;
    const srv = createServer((_req, res) => {
      hits += 1;
      res.writeHead(200, { 'content-length': '10000', 'content-type': 'application/pdf' });
      const t = setInterval(() => res.write('x'), 50);
      res.on('close', () => clearInterval(t));
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const { port } = srv.address() as AddressInfo;
    const agent = new Agent({ bodyTimeout: 5_000, headersTimeout: 5_000, connect: { lookup: guard.lookup } });
    const started = Date.now();
    const err = await downloadPresigned(
      { dispatcher: agent, guard, logger: silentLogger(), userAgent: 't' },
      `http://127.0.0.1:${port}/blob?X-Signature=s`,
      nullSink(),
      { maxBytes: 1_000_000, deadlineMs: 600 },
    ).catch((e: unknown) => e);
    await agent.close();
    expect(isPlatformError(err) && err.code).toBe('download.failed');
    expect((err as Error).message).toMatch(/did not finish within 600 ms/);
    expect((err as Error).message).not.toContain('X-Signature');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(hits).toBe(1);
  });

  it('with httpsOnly (production) a plain-http address is refused before any request', async () => {
    let hits = 0;
    const srv = createServer((_req, res) => {
      hits += 1;
      res.end('x');
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const { port } = srv.address() as AddressInfo;
    const agent = new Agent();
    const err = await downloadPresigned(
      { dispatcher: agent, guard, logger: silentLogger(), userAgent: 't', httpsOnly: true },
      `http://127.0.0.1:${port}/blob?sig=1`,
      nullSink(),
      { maxBytes: 10 },
    ).catch((e: unknown) => e);
    await agent.close();
    expect((err as Error).message).toMatch(/is not https; refused with platform.environment: production/);
    expect(hits).toBe(0);
  });
});
