import type { Request } from 'express';
import type { ApiKeyRecord } from './keys.js';
import type { SandboxState } from './state.js';
import type { BlobServer } from './blob-server.js';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface RouteContext {
  req: Request;
  params: Record<string, string>;
  query: Record<string, string>;
  body: unknown;
  key: ApiKeyRecord;
  legacy: boolean;
  state: SandboxState;
  blobs: BlobServer;
  options: HandlerOptions;
  idempotencyKey: string | null;
}

export interface HandlerOptions {
  allowLoopbackWebhooks: boolean;
  documentMaxBytes: number;
}

export interface RouteResult {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface RouteDef {
  method: Method;
  /** Path after /public/v1 (or /public), with :params. */
  pattern: string;
  permission: string;
  handler: (c: RouteContext) => RouteResult | Promise<RouteResult>;
}

export function ok(body: unknown, status = 200): RouteResult {
  return { status, body };
}

/** Matches a concrete path to a pattern; returns decoded params or null. */
export function matchPattern(pattern: string, path: string): Record<string, string> | null {
  const ps = pattern.split('/').filter(Boolean);
  const xs = path.split('/').filter(Boolean);
  if (ps.length !== xs.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < ps.length; i += 1) {
    const p = ps[i] as string;
    const x = xs[i] as string;
    if (p.startsWith(':')) {
      let decoded: string;
      try {
        decoded = decodeURIComponent(x);
      } catch {
        return null;
      }
      params[p.slice(1)] = decoded;
    } else if (p !== x) {
      return null;
    }
  }
  return params;
}
