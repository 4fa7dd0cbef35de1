import { createServer } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createConnectorDaemon } from '../../../src/app/daemon.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { loadConfig } from '../../../src/config/load.js';
import { systemClock } from '../../../src/lib/clock.js';
import { createLogger } from '../../../src/lib/logger.js';
import { startFineractSimulator, type FineractSimulator } from '../../../src/sandbox/cores/fineract/index.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../../support/otlp-receiver.js';
import { startTestPlatform, type TestPlatform } from '../pipeline/harness.js';

/**
 * Issue 46's traces, against a real OTLP/HTTP receiver (the collector's protocol, JSON encoding):
 * the connector boards the sandbox's loans into the Fineract simulator with telemetry on, and the
 * spans it exported are read back. One loan's board is one trace, linked to its cycle's, with the
 * platform, mapping, core and acknowledgement spans; the traceparent reached the core; no span
 * carries a tax id, the API key, the core's password or a presigned URL's signature; every log
 * line of the board carries its trace id. A dead collector costs spans, never a board.
 */

const LOANS = 4;
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
});

function configText(p: TestPlatform, sim: FineractSimulator, endpoint: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'traces-it-'));
  const block = sim.coreBlock();
  return stringify({
    platform: {
      baseUrl: p.sandbox.baseUrl,
      apiKey: p.apiKey,
      environment: 'staging',
      rateLimit: { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 60 },
    },
    store: { path: join(dir, 'state.sqlite') },
    core: { ...block, http: { ...(block['http'] as object), timeoutMs: 5000 } },
    mappings: { dir: join(process.cwd(), 'mappings', 'fineract') },
    customers: { tinHashKey: 'traces-test-key-0123456789' },
    boarding: {
      concurrency: 2,
      retryBaseMs: 10,
      retryMaxMs: 50,
      maxAttempts: 10,
      shutdownTimeoutMs: 2000,
      documentHosts: { allow: ['127.0.0.1'] },
    },
    webhooks: { port: 0 },
    admin: { port: 0 },
    telemetry: { otlp: { endpoint, timeoutMs: 1000 } },
  });
}

function capture(): { stream: Writable; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  return {
    stream: new Writable({
      write(chunk: Buffer, _enc, cb) {
        text += chunk.toString();
        cb();
      },
    }),
    lines: () =>
      text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

describe('OpenTelemetry traces', () => {
  it('one loan board is one trace linked to its cycle, with platform, mapping, core and ack spans; no secret in any span', async () => {
    const p = await startTestPlatform({ loans: LOANS, releaseRatio: 1, seed: 4601 });
    closers.push(() => p.close());
    const sim = await startFineractSimulator();
    closers.push(() => sim.close());
    const receiver: OtlpReceiver = await startOtlpReceiver();
    closers.push(() => receiver.close());
    const config = loadConfig({ env: {}, fileText: configText(p, sim, receiver.url) });
    const logs = capture();
    const rt = await buildRuntime(config, createLogger({ level: 'debug', destination: logs.stream }), {
      clock: systemClock,
      env: { OTEL_BSP_SCHEDULE_DELAY: '50' },
    });
    let closed = false;
    closers.push(async () => {
      if (!closed) await rt.close();
    });
    const summary = await rt.runner.run({ reason: 'test', settleMs: 5000 });
    expect(summary.acknowledged, JSON.stringify(summary.problems)).toBe(LOANS);
    const acknowledged = (await rt.store.loans.list({ state: 'acknowledged' })).map((l) => l.id);
    // Closing flushes the queue (bounded by a short timeout).
    await rt.close();
    closed = true;

    expect(receiver.refused).toEqual([]);
    const spans = receiver.spans;
    const cycles = spans.filter((s) => s.name === 'boarding cycle');
    expect(cycles).toHaveLength(1);
    const cycle = cycles[0]!;
    expect(cycle.parentSpanId).toBeNull();
    expect(cycle.attributes['cycle.acknowledged']).toBe(LOANS);
    expect(cycle.resource['service.name']).toBe('boarding-connector');

    const boards = spans.filter((s) => s.name === 'board loan');
    expect(boards.map((b) => b.attributes['loan.id']).sort()).toEqual([...acknowledged].sort());
    for (const board of boards) {
      // A trace of its own, linked to the cycle's span.
      expect(board.parentSpanId).toBeNull();
      expect(board.traceId).not.toBe(cycle.traceId);
      expect(board.links).toEqual([{ traceId: cycle.traceId, spanId: cycle.spanId }]);
      expect(board.attributes).toMatchObject({
        'board.outcome': 'acknowledged',
        'board.disposition': 'boarded',
      });
      expect(String(board.attributes['mapping.version'])).not.toBe('');
      const trace = spans.filter((s) => s.traceId === board.traceId);
      // Every span of the trace hangs from the board (no orphan, no second root).
      const ids = new Set(trace.map((s) => s.spanId));
      for (const s of trace) if (s !== board) expect(ids.has(s.parentSpanId ?? ''), s.name).toBe(true);
      const names = trace.map((s) => s.name);
      expect(names.some((n) => n.startsWith('platform '))).toBe(true);
      expect(names).toContain('map loan');
      expect(names).toContain('core write');
      expect(names.some((n) => n.startsWith('fineract POST '))).toBe(true);
      const ack = trace.find((s) => s.name === 'acknowledge');
      expect(ack).toBeDefined();
      const ackCall = trace.find((s) => s.parentSpanId === ack!.spanId);
      expect(ackCall?.name).toMatch(/^platform /);
      expect(ackCall?.attributes['http.request.method']).toBe('POST');
      expect(trace.find((s) => s.name === 'map loan')?.attributes['mapping.version']).toBe(
        board.attributes['mapping.version'],
      );
      // The core saw this trace: its requests carried a traceparent naming one of the trace's core spans.
      const coreSpans = new Set(trace.filter((s) => s.name.startsWith('fineract ')).map((s) => s.spanId));
      const carried = sim.requests
        .map((r) => /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(r.traceparent ?? ''))
        .filter((m): m is RegExpExecArray => m !== null && m[1] === board.traceId);
      expect(carried.length).toBeGreaterThan(0);
      for (const m of carried) expect(coreSpans.has(m[2]!)).toBe(true);
      // The loan's history keeps the trace id (the console's loan page shows the last one).
      const events = await rtEvents(config, board.attributes['loan.id'] as string);
      expect(events.at(-1)).toMatchObject({ toState: 'acknowledged', detail: { traceId: board.traceId } });
    }
    // Every log line of a loan (the boarder's, the core adapter's) carries the trace id of its board.
    const traceOf = new Map(boards.map((b) => [b.attributes['loan.id'], b.traceId]));
    const loanLines = logs.lines().filter((l) => typeof l['loanId'] === 'string');
    expect(loanLines.length).toBeGreaterThan(0);
    for (const l of loanLines) expect(l['trace_id'], String(l['msg'])).toBe(traceOf.get(l['loanId']));
    // No URL with a query, nor an id-bearing path, names a span.
    for (const s of spans) {
      expect(s.name).not.toMatch(/[?]|\d{3,}/);
      if (typeof s.attributes['url.path'] === 'string') expect(s.attributes['url.path']).not.toContain('?');
    }
    scanForSecrets(receiver, p, sim);
  }, 60_000);

  it('a dead collector costs only spans: every loan boards, and /metrics counts the spans dropped', async () => {
    const p = await startTestPlatform({ loans: LOANS, releaseRatio: 1, seed: 4602 });
    closers.push(() => p.close());
    const sim = await startFineractSimulator();
    closers.push(() => sim.close());
    const dead = `http://127.0.0.1:${await closedPort()}`;
    const config = loadConfig({ env: {}, fileText: configText(p, sim, dead) });
    const rt = await buildRuntime(config, createLogger({ level: 'silent', destination: capture().stream }), {
      clock: systemClock,
      env: { OTEL_BSP_SCHEDULE_DELAY: '20' },
    });
    closers.push(() => rt.close());
    const daemon = createConnectorDaemon(rt);
    closers.push(() => daemon.stop());
    await daemon.start();
    await daemon.idle();
    expect((await rt.store.loans.list({ state: 'acknowledged' })).length).toBe(LOANS);
    const adminUrl = daemon.adminUrl();
    if (!adminUrl) throw new Error('no admin listener');
    let dropped = 0;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const text = await (await fetch(`${adminUrl}/metrics`)).text();
      dropped = Number(
        /^boarding_trace_spans_dropped_total\{reason="export_failed"\} (\d+)$/m.exec(text)?.[1] ?? 0,
      );
      if (dropped > 0) {
        expect(text).toMatch(/^boarding_trace_spans_exported_total 0$/m);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(dropped).toBeGreaterThan(0);
  }, 60_000);
});

/** The loan's history, read from its state database as the console's loan page does. */
async function rtEvents(
  config: ReturnType<typeof loadConfig>,
  loanId: string,
): Promise<Array<{ toState: string | null; detail: unknown }>> {
  const { openStore } = await import('../../../src/store/open.js');
  const { createBoardingStore } = await import('../../../src/store/index.js');
  const { storeTarget } = await import('../../../src/app/store-target.js');
  const db = await openStore(storeTarget(config), {});
  try {
    return (await createBoardingStore(db).loans.events(loanId)).filter((e) => e.kind === 'transition');
  } finally {
    await db.close();
  }
}

/** Every exported byte: no tax id the core received, no API key, no core password, no presigned signature. */
function scanForSecrets(receiver: OtlpReceiver, p: TestPlatform, sim: FineractSimulator): void {
  const all = receiver.bodies.join('\n');
  expect(all.length).toBeGreaterThan(0);
  const taxIds = sim.identifiers.map((i) => i.documentKey).filter((k) => k.replace(/\D/g, '').length >= 9);
  expect(taxIds.length, 'the core received tax ids (the scan has something to look for)').toBeGreaterThan(0);
  for (const tin of taxIds) {
    expect(all).not.toContain(tin);
    expect(all).not.toContain(tin.replace(/\D/g, ''));
  }
  const http = sim.coreBlock()['http'] as { password: string; username: string };
  expect(all).not.toContain(p.apiKey);
  expect(all).not.toContain(http.password);
  expect(all).not.toMatch(/signature=|expires=|X-Amz-Signature/i);
  const text = (s: ReceivedSpan): string => JSON.stringify([s.name, s.attributes, s.events, s.status]);
  for (const s of receiver.spans)
    expect(text(s)).not.toMatch(/(?<![\d-])(\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?![\d-])/);
}
