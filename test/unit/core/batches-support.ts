import { FileBatchStore } from '../../../src/store/file-batches.js';
import { join } from 'node:path';
import { FileBatches } from '../../../src/core/file/batches.js';
import { cutoffRule } from '../../../src/core/file/cutoff.js';
import type { Clock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { compileLayout, type Layout } from '../../../src/core/file/layout/layout.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { openSqliteStore } from '../../../src/store/sqlite/store.js';

/** A CSV layout over the test records of file-core.test.ts (customer, loan, relationship). */
export const TEST_LAYOUT_YAML = `
files:
  - name: customer.csv
    record: customer
    format: csv
    columns:
      - { name: action, code: { new: A, correction: C } }
      - { name: loan_id, source: loanId }
      - { name: customer_id, source: externalId }
      - { name: name, field: name }
      - { name: kind, field: kind }
  - name: loan.csv
    record: loan
    format: csv
    columns:
      - { name: action, code: { new: A, correction: C } }
      - { name: loan_id, source: externalId }
      - { name: principal_cents, field: principalCents, neutralise: false }
      - { name: rate_bps, field: rateBps, neutralise: false }
      - { name: rate_index, field: rateIndex }
      - { name: note, field: note }
`;

export function testLayout(yaml = TEST_LAYOUT_YAML): Layout {
  const r = compileLayout(yaml);
  if (!r.layout) throw new Error(r.problems.map((p) => `${p.line}:${p.column} ${p.message}`).join('\n'));
  return r.layout;
}

export function testBatches(
  dir: string,
  clock: Clock,
  opts: { db?: StoreDb; layout?: Layout; cutoff?: string; intervalMinutes?: number; timeZone?: string } = {},
): FileBatches {
  const db = opts.db ?? openSqliteStore(join(dir, 'state.sqlite'));
  const layout = opts.layout ?? testLayout();
  return new FileBatches({
    root: join(dir, 'batches'),
    store: new FileBatchStore(db),
    layout: () => layout,
    rule: cutoffRule({
      cutoff: opts.cutoff ?? '18:00',
      intervalMinutes: opts.intervalMinutes,
      timeZone: opts.timeZone ?? 'America/Chicago',
    }),
    triggerFile: 'READY',
    logger: silentLogger(),
    clock,
  });
}
