import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { telemetrySchema } from '../../../src/config/schema.js';
import { ConfigError } from '../../../src/lib/errors.js';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import { inSpan, injectTraceHeaders, setSpanAttributes } from '../../../src/lib/tracing.js';
import { startTracing, tracingSettings, type Tracing } from '../../../src/observability/tracing.js';
import { startOtlpReceiver, type OtlpReceiver } from '../../support/otlp-receiver.js';

const defaults = telemetrySchema.parse({});
const on = (endpoint: string) => telemetrySchema.parse({ otlp: { endpoint } });

describe('tracingSettings: off unless an endpoint is set, the key before the standard variables', () => {
  it('off with nothing set, and with OTEL_SDK_DISABLED=true whatever is set', () => {
    expect(tracingSettings(defaults, {}, '1.0.0')).toBeNull();
    expect(tracingSettings(on('http://c:4318'), { OTEL_SDK_DISABLED: 'true' }, '1.0.0')).toBeNull();
  });

  it('telemetry.otlp.endpoint wins; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given; the base variable gets /v1/traces', () => {
    const env = {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom/v1/traces',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318',
    };
    expect(tracingSettings(on('http://c:4318'), env, 'v')).toMatchObject({
      url: 'http://c:4318/v1/traces',
      from: 'telemetry.otlp.endpoint',
    });
    expect(tracingSettings(defaults, env, 'v')).toMatchObject({
      url: 'http://traces:4318/custom/v1/traces',
      from: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    });
    expect(
      tracingSettings(defaults, { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://base:4318/otlp/' }, 'v'),
    ).toMatchObject({ url: 'https://base:4318/otlp/v1/traces', from: 'OTEL_EXPORTER_OTLP_ENDPOINT' });
  });

  it('the docs config block (docs/operations.md "Traces") gives the collector URL and the ratio it says', () => {
    const md = readFileSync('docs/operations.md', 'utf8');
    const block = [...md.matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map((m) => m[1]!)
      .find((b) => b.startsWith('telemetry:'));
    const cfg = telemetrySchema.parse((parse(block!) as { telemetry: unknown }).telemetry);
    expect(tracingSettings(cfg, {}, 'v')).toMatchObject({
      url: 'http://otel-collector:4318/v1/traces',
      sampleRatio: 0.25,
      serviceName: 'boarding-connector',
    });
  });

  it('a bad variable is named in the error', () => {
    expect(() => tracingSettings(defaults, { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'v')).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT: expected the http\(s\) URL/,
    );
    expect(() => tracingSettings(on('http://c:4318'), { OTEL_BSP_SCHEDULE_DELAY: 'soon' }, 'v')).toThrow(
      ConfigError,
    );
  });
});

describe('spans through lib/tracing.ts, exported to a real OTLP receiver', () => {
  let tracing: Tracing | null = null;
  let receiver: OtlpReceiver | null = null;
  afterEach(async () => {
    await tracing?.shutdown();
    await receiver?.close();
    tracing = null;
    receiver = null;
  });

  it('scrubs names and attributes, injects traceparent, and stamps log lines with the trace id', async () => {
    receiver = await startOtlpReceiver();
    tracing = await startTracing(
      tracingSettings(on(receiver.url), { OTEL_BSP_SCHEDULE_DELAY: '10' }, 'v')!,
      silentLogger(),
    );
    let text = '';
    const logger = createLogger({
      level: 'info',
      destination: new Writable({
        write(c: Buffer, _e, cb) {
          text += c.toString();
          cb();
        },
      }),
    });
    const headers: Record<string, string> = {};
    let traceId = '';
    await inSpan(
      'board loan 123-45-6789',
      { attributes: { 'loan.id': 'L1', note: 'ein 12-3456789' } },
      async (span) => {
        traceId = span.spanContext().traceId;
        setSpanAttributes(span, { where: 'https://blobs.example/b/1?expires=1&signature=abcDEF' });
        injectTraceHeaders(headers);
        logger.info({ loanId: 'L1' }, 'inside');
        await Promise.resolve();
      },
    );
    logger.info('outside');
    await tracing.shutdown();
    const [inside, outside] = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(inside).toMatchObject({ msg: 'inside', trace_id: traceId });
    expect(outside!['trace_id']).toBeUndefined();
    expect(headers['traceparent']).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const span = receiver.spans.find((s) => s.traceId === traceId)!;
    expect(span.name).toBe('board loan [redacted-tin]');
    expect(span.attributes['note']).toBe('ein [redacted-tin]');
    expect(String(span.attributes['where'])).not.toContain('abcDEF');
    expect(tracing.stats()).toEqual({ exported: 1, dropped: { queue_full: 0, export_failed: 0 } });
  });

  it('a collector that hangs costs spans, never time: a full queue drops and counts them at once', async () => {
    // Accepts connections and never answers: one batch is in flight, the next waits in the queue.
    const hang = createServer(() => undefined);
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    const { port } = hang.address() as AddressInfo;
    try {
      const settings = tracingSettings(
        telemetrySchema.parse({
          otlp: { endpoint: `http://127.0.0.1:${port}`, maxQueueSize: 16, timeoutMs: 300 },
        }),
        { OTEL_BSP_SCHEDULE_DELAY: '60000' },
        'v',
      )!;
      tracing = await startTracing(settings, silentLogger());
      const started = Date.now();
      for (let i = 0; i < 40; i++) await inSpan(`s${i}`, {}, () => Promise.resolve());
      expect(Date.now() - started).toBeLessThan(1000);
      // 16 taken by the export in flight, 16 queued behind it, 8 with no room.
      expect(tracing.stats().dropped.queue_full).toBe(8);
      await tracing.shutdown(3000);
      const stats = tracing.stats();
      expect(stats.exported).toBe(0);
      expect(stats.dropped.export_failed).toBeGreaterThanOrEqual(16);
    } finally {
      hang.closeAllConnections();
      hang.close();
    }
  });
});
