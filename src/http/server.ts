import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { RequestListener } from 'node:http';
import { FatalError } from '../lib/errors.js';

/** Limits of a listener that faces the network (the webhook receiver). */
export interface ListenerLimits {
  maxConnections: number;
  maxConnectionsPerClient: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
}

export function receiverLimits(c: ListenerLimits): ListenerLimits {
  return {
    maxConnections: c.maxConnections,
    maxConnectionsPerClient: c.maxConnectionsPerClient,
    headersTimeoutMs: c.headersTimeoutMs,
    requestTimeoutMs: c.requestTimeoutMs,
    keepAliveTimeoutMs: c.keepAliveTimeoutMs,
  };
}

export interface RunningServer {
  /** e.g. http://127.0.0.1:8080 (the bound port, also when 0 was asked). */
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  /** Stops accepting, lets in-flight requests finish for up to graceMs, then drops connections. */
  close(graceMs?: number): Promise<void>;
}

/** The config keys a listener's address comes from, named in its listen errors. */
export interface ListenerKeys {
  host: string;
  port: string;
}

/**
 * A listen error in the operator's terms: the config key to change, the address and what the
 * system said (regression, issue 42: `listen EADDRINUSE … 127.0.0.1:18600` named no key).
 */
export function listenErrorMessage(err: unknown, host: string, port: number, keys: ListenerKeys): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const at = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch (code) {
    case 'EADDRINUSE':
      return (
        `${keys.port}: cannot listen on ${at}: the port is in use by another process (EADDRINUSE); ` +
        `change ${keys.port} or stop the process that holds it`
      );
    case 'EACCES':
    case 'EPERM':
      return (
        `${keys.port}: cannot listen on ${at}: permission denied (${code}); ports below 1024 need ` +
        `privileges: pick a port ≥ 1024 in ${keys.port}`
      );
    case 'EADDRNOTAVAIL':
      return (
        `${keys.host}: cannot listen on ${at}: ${host} is not an address of this machine (EADDRNOTAVAIL); ` +
        `change ${keys.host} (127.0.0.1, 0.0.0.0 or one of this host's addresses)`
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return (
        `${keys.host}: cannot listen on ${at}: the host name ${host} does not resolve (${code}); ` +
        `change ${keys.host}`
      );
    default:
      return `${keys.host}/${keys.port}: cannot listen on ${at}: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/**
 * Listens with the app on host:port (port 0 = any free port) and resolves once bound. With `keys`,
 * a listen error is a FatalError that names the config keys of the address.
 */
export async function startHttpServer(
  app: RequestListener,
  host: string,
  port: number,
  limits?: ListenerLimits,
  keys?: ListenerKeys,
): Promise<RunningServer> {
  // Node checks the header and request timeouts only every connectionsCheckingInterval (30 s by
  // default): slow clients then lived 54–84 s. Deliveries are small, so the receiver gives a
  // client seconds, checked every second.
  const server = createServer(
    limits === undefined
      ? {}
      : {
          connectionsCheckingInterval: 1_000,
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
        },
    app,
  );
  if (limits === undefined) {
    // The ops listener: a little above common proxy idle timeouts, so the proxy closes first.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    server.requestTimeout = 30_000;
  } else {
    // The receiver: an idle connection is closed after a few seconds, so a client cannot hold its
    // maxConnectionsPerClient slots with one cheap request each (was 65 s).
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    capConnections(server, limits);
  }
  await new Promise<void>((resolveListen, reject) => {
    const failed = (err: Error): void => {
      reject(
        keys === undefined ? err : new FatalError(listenErrorMessage(err, host, port, keys), { cause: err }),
      );
    };
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolveListen();
    });
  });
  const addr = server.address() as AddressInfo;
  const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shownHost}:${addr.port}`,
    port: addr.port,
    server,
    close(graceMs = 5_000) {
      return new Promise<void>((resolveClose) => {
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolveClose();
        });
        server.closeIdleConnections();
      });
    },
  };
}

/**
 * A cap on open connections, in all and per client address: a few hundred slow sockets from one
 * address cannot take every connection, so /healthz and the platform's deliveries still get in.
 */
function capConnections(server: Server, limits: ListenerLimits): void {
  server.maxConnections = limits.maxConnections;
  const perClient = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const addr = socket.remoteAddress ?? 'unknown';
    const n = (perClient.get(addr) ?? 0) + 1;
    if (n > limits.maxConnectionsPerClient) {
      socket.destroy();
      return;
    }
    perClient.set(addr, n);
    socket.once('close', () => {
      const left = (perClient.get(addr) ?? 1) - 1;
      if (left <= 0) perClient.delete(addr);
      else perClient.set(addr, left);
    });
  });
}
