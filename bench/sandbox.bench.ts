/**
 * Throughput of the sandbox itself, so the connector's e2e and load tests know the simulator is
 * not their bottleneck: boarding-queue pages (offset and cursor) and entity reads with a large
 * budget, measured with autocannon. Prints figures; never fails on timing.
 */
import { createRequire } from 'node:module';
import { startSandbox } from '../src/sandbox/index.js';

/** The part of autocannon's result this bench prints (the package ships no type declarations). */
interface LoadResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  non2xx: number;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (opts: {
  url: string;
  connections: number;
  duration: number;
  headers: Record<string, string>;
}) => Promise<LoadResult>;

const LOANS = 2_000;

async function measure(title: string, url: string, apiKey: string): Promise<void> {
  const result = await autocannon({
    url,
    connections: 10,
    duration: 3,
    headers: { authorization: `Bearer ${apiKey}` },
  });
  const non2xx = result.non2xx;
  process.stdout.write(
    `${title.padEnd(44)} ${String(Math.round(result.requests.average)).padStart(6)} req/s  p50 ${result.latency.p50} ms  p99 ${result.latency.p99} ms  non-2xx ${non2xx}\n`,
  );
}

const sb = await startSandbox({
  amounts: 'extreme',
  loans: LOANS,
  readsPerWindow: 10_000_000,
  writesPerWindow: 10_000_000,
});
try {
  process.stdout.write(`sandbox with ${LOANS} generated loans, 10 connections, 3 s each\n`);
  const queue = `${sb.baseUrl}/public/v1/loans/boarding-queue`;
  await measure('GET boarding-queue?limit=100 (offset)', `${queue}?limit=100`, sb.apiKey);
  const first = (await (
    await fetch(`${queue}?cursor=&limit=100`, { headers: { authorization: `Bearer ${sb.apiKey}` } })
  ).json()) as { meta: { nextCursor: string }; data: Array<{ id: string }> };
  await measure(
    'GET boarding-queue?limit=100&cursor=… (cursor)',
    `${queue}?limit=100&cursor=${first.meta.nextCursor}`,
    sb.apiKey,
  );
  await measure(
    'GET loans/{id}/entities',
    `${sb.baseUrl}/public/v1/loans/${encodeURIComponent(first.data[0]?.id ?? '')}/entities`,
    sb.apiKey,
  );
} finally {
  await sb.close();
}
