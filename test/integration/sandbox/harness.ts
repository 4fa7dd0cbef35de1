import { startSandbox, type RunningSandbox, type SandboxOptions } from '../../../src/sandbox/index.js';

/** Untyped JSON as tests read it (the sandbox's shapes are asserted, not assumed). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type J = any;

export interface Reply {
  status: number;
  headers: Headers;
  body: J;
}

export interface Harness {
  sb: RunningSandbox;
  /** Calls the public API; path starts with /public/... */
  api(
    path: string,
    init?: { method?: string; body?: unknown; key?: string | null; headers?: Record<string, string> },
  ): Promise<Reply>;
  admin(path: string, method?: string, body?: unknown): Promise<J>;
  close(): Promise<void>;
}

export async function startHarness(opts: SandboxOptions = {}): Promise<Harness> {
  const sb = await startSandbox({
    amounts: 'extreme',
    loans: 20,
    windowMs: 60_000,
    readsPerWindow: 10_000,
    writesPerWindow: 10_000,
    legacyPerWindow: 10_000,
    ...opts,
  });
  return {
    sb,
    async api(path, init = {}) {
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      const key = init.key === undefined ? sb.apiKey : init.key;
      if (key !== null) headers['authorization'] = `Bearer ${key}`;
      let body: string | undefined;
      if (init.body !== undefined) {
        headers['content-type'] = 'application/json';
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      }
      const res = await fetch(`${sb.baseUrl}${path}`, {
        method: init.method ?? 'GET',
        headers,
        ...(body !== undefined ? { body } : {}),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
    },
    async admin(path, method = 'GET', body) {
      const res = await fetch(`${sb.adminUrl}${path}`, {
        method,
        headers: body !== undefined ? { 'content-type': 'application/json' } : {},
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const json = await res.json();
      if (res.status >= 400)
        throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    close: () => sb.close(),
  };
}
