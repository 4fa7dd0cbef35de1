import { context, propagation, trace } from '@opentelemetry/api';
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

let active: Tracing | null = null;

/**
 * Registers the SDK for this process (the API's global provider, AsyncLocalStorage context and W3C
 * propagation) and returns its handle. One per process: a second runtime in the same process
 * (tests) shares the first's until it is shut down.
 */
export async function startTracing(settings: TracingSettings, logger: Logger): Promise<Tracing> {
  // The SDK only now: a process with traces off never loads it (tracing-sdk.ts).
  const { buildTracingSdk } = await import('./tracing-sdk.js');
  if (active !== null) {
    logger.warn('traces: already started in this process; this runtime shares that exporter');
    const shared = active;
    return { settings: shared.settings, stats: () => shared.stats(), shutdown: () => Promise.resolve() };
  }
  const { exporter, processor, queue, provider } = buildTracingSdk(settings, logger);
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
