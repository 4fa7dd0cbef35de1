/**
 * Reconciliation at scale: 100k synthetic loans (targets: < 30 s wall, < 300 MB peak RSS; issue 24:
 * it must fit beside `run`'s boarding in the memory `sync --once` needs, under 200 MB).
 *
 * The parent builds a real SQLite state database (100k loan rows, some loan.funded inbox rows),
 * then runs the reconciliation in a fresh child process so the peak RSS it reports belongs to the
 * reconciliation alone: a fake platform serves the boarded loans as full queue items in pages of
 * 100 (like the API), a fake core lists its records, and runReconcile writes the three real files.
 * RECONCILE_BENCH_NODE_ARGS: node options for the child (e.g. "--max-old-space-size=96").
 * The child sets the heap growth the connector's entry point sets (src/lib/heap.ts,
 * BOARDING_HEAP_GROWTH_PERCENT). Prints figures; never fails on timing.
 */
import { createReportReads } from '../src/store/index.js';
import { clockReading } from '../test/support/fake-clock.js';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CoreLoanRecord, CoreSystem } from '../src/core/port.js';
import { silentLogger } from '../src/lib/logger.js';
import type { PlatformApi, QueuePage } from '../src/platform/api.js';
import type { QueueItem } from '../src/contract/schemas.js';
import { runReconcile } from '../src/reports/run.js';
import { openDatabase } from '../src/store/sqlite/db.js';
import { applyHeapGrowth } from '../src/lib/heap.js';
import { sqliteStore } from '../src/store/sqlite/store.js';

const N = Number(process.env['RECONCILE_BENCH_LOANS'] ?? 100_000);
const DAY = 86_400_000;
const NOW = Date.parse('2026-11-20T18:00:00Z');

const id = (i: number): string => `loan_${String(i).padStart(7, '0')}`;
/** Deterministic variety: ~1 % of loans in each odd situation. */
const kind = (i: number): 'ok' | 'quarantined' | 'pending' | 'missing_core' | 'amount_diff' | 'not_acked' =>
  i % 100 === 1
    ? 'quarantined'
    : i % 100 === 2
      ? 'pending'
      : i % 100 === 3
        ? 'missing_core'
        : i % 100 === 4
          ? 'amount_diff'
          : i % 100 === 5
            ? 'not_acked'
            : 'ok';
const cents = (i: number): number => 5_000_000 + ((i * 7919) % 100_000_000);

function queueItem(i: number): QueueItem {
  const boardedAt = new Date(NOW - (i % 20) * DAY).toISOString();
  return {
    id: id(i),
    loanNumber: `LN-${i}`,
    status: 'funded',
    type: 'business',
    centsAmount: cents(i),
    centsMonthlyPayment: Math.floor(cents(i) / 60),
    monthsTerm: 60,
    monthsInterestOnly: 0,
    paymentFrequency: 'monthly',
    rateType: 'fixed',
    bpsRate: 500 + (i % 400),
    purpose: 'Working capital',
    purposeNarrative: 'Synthetic loan for the reconciliation benchmark; '.repeat(4),
    applicationDate: '2026-09-01T15:00:00Z',
    closeDate: '2026-10-01T15:00:00Z',
    maturityDate: '2031-10-01T15:00:00Z',
    firstPaymentDate: '2026-11-01T15:00:00Z',
    product: { id: `prod_${i % 5}`, name: 'Term loan' },
    stage: { id: 'stage_closed', name: 'Closed' },
    createdAt: '2026-09-01T15:00:00Z',
    updatedAt: boardedAt,
    boarding: { id: `brd_${i}`, boarded: true, releasedAt: boardedAt, boardedAt },
  };
}

function buildDatabase(path: string): void {
  const db = openDatabase(path);
  const insert = db.prepare(
    `INSERT INTO loans (id, loan_number, state, quarantine_reason, attempts, core_reference, mapping_version, cents_amount, product_id,
       released_at_iso, boarded_at_iso, written_at, acknowledged_at, last_error_message, created_at, updated_at)
     VALUES (?, ?, ?, ?, 1, ?, 'generic@1', ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const inbox = db.prepare(
    `INSERT INTO webhook_inbox (webhook_id, event_type, loan_id, occurred_at, received_at, payload, status) VALUES (?, 'loan.funded', ?, ?, ?, '{}', 'processed')`,
  );
  db.transaction(() => {
    for (let i = 0; i < N; i++) {
      const k = kind(i);
      const at = NOW - (i % 20) * DAY;
      const iso = new Date(at).toISOString();
      const state =
        k === 'quarantined'
          ? 'quarantined'
          : k === 'pending'
            ? 'retry_wait'
            : k === 'not_acked'
              ? 'written'
              : 'acknowledged';
      const written = state === 'acknowledged' || state === 'written';
      insert.run(
        id(i),
        `LN-${i}`,
        state,
        k === 'quarantined' ? 'tin_incomplete' : null,
        written ? `packages/${id(i)}` : null,
        cents(i),
        `prod_${i % 5}`,
        iso,
        state === 'acknowledged' ? iso : null,
        written ? at : null,
        state === 'acknowledged' ? at : null,
        k === 'quarantined' || k === 'pending' ? 'synthetic failure' : null,
        at - DAY,
        at,
      );
    }
    for (let j = 0; j < 1000; j++)
      inbox.run(`wh_${j}`, `funded_only_${j}`, NOW - (j % 15) * DAY, NOW - (j % 15) * DAY);
  })();
  db.close();
}

function fakePlatform(): PlatformApi {
  const unused = (): never => {
    throw new Error('not used by the benchmark');
  };
  return {
    async *boardingQueue(): AsyncGenerator<QueuePage> {
      let cursor: string | null = null;
      for (let start = 0; start < N; start += 100) {
        await Promise.resolve();
        const items: QueueItem[] = [];
        for (let i = start; i < Math.min(N, start + 100); i++) {
          const k = kind(i);
          if (k === 'ok' || k === 'missing_core' || k === 'amount_diff') items.push(queueItem(i));
        }
        const next = start + 100 < N ? `c${start + 100}` : null;
        yield { cursor, nextCursor: next, hasMore: next !== null, items, invalid: [] };
        cursor = next;
      }
    },
    getLoan: unused,
    getLoanSummary: unused,
    getEntities: unused,
    listDocuments: unused,
    getDownloadAddress: unused,
    download: unused,
    acknowledgeBoarding: unused,
    listProducts: unused,
    getProduct: unused,
    listWebhookEndpoints: unused,
    createWebhookEndpoint: unused,
    updateWebhookEndpoint: unused,
    health: unused,
    close: () => Promise.resolve(),
  };
}

function fakeCore(): CoreSystem {
  const record = (i: number): CoreLoanRecord => {
    const q = queueItem(i);
    return {
      coreReference: `packages/${q.id}`,
      loanExternalId: q.id,
      mappingVersion: 'generic@1',
      fields: {
        centsAmount: kind(i) === 'amount_diff' ? (q.centsAmount ?? 0) + 1 : (q.centsAmount ?? null),
        bpsRate: q.bpsRate ?? null,
        maturityDate: '2031-10-01',
        firstPaymentDate: '2026-11-01',
        paymentFrequency: 'monthly',
        productId: q.product?.id ?? null,
      },
    };
  };
  return {
    name: 'bench-core',
    board: () => Promise.reject(new Error('not used')),
    findLoan: (loanId) => Promise.resolve(record(Number(loanId.slice(5)))),
    async *listLoans() {
      for (let i = 0; i < N; i++) {
        const k = kind(i);
        if (k === 'ok' || k === 'amount_diff' || k === 'not_acked') {
          if (i % 1000 === 0) await Promise.resolve();
          yield record(i);
        }
      }
    },
    health: () => Promise.resolve({ ok: true }),
    close: () => Promise.resolve(),
  };
}

async function child(dbPath: string, outDir: string): Promise<void> {
  // As the connector's entry point does (src/main.ts): the heap follows the live data.
  applyHeapGrowth(process.env, process.execArgv);
  const db = openDatabase(dbPath);
  const started = performance.now();
  const result = await runReconcile({
    config: {
      platform: {
        baseUrl: 'https://lender.example.com/api',
        apiKey: 'pk_test_bench',
        environment: 'staging',
        rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 60_000, headroom: 0.9 },
        timeouts: { connectMs: 1, headersMs: 1, bodyMs: 1 },
        maxRetries: 0,
        pageSize: 100,
      },
      bank: { timeZone: 'America/Chicago' },
      reports: { dir: outDir, fundedNotReleasedDays: 5 },
      core: {
        adapter: 'file',
        file: { dir: outDir, csvBatches: false, batch: { cutoff: '18:00', triggerFile: 'READY' } },
      },
    },
    platform: fakePlatform(),
    reads: createReportReads(sqliteStore(db)),
    core: fakeCore(),
    logger: silentLogger(),
    clock: clockReading(() => NOW),
    connectorVersion: 'bench',
    outDir,
  });
  const ms = performance.now() - started;
  db.close();
  const maxRssMb = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(
    `${JSON.stringify({
      ms: Math.round(ms),
      maxRssMb: Math.round(maxRssMb),
      exceptions: result.summary.exceptionCount,
      byReason: result.summary.exceptionsByReason,
      csvBytes: statSync(result.files.csv).size,
      jsonBytes: statSync(result.files.json).size,
      htmlBytes: statSync(result.files.html).size,
    })}\n`,
  );
}

async function main(): Promise<void> {
  if (process.argv[2] === '--child') {
    await child(process.argv[3] as string, process.argv[4] as string);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'reconcile-bench-'));
  try {
    const dbPath = join(dir, 'state.sqlite');
    const t0 = performance.now();
    buildDatabase(dbPath);
    process.stdout.write(
      `synthetic state: ${N.toLocaleString('en-US')} loans in ${Math.round(performance.now() - t0)} ms\n`,
    );
    const nodeArgs = (process.env['RECONCILE_BENCH_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
    const r = spawnSync(
      process.execPath,
      [...nodeArgs, '--import', 'tsx', fileURLToPath(import.meta.url), '--child', dbPath, join(dir, 'out')],
      { encoding: 'utf8', maxBuffer: 1 << 28 },
    );
    if (r.status !== 0) throw new Error(`child failed (${r.status ?? r.signal}): ${r.stderr}`);
    const m = JSON.parse(r.stdout.trim().split('\n').pop() as string) as {
      ms: number;
      maxRssMb: number;
      exceptions: number;
      byReason: unknown;
      csvBytes: number;
      jsonBytes: number;
      htmlBytes: number;
    };
    process.stdout.write(
      [
        `reconcile ${N.toLocaleString('en-US')} loans: ${(m.ms / 1000).toFixed(2)} s wall (target < 30 s), peak RSS ${m.maxRssMb} MB (target < 300 MB)`,
        `  exceptions: ${m.exceptions} ${JSON.stringify(m.byReason)}`,
        `  files: report.csv ${(m.csvBytes / 1024).toFixed(0)} KiB, report.json ${(m.jsonBytes / 1024).toFixed(0)} KiB, report.html ${(m.htmlBytes / 1024).toFixed(0)} KiB`,
      ].join('\n') + '\n',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
