/**
 * File core batches: boards N loans (default 5,000) into one open batch and prints the CPU time
 * per loan of the first 1,000 and of the last 1,000 boards, and their ratio (flat cost: ≈ 1; the
 * old day-file regeneration grew with every row). Then seals the batch once and prints that time.
 *
 * Loans are the generic set's fixture mapped once and renumbered, boarded through FileCore with
 * the shipped layout (CSV files + the fixed-width LNLOAD.DAT), the state database on disk.
 * Runs twice: with SQLite's secure_delete off (before: deleted content stayed in free pages) and
 * on (what openDatabase sets: a seal's cleared lines are zeroed), and prints both, the seal
 * including its WAL truncation. Never fails on timing: it prints figures.
 */
import { FileBatchStore } from '../src/store/file-batches.js';
import { clockReading } from '../test/support/fake-clock.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileBatches } from '../src/core/file/batches.js';
import { cutoffRule } from '../src/core/file/cutoff.js';
import { FileCore } from '../src/core/file/file-core.js';
import type { BoardingPackage } from '../src/core/port.js';
import { silentLogger } from '../src/lib/logger.js';
import { loadLayout, loadMapper } from '../src/mapping-sets/loader.js';
import type { MappedRecord } from '../src/mapping/types.js';
import { openDatabase } from '../src/store/sqlite/db.js';
import { sqliteStore } from '../src/store/sqlite/store.js';

const LOANS = Number(process.env['BENCH_LOANS'] ?? 5000);
const SLICE = Math.min(1000, Math.floor(LOANS / 2));
const GENERIC = join(process.cwd(), 'mappings/generic');

async function run(secureDelete: boolean): Promise<void> {
  const input = JSON.parse(readFileSync(join(GENERIC, 'fixtures/business-monthly-fixed/input.json'), 'utf8'));
  const mapper = await loadMapper(GENERIC, { timeZone: 'America/Chicago' });
  const outcome = await mapper.map(input);
  if (!outcome.ok) throw new Error('the fixture does not map');
  const template = JSON.stringify(outcome.records);
  const loanId = input.loan.id as string;
  const layout = loadLayout(GENERIC)!;

  const dir = mkdtempSync(join(tmpdir(), 'batches-bench-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  db.pragma(`secure_delete = ${secureDelete ? 'ON' : 'OFF'}`);
  console.log(`--- secure_delete ${secureDelete ? 'ON (now)' : 'OFF (before)'} ---`);
  let now = Date.parse('2025-03-14T15:00:00Z');
  const clock = clockReading(() => now);
  const batches = new FileBatches({
    root: join(dir, 'core', 'batches'),
    store: new FileBatchStore(sqliteStore(db)),
    layout: () => layout,
    rule: cutoffRule({ cutoff: '18:00', timeZone: 'America/Chicago' }),
    triggerFile: 'READY',
    logger: silentLogger(),
    clock,
  });
  const core = new FileCore({
    dir: join(dir, 'core'),
    batches,
    timeZone: 'America/Chicago',
    logger: silentLogger(),
    clock,
  });
  try {
    const perLoan: number[] = [];
    for (let i = 0; i < LOANS; i += 1) {
      const id = `loan_${String(i).padStart(6, '0')}`;
      const records = JSON.parse(template.replaceAll(loanId, id)) as MappedRecord[];
      const pkg: BoardingPackage = {
        loanId: id,
        loanNumber: null,
        mappingVersion: mapper.version,
        connectorVersion: 'bench',
        records,
        documents: [],
        fetchDocument: () => Promise.reject(new Error('no documents')),
        source: { centsAmount: 125000050 + i },
      };
      const t0 = process.cpuUsage();
      await core.board(pkg);
      const d = process.cpuUsage(t0);
      perLoan.push((d.user + d.system) / 1000);
      now += 1;
    }
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    const first = mean(perLoan.slice(0, SLICE));
    const last = mean(perLoan.slice(-SLICE));
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    const sealed = await batches.sealNow('bench', 'bench');
    const sealCpu = process.cpuUsage(c0);
    const sealMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const counts = await batches.store.counts(sealed!);
    console.log(
      `loans boarded into one batch: ${LOANS} (batch ${sealed}, ${counts.loans} loans, ${counts.records} records)`,
    );
    console.log(`CPU per board, first ${SLICE}: ${first.toFixed(3)} ms`);
    console.log(`CPU per board, last ${SLICE}:  ${last.toFixed(3)} ms`);
    console.log(`ratio last/first: ${(last / first).toFixed(2)} (target ≤ 1.2)`);
    console.log(
      `seal (files written once): ${sealMs.toFixed(0)} ms wall, ${((sealCpu.user + sealCpu.system) / 1000).toFixed(0)} ms CPU`,
    );
    // Flat: per loan the same at any BENCH_LOANS (each row is read and decrypted once; issue 33).
    console.log(`seal CPU per loan: ${((sealCpu.user + sealCpu.system) / 1000 / LOANS).toFixed(3)} ms`);
  } finally {
    await core.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await run(false);
await run(true);
