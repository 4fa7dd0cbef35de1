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
import { TraceFlags, type Context } from '@opentelemetry/api';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { scrubText } from '../lib/redact.js';
import type { TracingSettings } from './tracing.js';

/**
 * The OpenTelemetry SDK's part of tracing.ts: the exporter, the bounded processor and the provider.
 * Loaded only when traces are on (startTracing imports it): the SDK and the OTLP exporter are some
 * 150 ms of CPU to load, which every command that builds a runtime paid with traces off.
 */

/** Counts what the exporter sent and what it lost; logs a failing collector once a minute at most. */
export class CountingExporter implements SpanExporter {
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
export class BoundedProcessor implements SpanProcessor {
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

/** The SDK's parts for one process's traces, not yet registered. */
export interface TracingSdk {
  exporter: CountingExporter;
  processor: BoundedProcessor;
  /** Spans handed to the batch processor and not yet taken by the exporter. */
  queue: { pending: number };
  provider: NodeTracerProvider;
}

export function buildTracingSdk(settings: TracingSettings, logger: Logger): TracingSdk {
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
  return { exporter, processor, queue, provider };
}
