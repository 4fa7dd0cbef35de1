import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CoreSystem } from '../../../src/core/port.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { PlatformApi } from '../../../src/platform/api.js';
import { computeReconciliation, type ReconcileSources } from '../../../src/reports/compute.js';
import { HTML_MAX_ROWS } from '../../../src/reports/render-html.js';
import { renderJson } from '../../../src/reports/render-json.js';
import { runReconcile } from '../../../src/reports/run.js';
import type { PlatformLoanRow, ReportReviewItem, StoreLoanRow } from '../../../src/reports/types.js';
import { clockReading } from '../../support/fake-clock.js';

const AS_OF = Date.parse('2026-11-20T18:00:00Z');
const DAY = 86_400_000;
const N = HTML_MAX_ROWS + 700;

function storeRow(i: number): StoreLoanRow {
  const acknowledged = i % 3 === 0;
  return {
    id: `loan ${N - i} «${i}»`,
    loanNumber: i % 7 === 0 ? null : `LN-${i}`,
    state: acknowledged ? 'acknowledged' : 'quarantined',
    quarantineReason: acknowledged ? null : 'tin_incomplete',
    centsAmount: 100_000 + i,
    productId: 'p1',
    coreReference: acknowledged ? `core-${i}` : null,
    mappingVersion: 'generic@1',
    fundedAtIso: null,
    releasedAtIso: new Date(AS_OF - 3 * DAY).toISOString(),
    boardedAtIso: null,
    writtenAt: acknowledged ? AS_OF - 2 * DAY : null,
    acknowledgedAt: acknowledged ? AS_OF - 2 * DAY : null,
    lastErrorCode: null,
    lastErrorMessage: acknowledged ? null : 'tax id "12-34…" incomplete',
    reviewItems: acknowledged ? 12 : 0,
    createdAt: AS_OF - 3 * DAY,
    updatedAt: AS_OF - 2 * DAY,
  };
}

function platformRow(i: number): PlatformLoanRow {
  return {
    id: `loan ${N - i} «${i}»`,
    loanNumber: `LN-${i}`,
    centsAmount: 100_000 + i,
    bpsRate: 700,
    maturityDate: '2031-11-20T06:00:00Z',
    firstPaymentDate: '2026-12-20T06:00:00Z',
    paymentFrequency: 'monthly',
    productId: 'p1',
    releasedAt: new Date(AS_OF - 3 * DAY).toISOString(),
    boardedAt: new Date(AS_OF - 2 * DAY).toISOString(),
  };
}

function sources(): ReconcileSources {
  const rows = Array.from({ length: N }, (_, i) => storeRow(i));
  const items = (id: string, limit: number): ReportReviewItem[] =>
    Array.from({ length: Math.min(limit, 12) }, (_, k) => ({
      code: `C${k}`,
      field: `f${k}`,
      message: `about ${id}, "quoted"`,
      at: k % 2 === 0 ? 'mapping.yaml:3:5' : null,
    }));
  return {
    storeRows: () => rows,
    storeCount: () => rows.length,
    storeKnows: (id) => rows.some((r) => r.id === id),
    async *platformBoarded() {
      await Promise.resolve();
      for (let i = 0; i < N; i += 3) yield platformRow(i);
      yield platformRow(N + 1);
    },
    coreFind: () => Promise.resolve(null),
    funded: () => [{ loanId: 'only-funded', fundedAt: AS_OF - 20 * DAY }],
    reviewItems: items,
  };
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('reconcile report files written as the exceptions are found', () => {
  it('report.json streamed during the run is byte for byte the one-string rendering, with more exceptions than report.html lists', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'reconcile-stream-'));
    dirs.push(dir);
    const result = await runReconcile({
      config: {
        platform: {
          baseUrl: 'https://lender.example.com/api',
          apiKey: 'pk_test_x',
          environment: 'staging',
          rateLimit: { readsPerWindow: 1, writesPerWindow: 1, windowMs: 1000, headroom: 1 },
          timeouts: { connectMs: 1, headersMs: 1, bodyMs: 1 },
          maxRetries: 0,
          pageSize: 100,
        },
        bank: { timeZone: 'America/Chicago' },
        reports: { dir, fundedNotReleasedDays: 5 },
        core: {
          adapter: 'file',
          file: { dir, csvBatches: false, batch: { cutoff: '18:00', triggerFile: 'READY' } },
        },
      },
      platform: {} as PlatformApi,
      reads: {} as never,
      core: { name: 'file' } as CoreSystem,
      logger: silentLogger(),
      clock: clockReading(() => AS_OF),
      connectorVersion: 'test',
      sources: sources(),
    });
    const reference = await computeReconciliation(sources(), {
      asOfMs: AS_OF,
      timeZone: 'America/Chicago',
      fundedNotReleasedDays: 5,
      since: null,
    });
    expect(reference.exceptions.length).toBeGreaterThan(HTML_MAX_ROWS);
    expect(result.summary.exceptionCount).toBe(reference.exceptions.length);

    const json = readFileSync(result.files.json, 'utf8');
    const s = sources();
    expect(json).toBe(
      renderJson(result.summary, reference.exceptions, {
        reviewItems: (id) => (s.reviewItems?.(id, 10) as ReportReviewItem[] | undefined) ?? [],
      }),
    );
    const csvRows = readFileSync(result.files.csv, 'utf8')
      .split('\r\n')
      .filter((l) => /^rec-/.test(l));
    expect(csvRows.length).toBeGreaterThanOrEqual(reference.exceptions.length);
    const html = readFileSync(result.files.html, 'utf8');
    expect(html).toContain(
      `Showing the first ${HTML_MAX_ROWS} of ${reference.exceptions.length}; report.csv has every row.`,
    );
    // Nothing but the three reports is left in the run's folder (no streamed parts, no temp files).
    expect(readdirSync(result.dir).sort()).toEqual(['report.csv', 'report.html', 'report.json']);
  });
});
