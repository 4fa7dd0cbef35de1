/**
 * `npm run bench -- board-cost` (issue 44 item 5): what one board costs the state database and
 * the CPU, on SQLite with the file core (the defaults).
 *
 * 1. Statements: `sync --once` over BENCH_BOARD_COST_LOANS released loans (default 1000) with the
 *    counting preload bench/sql-count.js, which counts every better-sqlite3 execution by its SQL
 *    text and every write transaction (BEGIN IMMEDIATE … COMMIT). Printed per boarded loan (the
 *    queue walk and start-up included, as an operator pays them): statements, write and read
 *    transactions, savepoints, then the statements that cost the most per loan.
 *    Targets: ≤ 40 statements and ≤ 3 write transactions per board. A board's write transactions
 *    are those that write a loan's row or event (its steps, its share of the queue walk's pages);
 *    the run's own (migrations on a fresh database, the lease's renewals each 1.5 s) are printed
 *    apart, and all of them together beside.
 * 2. CPU: `sync --once` without the preload at each of BENCH_BOARD_COST_SIZES (default
 *    "3000,30000"): CPU per loan of the whole run and of the last 1,000 boards, and the ratio of
 *    the largest size to the smallest. Targets: ≤ 8 ms per loan, ratio ≤ 1.1.
 *
 *   BENCH_BOARD_COST_LOANS   loans for the counted run (0 skips part 1)
 *   BENCH_BOARD_COST_SIZES   sizes for the CPU runs ("" skips part 2)
 *   BENCH_BOARD_COST_TOP     how many statements to list (default 25)
 *   BENCH_BOARD_COST_AGAINST another checkout, built (`npm run build` there): part 2 then runs it and
 *                            this one at the same time at each size, twice with the order of
 *                            their starts swapped, and prints the two side by side. On a shared
 *                            machine one build's CPU per loan moves ±30 % from one run to the next;
 *                            two runs side by side see the same machine, and a build measured
 *                            against itself this way agreed within 1 % (docs/operations.md).
 *   BENCH_BOARD_COST_TIME    1: also time each statement (wall, a COMMIT's fsync included) and list
 *                            the statements that took longest per board
 *   BENCH_SCALE_BUILD        0 to skip `npm run build` (dist/ must be current)
 *
 * Never fails on figures: it prints them beside their targets.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { measure, report, sliceOf, type Run } from './sync-once.js';

const COUNT_LOANS = Number(process.env['BENCH_BOARD_COST_LOANS'] ?? 1000);
const SIZES = (process.env['BENCH_BOARD_COST_SIZES'] ?? '3000,30000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n) && n > 0);
const TOP = Number(process.env['BENCH_BOARD_COST_TOP'] ?? 25);
const TIME = process.env['BENCH_BOARD_COST_TIME'] === '1';
const AGAINST = process.env['BENCH_BOARD_COST_AGAINST'];
const PRELOAD = join(dirname(fileURLToPath(import.meta.url)), 'sql-count.js');

interface Counts {
  tx: { write: number; read: number; rolledBack: number; savepoints: number; loanWrite: number };
  statements: Record<string, number>;
  ms?: Record<string, number>;
}

/** The counts every thread of the measured process wrote at exit, added up. */
function readCounts(dir: string): Counts {
  const total: Counts = {
    tx: { write: 0, read: 0, rolledBack: 0, savepoints: 0, loanWrite: 0 },
    statements: {},
    ms: {},
  };
  for (const f of readdirSync(dir)) {
    const c = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Counts;
    for (const k of Object.keys(total.tx) as Array<keyof Counts['tx']>) total.tx[k] += c.tx[k] ?? 0;
    for (const [sql, n] of Object.entries(c.statements))
      total.statements[sql] = (total.statements[sql] ?? 0) + n;
    const ms = total.ms as Record<string, number>;
    for (const [sql, t] of Object.entries(c.ms ?? {})) ms[sql] = (ms[sql] ?? 0) + t;
  }
  return total;
}

/** What a statement works on, for the per-area sums: the transaction verbs, else its first table. */
function area(sql: string): string {
  const s = sql.toUpperCase();
  if (/^(BEGIN|COMMIT|END|ROLLBACK(?! TO))/.test(s)) return 'BEGIN/COMMIT';
  if (/^(SAVEPOINT|RELEASE|ROLLBACK TO)/.test(s)) return 'savepoints';
  if (s.startsWith('PRAGMA')) return 'pragma';
  const m = /\b(?:FROM|INTO|UPDATE|TABLE(?: IF NOT EXISTS)?)\s+"?([a-z_][a-z0-9_]*)"?/i.exec(sql);
  return m?.[1] ?? 'other';
}

const short = (sql: string): string => (sql.length > 150 ? `${sql.slice(0, 147)}...` : sql);

async function counted(loans: number): Promise<void> {
  const out = mkdtempSync(join(tmpdir(), 'boarding-sql-count-'));
  try {
    const run = await measure('sqlite', loans, null, {
      nodeArgs: ['--import', PRELOAD],
      env: { SQL_COUNT_OUT: out, SQL_COUNT_TIME: TIME ? '1' : '0' },
    });
    report(run);
    const c = readCounts(out);
    const per = (n: number): string => (n / Math.max(1, run.boarded)).toFixed(2);
    const all = Object.entries(c.statements);
    const statements = all.reduce((a, [, n]) => a + n, 0);
    console.log(
      `statements per board: ${per(statements)} (target ≤ 40); write transactions per board: ${per(c.tx.loanWrite)} (target ≤ 3: ` +
        `the board's steps and the queue walk's pages, every transaction that writes a loan row); ` +
        `the run's own write transactions, not a board's (migrations, the lease's renewals every 1.5 s): ${per(c.tx.write - c.tx.loanWrite)}, ` +
        `all write transactions ${per(c.tx.write)}; ` +
        `read transactions ${per(c.tx.read)}, savepoints ${per(c.tx.savepoints)}, rolled back ${per(c.tx.rolledBack)} — over ${run.boarded} boards`,
    );
    const areas = new Map<string, number>();
    for (const [sql, n] of all) areas.set(area(sql), (areas.get(area(sql)) ?? 0) + n);
    console.log(
      `  by area: ${[...areas]
        .sort((a, b) => b[1] - a[1])
        .map(([a, n]) => `${a} ${per(n)}`)
        .join(', ')}`,
    );
    console.log(`  the ${TOP} statements that cost most per board:`);
    for (const [sql, n] of all.sort((a, b) => b[1] - a[1]).slice(0, TOP))
      console.log(`  ${per(n).padStart(7)}  ${short(sql)}`);
    if (TIME) {
      const ms = Object.entries(c.ms ?? {});
      const sum = ms.reduce((a, [, t]) => a + t, 0);
      console.log(
        `  time in statements: ${per(sum)} ms per board (wall, fsyncs included); longest per board:`,
      );
      for (const [sql, t] of ms.sort((a, b) => b[1] - a[1]).slice(0, TOP))
        console.log(`  ${per(t).padStart(7)} ms  ${short(sql)}`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** Part 2 against another build: both at once at each size, so both see the same machine. */
async function sideBySide(dir: string): Promise<void> {
  const against = resolve(dir);
  if (!existsSync(join(against, 'dist/main.js')))
    throw new Error(
      `BENCH_BOARD_COST_AGAINST: ${against} holds no dist/main.js (a checkout, built with \`npm run build\` there)`,
    );
  for (const n of SIZES) {
    for (const round of [1, 2]) {
      // The build started first may get a head start on a busy machine: swap the order once.
      const builds: Array<string | undefined> = round === 1 ? [undefined, against] : [against, undefined];
      const runs = await Promise.all(builds.map((build) => measure('sqlite', n, null, { build })));
      const line = (r: Run, label: string): string =>
        `  ${label}: ${(r.cpuMs / r.loans).toFixed(2)} ms CPU per loan (main thread ${(r.mainThreadCpuMs / r.loans).toFixed(2)}, ` +
        `system ${(r.systemCpuMs / r.loans).toFixed(2)}), last ${sliceOf(r.loans)} boards ${r.last.cpu.toFixed(2)}; ` +
        `boarded ${r.boarded}, duplicate acks ${r.duplicateAcks}, 429s ${r.rateLimited}`;
      const mine = runs[builds.indexOf(undefined)] as Run;
      const theirs = runs[builds.indexOf(against)] as Run;
      console.log(`${n} loans, side by side (round ${round}):`);
      console.log(line(mine, 'this build   '));
      console.log(line(theirs, `${against}`));
      console.log(
        `  this ÷ that: ${(mine.cpuMs / theirs.cpuMs).toFixed(3)} (last boards ${(mine.last.cpu / theirs.last.cpu).toFixed(3)})`,
      );
    }
  }
}

async function main(): Promise<void> {
  if (process.env['BENCH_SCALE_BUILD'] !== '0') {
    const b = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
    if (b.status !== 0) throw new Error('npm run build failed');
  }
  if (Number.isInteger(COUNT_LOANS) && COUNT_LOANS > 0) await counted(COUNT_LOANS);
  if (AGAINST !== undefined && AGAINST !== '') {
    await sideBySide(AGAINST);
    return;
  }
  const runs: Run[] = [];
  for (const n of SIZES) {
    const r = await measure('sqlite', n, null);
    runs.push(r);
    report(r);
    console.log(`  CPU per loan: ${(r.cpuMs / r.loans).toFixed(2)} ms (target ≤ 8)`);
  }
  if (runs.length >= 2) {
    const small = runs[0] as Run;
    const large = runs[runs.length - 1] as Run;
    console.log(
      `CPU per loan ${large.loans} ÷ ${small.loans}: ${(large.cpuMs / large.loans / (small.cpuMs / small.loans)).toFixed(3)} (target ≤ 1.1), ` +
        `last boards: ${(large.last.cpu / small.last.cpu).toFixed(3)}`,
    );
  }
}

await main();
