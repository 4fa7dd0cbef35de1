import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { RequestListener } from 'node:http';

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

/** Listens with the app on host:port (port 0 = any free port) and resolves once bound. */
export async function startHttpServer(
  app: RequestListener,
  host: string,
  port: number,
  limits?: ListenerLimits,
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
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
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
