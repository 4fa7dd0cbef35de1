/**
 * The ops console's exception queue at scale (target: first page < 200 ms at 100,000 loans).
 *
 * Builds a real SQLite state database file of CONSOLE_BENCH_LOANS loans (default 100,000; a
 * quarter quarantined across reasons, a tenth boarded with review items, the rest boarded clean),
 * reopens it as the daemon would, and times the console service: the first page of the queue as
 * the page opens it (default sort), with a reason filter, sorted by amount, a search by name (a
 * scan of the exceptions), a deep page by cursor, and the counts per reason by age. Each figure is
 * the first (cold) call and the median of 20. Also a 1,000-loan store, so the ratio shows the cost
 * does not grow with the store. Prints figures; never fails on timing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { consoleSchema } from '../src/config/schema.js';
import { createConsoleService } from '../src/console/service.js';
import type { ExceptionQuery } from '../src/console/contract.js';
import { silentLogger } from '../src/lib/logger.js';
import { createConsoleStore } from '../src/store/console.js';
import { openDatabase } from '../src/store/sqlite/db.js';
import { buildExceptionStore, NOW, timeIt } from './console-store.js';
import { createBoardingStore } from '../src/store/index.js';
import { FakeClock } from '../test/support/fake-clock.js';
import { sqliteStore } from '../src/store/sqlite/store.js';

const N = Number(process.env['CONSOLE_BENCH_LOANS'] ?? 100_000);

async function measure(n: number): Promise<Record<string, { cold: number; median: number }>> {
  const dir = mkdtempSync(join(tmpdir(), 'console-bench-'));
  try {
    const path = join(dir, 'state.sqlite');
    const t0 = performance.now();
    buildExceptionStore(path, n);
    process.stdout.write(`store of ${n} loans built in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    const db = openDatabase(path);
    const service = createConsoleService({
      store: createBoardingStore(sqliteStore(db)),
      consoleStore: createConsoleStore(sqliteStore(db)),
      config: { console: consoleSchema.parse({}), bank: { timeZone: 'America/Chicago' }, reports: { dir } },
      clock: new FakeClock({ start: NOW }),
      logger: silentLogger(),
    });
    const page = (q: ExceptionQuery) => () => service.exceptions({ limit: 50, ...q });
    // A cursor ~90 % of the way down the queue: keyset pages cost the same however deep.
    let deep: string | null = null;
    for (let i = 0, c: string | null = null; i < Math.floor((n * 0.35 * 0.9) / 500); i++) {
      const p = await service.exceptions({ limit: 500, ...(c ? { cursor: c } : {}) });
      c = p.next;
      deep = c;
    }
    const figures = {
      'first page (age)': await timeIt(page({})),
      'first page, reason=core_rejected': await timeIt(page({ reason: 'core_rejected' })),
      'first page, sort=amount desc': await timeIt(page({ sort: 'amount', dir: 'desc' })),
      'first page, product=prod_3 & amount ≥ 2.5M': await timeIt(
        page({ product: 'prod_3', minAmountCents: 250_000_000 }),
      ),
      'first page, age ≥ 20 business days': await timeIt(page({ minAgeDays: 20 })),
      'search by name "borrower 4242 "': await timeIt(page({ q: 'borrower 4242 ' })),
      'search by loan number': await timeIt(page({ q: `LN-${Math.floor(n / 2)}` })),
      'deep page by cursor': await timeIt(page(deep ? { cursor: deep } : {})),
      'counts per reason by age': await timeIt(() => service.exceptionCounts()),
    };
    db.close();
    return figures;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const small = await measure(1_000);
const large = await measure(N);
process.stdout.write(
  `\nexception queue, ms (cold / median of 20)      1,000 loans       ${N.toLocaleString('en-US')} loans\n`,
);
for (const [name, f] of Object.entries(large)) {
  const s = small[name] as { cold: number; median: number };
  process.stdout.write(
    `  ${name.padEnd(44)} ${s.cold.toFixed(1).padStart(6)} / ${s.median.toFixed(1).padStart(6)}   ${f.cold.toFixed(1).padStart(7)} / ${f.median.toFixed(1).padStart(7)}\n`,
  );
}
const first = large['first page (age)'] as { cold: number; median: number };
process.stdout.write(
  `\nfirst page of the exception queue at ${N.toLocaleString('en-US')} loans: ${first.cold.toFixed(1)} ms cold, ${first.median.toFixed(1)} ms median (target < 200 ms)\n`,
);
