/**
 * Customer match: the cost per loan of resolving its businesses and people (cross-reference → tax
 * id against the connector's customers and the bank's extract → new, with a pool CIF) with an
 * extract of 1,000 and of 100,000 customers, and their ratio (flat: ≈ 1, the look-up is one map
 * entry whatever the extract's size). Also the time to read each extract and the memory it holds
 * (RSS and heap after the read, and the heap the index takes): hashes → CIF, not rows.
 *
 * Each size runs in a fresh state database on disk with the same loans: 3 parties each; 30 % of
 * tax ids in the extract, 20 % repeat an earlier loan's, the rest new. Never fails on timing.
 */
import { clockReading } from '../test/support/fake-clock.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCustomerResolver } from '../src/identity/customer-match.js';
import { CustomerExtract, DEFAULT_EXTRACT_LAYOUT } from '../src/core/file/customer-extract.js';
import { CustomerKeys } from '../src/lib/customer-keys.js';
import { silentLogger } from '../src/lib/logger.js';
import type { Entities } from '../src/contract/schemas.js';
import { openDatabase } from '../src/store/sqlite/db.js';
import { createBoardingStore } from '../src/store/index.js';
import { DEFAULT_NUMBER_POOLS } from '../src/store/identity/numbers.js';
import { sqliteStore } from '../src/store/sqlite/store.js';

const LOANS = Number(process.env['BENCH_LOANS'] ?? 2000);
const SIZES = [1_000, 100_000];
const keys = new CustomerKeys('bench-key-0123456789abcdef');
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function ein(n: number): string {
  return String(100_000_000 + n).slice(-9);
}

/** The same loans for every size: tax ids from the first 1,000 extract rows, repeats, new ones. */
function loans(): Entities[] {
  let seq = 0;
  const out: Entities[] = [];
  const seen: string[] = [];
  for (let i = 0; i < LOANS; i += 1) {
    const businesses = [];
    for (let p = 0; p < 3; p += 1) {
      const r = (i * 7 + p * 13) % 10;
      const tin =
        r < 3
          ? ein(1 + ((i * 3 + p) % 1000))
          : r < 5 && seen.length > 0
            ? (seen[(i * 31 + p) % seen.length] as string)
            : ein(500_000_000 + (seq += 1));
      seen.push(tin);
      businesses.push({
        id: `biz_${i}_${p}`,
        name: `Business ${tin.slice(-4)} LLC`,
        ein: tin,
        role: p === 0 ? 'borrower' : 'guarantor',
      });
    }
    out.push({ businesses, people: [] });
  }
  return out;
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

async function run(size: number, work: Entities[]): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'customers-bench-'));
  try {
    const path = join(dir, 'customers.csv');
    const lines = ['cif,tin,name'];
    for (let i = 1; i <= size; i += 1)
      lines.push(`${80_000_000 + i},${ein(i)},Business ${ein(i).slice(-4)} LLC`);
    writeFileSync(path, `${lines.join('\n')}\n`);
    lines.length = 0;
    gc();
    let now = Date.now();
    const clock = clockReading(() => now);
    const extract = new CustomerExtract({
      path,
      maxAgeHours: 36,
      layout: DEFAULT_EXTRACT_LAYOUT,
      keys,
      clock,
      logger: silentLogger(),
    });
    const heapBefore = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    await extract.refresh();
    const readMs = performance.now() - t0;
    gc();
    const mem = process.memoryUsage();
    const db = openDatabase(join(dir, 'state.sqlite'));
    const store = createBoardingStore(sqliteStore(db), { numberPools: DEFAULT_NUMBER_POOLS });
    const resolver = createCustomerResolver({
      store,
      directory: extract,
      keys,
      newCif: async (key, at) => (await store.numbers.allocate('customer', key, at)).number,
      onAmbiguous: 'quarantine',
      allowLast4Tin: false,
      clock,
      logger: silentLogger(),
    });
    const cpu0 = process.cpuUsage();
    const w0 = performance.now();
    for (let i = 0; i < work.length; i += 1) {
      const id = `ln_${i}`;
      now += 1;
      await store.loans.insert({ id, state: 'queued' }, now);
      await store.loans.transition(id, { to: 'fetched', expectedFrom: 'queued' }, now);
      await resolver.resolve(id, work[i] as Entities);
      await store.loans.transition(
        id,
        { to: 'mapped', expectedFrom: 'fetched', patch: { coreWriteStartedAt: now } },
        now,
      );
      await store.loans.transition(
        id,
        {
          to: 'written',
          expectedFrom: 'mapped',
          patch: { writtenAt: now, coreReference: id },
          also: () => resolver.afterWrite(id, null),
        },
        now,
      );
    }
    const cpu = process.cpuUsage(cpu0);
    const wall = performance.now() - w0;
    const perLoanUs = (cpu.user + cpu.system) / work.length;
    const created = (await store.customers.list({ matchedBy: 'created', limit: 1_000_000 })).length;
    const byTin = (await store.customers.list({ matchedBy: 'tin', limit: 1_000_000 })).length;
    console.log(
      `extract ${String(size).padStart(7)} customers: read ${readMs.toFixed(0)} ms · RSS ${mb(mem.rss)} heap ${mb(mem.heapUsed)} (index ≈ ${mb(Math.max(0, mem.heapUsed - heapBefore))}) · ` +
        `${work.length} loans: ${perLoanUs.toFixed(0)} µs CPU / ${(wall / work.length).toFixed(2)} ms wall per loan (3 parties, store on disk) · ${created} created, ${byTin} matched by tax id`,
    );
    db.close();
    return perLoanUs;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const work = loans();
  const costs: number[] = [];
  for (const size of SIZES) costs.push(await run(size, work));
  const [small, large] = costs as [number, number];
  console.log(
    `matching cost per loan, 100,000 vs 1,000 customers in the extract: ratio ${(large / small).toFixed(2)} (flat ≈ 1)`,
  );
}

await main();
