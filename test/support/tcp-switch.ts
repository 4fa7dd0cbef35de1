/**
 * A TCP port the test switches on and off in front of a server (the test PostgreSQL listens on a
 * unix socket only): on, each connection is piped to the target; off, new connections are reset at
 * once and the open ones are cut, as when the database host goes away.
 */
import net from 'node:net';

export interface TcpSwitch {
  /** The local port, on 127.0.0.1. */
  port: number;
  on(): void;
  /** Stops forwarding and cuts every open connection. */
  off(): void;
  /** Connections accepted so far (forwarded or refused). */
  accepted(): number;
  close(): Promise<void>;
}

export async function startTcpSwitch(
  target: { path: string } | { host: string; port: number },
  initially: 'on' | 'off' = 'off',
): Promise<TcpSwitch> {
  let forwarding = initially === 'on';
  let accepted = 0;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    accepted += 1;
    if (!forwarding) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target);
    open.add(client);
    open.add(upstream);
    const drop = (): void => {
      open.delete(client);
      open.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    on: () => {
      forwarding = true;
    },
    off: () => {
      forwarding = false;
      for (const s of open) s.destroy();
      open.clear();
    },
    accepted: () => accepted,
    close: async () => {
      forwarding = false;
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A free TCP port on 127.0.0.1 (for a listener that must keep its port across a restart). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
