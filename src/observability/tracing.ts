import { context, propagation, trace, TraceFlags } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Context } from '@opentelemetry/api';
import type { TelemetryConfig } from '../config/schema.js';
import { ConfigError, errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { redactUrl, scrubText } from '../lib/redact.js';

/**
 * OpenTelemetry traces (docs/operations.md "Traces"): the SDK behind the spans src/lib/tracing.ts
 * makes. Off unless an OTLP endpoint is configured; OTLP/HTTP with JSON bodies to the collector.
 * The exporter never holds up a board: spans are queued (bounded) and sent in batches in the
 * background; a full queue or a collector that is down or slow costs only the spans, counted in
 * /metrics (boarding_trace_spans_dropped_total).
 */

export interface TracingSettings {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  url: string;
  /** Where the URL came from, for the start-up line and errors. */
  from: 'telemetry.otlp.endpoint' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' | 'OTEL_EXPORTER_OTLP_ENDPOINT';
  serviceName: string;
  serviceVersion: string;
  sampleRatio: number;
  exportTimeoutMs: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMs: number;
}

export interface TraceExportStats {
  exported: number;
  dropped: { queue_full: number; export_failed: number };
}

export interface Tracing {
  readonly settings: TracingSettings;
  stats(): TraceExportStats;
  /** Sends what is queued (bounded by timeoutMs) and unregisters; idempotent. */
  shutdown(timeoutMs?: number): Promise<void>;
}

type Env = Readonly<Record<string, string | undefined>>;

const TRACES_PATH = '/v1/traces';

function envUrl(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  if (!v) return undefined;
  try {
    const u = new URL(v);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    throw new ConfigError(
      `${name}: expected the http(s) URL of an OTLP/HTTP collector, e.g. http://otel-collector:4318, got "${redactUrl(v)}"`,
    );
  }
  return v;
}

function withTracesPath(base: string): string {
  const u = new URL(base);
  if (!u.pathname.endsWith(TRACES_PATH)) u.pathname = `${u.pathname.replace(/\/+$/, '')}${TRACES_PATH}`;
  return u.toString();
}

function envInt(env: Env, name: string, fallback: number, min: number): number {
  const v = env[name]?.trim();
  if (!v) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new ConfigError(`${name}: expected integer ≥ ${min}, got "${v}"`);
  return n;
}

/**
 * Whether traces are on, and where they go: telemetry.otlp.endpoint, else the standard
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as given), else OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces);
 * null when none is set or OTEL_SDK_DISABLED=true. Batching follows the standard OTEL_BSP_* variables.
 */
export function tracingSettings(
  cfg: TelemetryConfig,
  env: Env,
  serviceVersion: string,
): TracingSettings | null {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return null;
  let url: string;
  let from: TracingSettings['from'];
  const traces = envUrl(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = envUrl(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (cfg.otlp.endpoint !== undefined) {
    url = withTracesPath(cfg.otlp.endpoint);
    from = 'telemetry.otlp.endpoint';
  } else if (traces !== undefined) {
    url = traces;
    from = 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT';
  } else if (base !== undefined) {
    url = withTracesPath(base);
    from = 'OTEL_EXPORTER_OTLP_ENDPOINT';
  } else return null;
  const maxQueueSize = envInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE', cfg.otlp.maxQueueSize, 1);
  return {
    url,
    from,
    serviceName: env['OTEL_SERVICE_NAME']?.trim() || cfg.serviceName,
    serviceVersion,
    sampleRatio: cfg.sampling.ratio,
    exportTimeoutMs: envInt(env, 'OTEL_BSP_EXPORT_TIMEOUT', cfg.otlp.timeoutMs, 1),
    maxQueueSize,
    maxExportBatchSize: Math.min(maxQueueSize, envInt(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1)),
    scheduledDelayMs: envInt(env, 'OTEL_BSP_SCHEDULE_DELAY', 5_000, 0),
  };
}

/** Counts what the exporter sent and what it lost; logs a failing collector once a minute at most. */
class CountingExporter implements SpanExporter {
  exported = 0;
  failed = 0;
  private warnedAt = 0;
  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: Logger,
    private readonly onTaken: (n: number) => void,
  ) {}

  /** Batches handed to the exporter and not answered yet: lost, if still open at shutdown. */
  private readonly open = new Set<(result: ExportResult) => void>();

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.onTaken(spans.length);
    const settle = (result: ExportResult): void => {
      if (!this.open.delete(settle)) return;
      if (result.code === ExportResultCode.SUCCESS) this.exported += spans.length;
      else this.lost(spans.length, result.error);
      done(result);
    };
    this.open.add(settle);
    try {
      this.inner.export(spans, settle);
    } catch (err) {
      settle({ code: ExportResultCode.FAILED, error: err instanceof Error ? err : new Error(String(err)) });
    }
  }

  private lost(n: number, err: unknown): void {
    this.failed += n;
    const now = Date.now();
    if (now - this.warnedAt < 60_000) return;
    this.warnedAt = now;
    this.logger.warn(
      { spans: n, err: scrubText(errorMessage(err ?? 'export failed')) },
      'traces: the OTLP collector did not take a batch of spans; they are dropped (boarding keeps going; ' +
        'boarding_trace_spans_dropped_total counts them)',
    );
  }

  async shutdown(): Promise<void> {
    await this.inner.shutdown();
    this.abandon();
  }

  /** Every batch still unanswered counts as lost (the process is going; nobody will hear its answer). */
  abandon(): void {
    for (const settle of [...this.open])
      settle({ code: ExportResultCode.FAILED, error: new Error('not answered before shutdown') });
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor behind a queue bound of our own, so a span the queue has no room for is
 * counted (the SDK's processor drops it silently): `pending` is what it holds, released as the
 * exporter takes each batch.
 */
class BoundedProcessor implements SpanProcessor {
  droppedFull = 0;
  constructor(
    private readonly inner: BatchSpanProcessor,
    private readonly max: number,
    private readonly queue: { pending: number },
  ) {}
  onStart(span: Span, parent: Context): void {
    this.inner.onStart(span, parent);
  }
  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queue.pending >= this.max) {
      this.droppedFull += 1;
      return;
    }
    this.queue.pending += 1;
    this.inner.onEnd(span);
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

let active: Tracing | null = null;

/**
 * Registers the SDK for this process (the API's global provider, AsyncLocalStorage context and W3C
 * propagation) and returns its handle. One per process: a second runtime in the same process
 * (tests) shares the first's until it is shut down.
 */
export function startTracing(settings: TracingSettings, logger: Logger): Tracing {
  if (active !== null) {
    logger.warn('traces: already started in this process; this runtime shares that exporter');
    const shared = active;
    return { settings: shared.settings, stats: () => shared.stats(), shutdown: () => Promise.resolve() };
  }
  // Spans handed to the batch processor and not yet taken by the exporter.
  const queue = { pending: 0 };
  const exporter = new CountingExporter(
    new OTLPTraceExporter({ url: settings.url, timeoutMillis: settings.exportTimeoutMs }),
    logger,
    (n) => {
      queue.pending = Math.max(0, queue.pending - n);
    },
  );
  const processor = new BoundedProcessor(
    new BatchSpanProcessor(exporter, {
      maxQueueSize: settings.maxQueueSize,
      maxExportBatchSize: settings.maxExportBatchSize,
      scheduledDelayMillis: settings.scheduledDelayMs,
      exportTimeoutMillis: settings.exportTimeoutMs,
    }),
    settings.maxQueueSize,
    queue,
  );
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: settings.serviceName,
      [ATTR_SERVICE_VERSION]: settings.serviceVersion,
    }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sampleRatio) }),
    spanProcessors: [processor],
  });
  provider.register();
  logger.info(
    { traces: { url: redactUrl(settings.url), from: settings.from, sampleRatio: settings.sampleRatio } },
    'traces: exporting spans over OTLP/HTTP',
  );
  const p = processor;
  let closing: Promise<void> | null = null;
  const handle: Tracing = {
    settings,
    stats: () => ({
      exported: exporter.exported,
      dropped: { queue_full: p.droppedFull, export_failed: exporter.failed },
    }),
    shutdown(timeoutMs = 2_000) {
      closing ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), timeoutMs);
          timer.unref();
        });
        const r = await Promise.race([provider.shutdown().then(() => 'done' as const), late]).catch(
          (err: unknown) => {
            logger.warn({ err: scrubText(errorMessage(err)) }, 'traces: flushing the last spans failed');
            return 'failed' as const;
          },
        );
        clearTimeout(timer);
        if (r === 'late') logger.warn({ timeoutMs }, 'traces: the last spans were not sent in time; dropped');
        // Spans still queued or in flight now are lost: counted, so the last scrape tells.
        exporter.abandon();
        exporter.failed += queue.pending;
        queue.pending = 0;
        trace.disable();
        context.disable();
        propagation.disable();
        if (active === handle) active = null;
      })();
      return closing;
    },
  };
  active = handle;
  return handle;
}
