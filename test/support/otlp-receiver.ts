import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small OTLP/HTTP trace receiver: what an OpenTelemetry collector's `otlphttp` receiver does for
 * `POST /v1/traces` with `application/json` (the OTLP JSON encoding: ids as hex, attributes as
 * key/typed-value pairs), on port 0. Anything else is refused as a collector would (404, 415), so
 * an exporter that sent another encoding or path fails the test instead of passing unseen.
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  events: Array<{ name: string; attributes: Record<string, unknown> }>;
  status: { code: number; message?: string };
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** Base URL (http://127.0.0.1:PORT): what telemetry.otlp.endpoint takes. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Every request body as received (the secret scan reads these whole). */
  readonly bodies: string[];
  /** Requests refused (wrong path, method or content type). */
  readonly refused: Array<{ method: string; path: string; contentType: string | null }>;
  close(): Promise<void>;
}

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
  bytesValue?: string;
}
interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: KeyValue[];
  links?: Array<{ traceId: string; spanId: string }>;
  events?: Array<{ name: string; attributes?: KeyValue[] }>;
  status?: { code?: number; message?: string };
}
interface ExportTraceServiceRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{ spans?: OtlpSpan[] }>;
  }>;
}

function valueOf(v: AnyValue | undefined): unknown {
  if (v === undefined) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  if (v.kvlistValue !== undefined) return attributesOf(v.kvlistValue.values);
  if (v.bytesValue !== undefined) return v.bytesValue;
  return null;
}

function attributesOf(kvs: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, valueOf(kv.value)]));
}

/** OTLP/JSON carries ids as hex; accept base64 (the protobuf JSON mapping) as well. */
function hexId(id: string | undefined): string | null {
  if (id === undefined || id === '') return null;
  if (/^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16)) return id.toLowerCase();
  return Buffer.from(id, 'base64').toString('hex');
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const refused: OtlpReceiver['refused'] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const contentType = req.headers['content-type'] ?? null;
      const path = (req.url ?? '').replace(/\?.*$/, '');
      const refuse = (status: number): void => {
        refused.push({ method: req.method ?? '', path, contentType });
        res.writeHead(status).end();
      };
      if (req.method !== 'POST' || path !== '/v1/traces') return refuse(404);
      if (!contentType?.startsWith('application/json')) return refuse(415);
      const text = await readBody(req);
      bodies.push(text);
      let body: ExportTraceServiceRequest;
      try {
        body = JSON.parse(text) as ExportTraceServiceRequest;
      } catch {
        return refuse(400);
      }
      for (const rs of body.resourceSpans ?? []) {
        const resource = attributesOf(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              traceId: hexId(s.traceId) ?? '',
              spanId: hexId(s.spanId) ?? '',
              parentSpanId: hexId(s.parentSpanId),
              name: s.name,
              kind: s.kind ?? 0,
              attributes: attributesOf(s.attributes),
              links: (s.links ?? []).map((l) => ({
                traceId: hexId(l.traceId) ?? '',
                spanId: hexId(l.spanId) ?? '',
              })),
              events: (s.events ?? []).map((e) => ({ name: e.name, attributes: attributesOf(e.attributes) })),
              status: {
                code: s.status?.code ?? 0,
                ...(s.status?.message ? { message: s.status.message } : {}),
              },
              resource,
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
