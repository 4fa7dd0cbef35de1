import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestListener } from 'node:http';
import { withFastPath } from './receiver.js';

export interface RunningServer {
  /** e.g. http://127.0.0.1:8080 (the bound port, also when 0 was asked). */
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  /** Stops accepting, lets in-flight requests finish for up to graceMs, then drops connections. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Listens with the app on host:port (port 0 = any free port) and resolves once bound. An app made
 * by `createApp` gets its webhook fast path: `POST /webhooks/platform` goes straight to the lean
 * receiver without entering Express's router (see receiver.ts); everything else goes to the app.
 */
export async function startHttpServer(app: RequestListener, host: string, port: number): Promise<RunningServer> {
  const server = createServer(withFastPath(app));
  // A little above common proxy idle timeouts, so the proxy closes first.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 30_000;
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
