import {
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type AttributeValue,
  type Link,
  type Span,
} from '@opentelemetry/api';
import { errorMessage } from './errors.js';
import { scrubText } from './redact.js';

/**
 * The spans the connector makes, over the OpenTelemetry API only: with no SDK registered
 * (src/observability/tracing.ts registers one when telemetry is on) every call here is the API's
 * no-op. Names and attribute values pass through scrubText, the scrubber every log line passes
 * through, so no tax id, key, password or presigned URL's query reaches a span, whoever builds it.
 */

const TRACER_NAME = 'boarding-connector';

export type { Span } from '@opentelemetry/api';

export interface SpanOptions {
  attributes?: Attributes;
  /** `client` for a call that leaves the process (platform, core). */
  kind?: 'internal' | 'client';
  /**
   * A trace of its own, linked to the span active now (a loan's board is one trace, linked to its
   * cycle's) instead of a child of it.
   */
  linkToActive?: boolean;
  /** A trace of its own, neither child of nor linked to the active span (a cycle). */
  root?: boolean;
}

/** An attribute value with every string scrubbed (arrays of strings too). */
function clean(v: AttributeValue | undefined): AttributeValue | undefined {
  if (typeof v === 'string') return scrubText(v).slice(0, 1000);
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'string' ? scrubText(x) : x)) as AttributeValue;
  return v;
}

function cleanAll(attrs: Attributes | undefined): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attrs ?? {})) {
    const c = clean(v);
    if (c !== undefined && c !== null) out[k] = c;
  }
  return out;
}

/**
 * Runs `fn` in a span that is active for everything it awaits (children, log lines' trace_id) and
 * ends however `fn` ends; a throw marks it as an error with the scrubbed message (no stack, no
 * exception event: an error's text may quote what a record held).
 */
export function inSpan<T>(name: string, opts: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  const links: Link[] = [];
  if (opts.linkToActive) {
    const parent = trace.getActiveSpan()?.spanContext();
    if (parent && trace.isSpanContextValid(parent)) links.push({ context: parent });
  }
  return trace.getTracer(TRACER_NAME).startActiveSpan(
    scrubText(name),
    {
      kind: opts.kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL,
      ...(opts.linkToActive ? { root: true, links } : opts.root ? { root: true } : {}),
    },
    async (span) => {
      // Scrubbed only for a span that is kept (traces on, sampled): off, a span costs next to nothing.
      if (opts.attributes !== undefined) setSpanAttributes(span, opts.attributes);
      try {
        return await fn(span);
      } catch (err) {
        failSpan(span, err);
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

/** Attributes set after the start (an outcome, a status code), scrubbed as at the start. */
export function setSpanAttributes(span: Span, attrs: Attributes): void {
  if (span.isRecording()) span.setAttributes(cleanAll(attrs));
}

/** Attributes on the span active now (the loan's, from a step inside it); nothing when none. */
export function annotateActiveSpan(attrs: Attributes): void {
  const span = trace.getActiveSpan();
  if (span) setSpanAttributes(span, attrs);
}

/** Marks a span failed: the error's class and its scrubbed message. */
export function failSpan(span: Span, err: unknown): void {
  if (!span.isRecording()) return;
  const type =
    err !== null && typeof err === 'object' && 'code' in err && typeof err.code === 'string'
      ? err.code
      : err instanceof Error
        ? err.name
        : 'error';
  span.setAttribute('error.type', scrubText(type));
  span.setStatus({ code: SpanStatusCode.ERROR, message: scrubText(errorMessage(err)).slice(0, 500) });
}

/** Adds the active trace's W3C `traceparent` (and `tracestate`) to outgoing headers; nothing when off. */
export function injectTraceHeaders(headers: Record<string, string>): void {
  propagation.inject(context.active(), headers);
}

/**
 * The active span's ids when its trace is sampled (exported): for log lines (pino mixin) and the
 * loan's history. An unsampled trace is nowhere to be found, so its id is not shown.
 */
export function activeTraceIds(): { trace_id: string; span_id: string } | null {
  const sc = trace.getActiveSpan()?.spanContext();
  if (!sc || !trace.isSpanContextValid(sc) || (sc.traceFlags & TraceFlags.SAMPLED) === 0) return null;
  return { trace_id: sc.traceId, span_id: sc.spanId };
}

/** The path of a URL or path (no scheme, host, query nor fragment), scrubbed: for span names and url.path. */
export function spanPath(pathOrUrl: string): string {
  const noQuery = pathOrUrl.replace(/[?#].*$/s, '');
  const path = noQuery.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '') || '/';
  return scrubText(path);
}

/** A path with every segment that carries a digit (an id, an external id) as `{id}`: a span name of few values. */
export function pathTemplate(pathOrUrl: string): string {
  return spanPath(pathOrUrl)
    .split('/')
    .map((seg) => (/\d/.test(seg) ? '{id}' : seg))
    .join('/');
}

/**
 * A call to a core's HTTP API in a span of its own (`fineract POST /clients/{id}/identifiers`),
 * the path as url.path without its query; `fn` adds the traceparent header (injectTraceHeaders)
 * and the answer's status (noteHttpStatus).
 */
export function inCoreCallSpan<T>(
  system: string,
  method: string,
  path: string,
  fn: () => Promise<T>,
): Promise<T> {
  return inSpan(
    `${system} ${method} ${pathTemplate(path)}`,
    {
      kind: 'client',
      attributes: { 'core.system': system, 'http.request.method': method, 'url.path': spanPath(path) },
    },
    fn,
  );
}

/** The HTTP status of the answer, on the active span (a core or platform call's). */
export function noteHttpStatus(status: number): void {
  trace.getActiveSpan()?.setAttribute('http.response.status_code', status);
}
