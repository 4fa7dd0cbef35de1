/**
 * A state database of n loans for the console benchmarks (console, console-pages): one in four
 * quarantined (five reasons), one in ten boarded with review items, the rest acknowledged, ages
 * spread over 30 days before NOW. Written straight into the loans table in 10,000-row transactions.
 */
import { searchKey } from '../src/lib/search-key.js';
import { openDatabase } from '../src/store/sqlite/db.js';

export const DAY = 86_400_000;
export const NOW = Date.parse('2026-11-25T12:00:00Z');
export const REASONS = ['mapping', 'validation', 'core_rejected', 'retries_exhausted', 'contradictory'];

export function buildExceptionStore(
  path: string,
  n: number,
  nameOf: (i: number) => string = (i) => `Borrower ${i} Holdings LLC`,
): void {
  const db = openDatabase(path);
  const ins = db.prepare(
    `INSERT INTO loans (id, loan_number, state, quarantine_reason, review_items, attempts, cents_amount, product_id, mapping_version,
                        released_at_iso, borrower_name, borrower_key, last_error_code, last_error_message, queue_item, created_at, updated_at)
     VALUES (@id, @number, @state, @reason, @review, 1, @amount, @product, 'generic@1.4.0', @released, @name, @key, @code, @message, @item, @at, @at)`,
  );
  const batch = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const k = i % 20;
      const quarantined = k < 5;
      const review = k === 5 || k === 6;
      const at = NOW - (i % 30) * DAY - (i % 1000) * 1000;
      ins.run({
        id: `loan_${String((i * 7919) % n).padStart(7, '0')}_${i}`,
        number: `LN-${i}`,
        state: quarantined ? 'quarantined' : 'acknowledged',
        reason: quarantined ? REASONS[i % REASONS.length] : null,
        review: review ? 1 + (i % 3) : 0,
        amount: 1_000_000 + ((i * 7919) % 500_000_000),
        product: `prod_${i % 7}`,
        released: new Date(at - DAY).toISOString(),
        name: nameOf(i),
        key: searchKey(nameOf(i)),
        code: quarantined ? 'mapping_error' : null,
        message: quarantined
          ? 'paymentFrequency "irregular" has no core code (mappings/generic/loan.yaml:41)'
          : null,
        item: JSON.stringify({ id: `loan_${i}`, purposeNarrative: 'x'.repeat(300) }),
        at,
      });
    }
  });
  for (let i = 0; i < n; i += 10_000) batch(i, Math.min(n, i + 10_000));
  db.close();
}

/** A query timed cold (the first call) and as the median of the next 20. */
export async function timeIt(fn: () => Promise<unknown>): Promise<{ cold: number; median: number }> {
  const t0 = performance.now();
  await fn();
  const cold = performance.now() - t0;
  const runs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    await fn();
    runs.push(performance.now() - t);
  }
  runs.sort((a, b) => a - b);
  return { cold, median: runs[10] as number };
}
