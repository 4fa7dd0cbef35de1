import { systemClock } from '../../../src/lib/clock.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import {
  createPlatformClient,
  type PlatformClient,
  type PlatformClientOptions,
} from '../../../src/platform/client.js';
import { platformClientFromConfig } from '../../../src/app/platform.js';
import { isPlatformError, platformDisposition } from '../../../src/platform/errors.js';

const servers: Server[] = [];
const clients: PlatformClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

const nullSink = (): Writable => new Writable({ write: (_c, _e, cb) => cb() });

/** A document host on 127.0.0.1 that counts what reaches it. */
async function documentHost(): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const srv = createServer((_req, res) => {
    hits += 1;
    res.writeHead(200, { 'content-type': 'application/pdf' });
    res.end('%PDF-1.4 test');
  });
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { port: (srv.address() as AddressInfo).port, hits: () => hits };
}

function client(documentHosts?: PlatformClientOptions['documentHosts'], logs?: string[]): PlatformClient {
  const c = createPlatformClient({
    clock: systemClock,
    baseUrl: 'http://127.0.0.1:9/api',
    apiKey: 'pk_test_guard',
    rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 60_000, headroom: 0.9 },
    timeouts: { connectMs: 2_000, headersMs: 5_000, bodyMs: 5_000 },
    maxRetries: 0,
    pageSize: 10,
    logger: logs
      ? createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(s) } })
      : silentLogger(),
    ...(documentHosts ? { documentHosts } : {}),
  });
  clients.push(c);
  return c;
}

const resolveTo = (...addresses: string[]) => {
  const calls: string[] = [];
  const resolve = (host: string) => {
    calls.push(host);
    return Promise.resolve(addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  };
  return Object.assign(resolve, { calls });
};

async function refusal(c: PlatformClient, url: string): Promise<Error> {
  const err = await c.download(url, nullSink(), { maxBytes: 1000 }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(isPlatformError(err) ? err.code : err).toBe('download.refused');
  return err as Error;
}

describe('document downloads only reach public addresses (regression: a presigned URL naming 127.0.0.1 was fetched)', () => {
  it('a loopback literal is refused before any request, naming the allow-list key and not the query', async () => {
    const host = await documentHost();
    const logs: string[] = [];
    const err = await refusal(
      client(undefined, logs),
      `http://127.0.0.1:${host.port}/blob?X-Amz-Signature=secretsig`,
    );
    expect(err.message).toMatch(/127\.0\.0\.1 is a loopback address.*boarding\.documentHosts\.allow/);
    expect(err.message).not.toContain('secretsig');
    expect(logs.join('')).not.toContain('secretsig');
    expect(host.hits()).toBe(0);
    // Nothing a retry changes: a person looks at it.
    expect(platformDisposition('download.refused')).toBe('quarantine');
  });

  it.each([
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['fd00:ec2::254', 'uniqueLocal'],
    ['64:ff9b::7f00:1', 'rfc6052'],
    ['198.18.0.1', 'reserved'],
  ])('a name resolving to %s is refused after DNS resolution (%s)', async (address, range) => {
    const host = await documentHost();
    const resolve = resolveTo(address);
    const err = await refusal(client({ resolve }), `http://blob.platform.example:${host.port}/doc?sig=1`);
    expect(err.message).toContain(`blob.platform.example resolves to ${address}`);
    expect(err.message).toContain(range);
    expect(resolve.calls).toEqual(['blob.platform.example']);
    expect(host.hits()).toBe(0);
  });

  it('a name with one public and one internal address is refused (the socket may try either)', async () => {
    const resolve = resolveTo('93.184.215.14', '127.0.0.1');
    await refusal(client({ resolve }), 'https://blob.platform.example/doc?sig=1');
  });

  it('names that are never public are refused without a lookup', async () => {
    const resolve = resolveTo('93.184.215.14');
    for (const h of ['localhost', 'metadata.google.internal', 'store.bank.internal'])
      await refusal(client({ resolve }), `https://${h}/doc`);
    expect(resolve.calls).toEqual([]);
  });

  it('the allow-list lets an internal document store through: by CIDR, address or host name', async () => {
    const host = await documentHost();
    for (const allow of [['127.0.0.0/8'], ['127.0.0.1'], ['docs.bank.internal'], ['*.bank.internal']]) {
      const c = client({ allow, resolve: resolveTo('127.0.0.1') });
      const url = allow[0]!.includes('bank')
        ? `http://docs.bank.internal:${host.port}/doc?sig=1`
        : `http://127.0.0.1:${host.port}/doc?sig=1`;
      await expect(c.download(url, nullSink(), { maxBytes: 1000 }), allow.join()).resolves.toMatchObject({
        bytes: 13,
      });
    }
    expect(host.hits()).toBe(4);
    // An allowed range does not open the others.
    await refusal(client({ allow: ['10.0.0.0/8'] }), `http://127.0.0.1:${host.port}/doc`);
  });

  it('DNS rebinding cannot bypass the check: the socket connects to the address that was checked', async () => {
    const host = await documentHost();
    // The first answer is allowed (127.0.0.2, where nothing listens), later ones point at the
    // document host on 127.0.0.1. A check-then-connect design would connect to 127.0.0.1.
    let n = 0;
    const calls: string[] = [];
    const resolve = (h: string) => {
      calls.push(h);
      n += 1;
      return Promise.resolve([{ address: n === 1 ? '127.0.0.2' : '127.0.0.1', family: 4 }]);
    };
    const c = client({ allow: ['127.0.0.2/32'], resolve });
    const err = await c
      .download(`http://rebind.example:${host.port}/doc`, nullSink(), { maxBytes: 1000 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(isPlatformError(err) && err.code).toBe('network');
    expect(calls).toEqual(['rebind.example']);
    expect(host.hits()).toBe(0);
    // And the next resolution (127.0.0.1, not allowed) is refused.
    await refusal(c, `http://rebind.example:${host.port}/doc`);
    expect(host.hits()).toBe(0);
  });

  it('from config: staging and production refuse loopback unless allow-listed; development (the sandbox) allows loopback only', async () => {
    const host = await documentHost();
    const url = `http://127.0.0.1:${host.port}/doc?sig=1`;
    const cfg = (environment: string, extra = '') =>
      loadConfig({
        env: {},
        fileText: `platform:\n  baseUrl: http://127.0.0.1:9/api\n  apiKey: pk_test_x\n  environment: ${environment}\n${extra}`,
      });
    const fromConfig = (c: ReturnType<typeof cfg>) => {
      const p = platformClientFromConfig(c, { clock: systemClock, logger: silentLogger() });
      clients.push(p);
      return p;
    };
    await refusal(fromConfig(cfg('staging')), url);
    await expect(
      fromConfig(cfg('staging', 'boarding:\n  documentHosts:\n    allow: [127.0.0.1/32]\n')).download(
        url,
        nullSink(),
        { maxBytes: 1000 },
      ),
    ).resolves.toMatchObject({ bytes: 13 });
    await expect(
      fromConfig(cfg('development')).download(url, nullSink(), { maxBytes: 1000 }),
    ).resolves.toMatchObject({ bytes: 13 });
    // Development still refuses private and metadata addresses.
    await refusal(fromConfig(cfg('development')), 'http://169.254.169.254/latest/meta-data');
    await refusal(fromConfig(cfg('development')), 'http://10.0.0.8/doc');
    expect(() =>
      cfg('staging', 'boarding:\n  documentHosts:\n    allow: ["10.0.0.0/33", "bad host!"]\n'),
    ).toThrow(
      /boarding\.documentHosts\.allow\.0: expected a host name.*\n.*boarding\.documentHosts\.allow\.1/,
    );
  });
});
