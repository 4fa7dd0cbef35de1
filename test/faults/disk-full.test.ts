import { readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { readManifest } from '../../src/core/file/manifest.js';
import { safeId } from '../../src/core/safe-name.js';
import { TestImporter } from '../support/imaging-importer.js';
import { afterAll, describe, expect, it } from 'vitest';
import {
  expectExactlyOnce,
  fillDisk,
  gauge,
  logLines,
  mountTmpfs,
  readyzWhen,
  report,
  sleep,
  startSingle,
  tempFilesUnder,
  until,
  type SingleSet,
} from './support/harness.js';

/**
 * Disk full (issue 37): the file core's directory, then the state directory, on a small tmpfs the
 * test mounts (root only; skipped with the reason otherwise). Mid-run the disk is filled to the
 * last byte: boarding stops with one clear alert (/readyz `disk`, boarding_disk_full 1, one ALERT
 * line a minute), nothing is left half-written (packages verify, no temp file, the state database
 * intact), and once the filler is deleted boarding resumes by itself and every loan is boarded
 * exactly once. The recovery time (filler deleted → next acknowledgement) is printed.
 */
const LOANS = Number(process.env['FAULTS_DISK_LOANS'] ?? 120);
const RATE = { windowMs: 1000, readsPerWindow: 40, writesPerWindow: 10 };
const base = join(tmpdir(), `faults-disk-${process.pid}`);
const mounts: Array<{ umount(): void }> = [];
const sets: SingleSet[] = [];
afterAll(async () => {
  for (const s of sets) await s.close().catch(() => undefined);
  for (const m of mounts) m.umount();
  rmSync(base, { recursive: true, force: true });
});

const probe = mountTmpfs(join(base, 'probe'), 1);
const skip = 'skip' in probe ? probe.skip : null;
if ('umount' in probe) probe.umount();
if (skip) process.stderr.write(`\n[faults: disk full] SKIPPED: ${skip}\n\n`);

async function scenario(which: 'core.file.dir' | 'store.path'): Promise<void> {
  const mnt = join(base, which === 'core.file.dir' ? 'core' : 'state');
  const m = mountTmpfs(mnt, 24);
  if ('skip' in m) throw new Error(m.skip);
  mounts.push(m);
  const set = await startSingle({
    loans: LOANS,
    ...RATE,
    ...(which === 'core.file.dir' ? { coreDir: join(mnt, 'core') } : { stateDir: mnt }),
  });
  sets.push(set);
  const ctx = `${which} full (logs in ${set.logDir})`;
  set.replica.start();
  await until(
    `${ctx}: 15 loans acknowledged`,
    async () => ((await set.acked()) >= 15 ? true : undefined),
    60_000,
  );

  const filler = fillDisk(mnt);
  const filledAt = Date.now();
  const z = await readyzWhen(
    set.replica,
    `${ctx}: /readyz reports the full disk`,
    (r) => r.checks['disk']?.ok === false,
    20_000,
  );
  const detectMs = Date.now() - filledAt;
  expect(z.ready, ctx).toBe(false);
  // Nearly 0: a write cut short by ENOSPC removes its temp file and gives a few KiB back.
  expect(z.checks['disk']?.detail, ctx).toMatch(
    new RegExp(
      `^DISK FULL: ${which.replace('.', '\\.')} .* has [\\d.]+ (B|KiB) free \\(below boarding\\.minFreeDiskMb`,
    ),
  );
  expect(gauge((await set.replica.metrics()) ?? '', 'boarding_disk_full'), `${ctx}: boarding_disk_full`).toBe(
    1,
  );
  // Boarding has stopped: what was in flight settles, then no acknowledgement for a while.
  await sleep(3000);
  const stalled = await set.acked();
  await sleep(12_000);
  expect(await set.acked(), `${ctx}: boarding stopped while the disk is full`).toBe(stalled);
  expect(stalled, `${ctx}: loans left to board once space returns`).toBeLessThan(LOANS);
  // One alert, not one per cycle or per loan: the watch logs once a minute (the run is < 1 min).
  const alerts = logLines(set.logDir).filter((l) => l['alert'] === 'disk.full' && l['level'] === 50);
  expect(alerts.length, `${ctx}: ALERT lines while full`).toBe(1);
  expect(set.replica.running, `${ctx}: the daemon stays up`).toBe(true);
  if (which === 'core.file.dir')
    expect(tempFilesUnder(mnt), `${ctx}: temp files of cut-short writes`).toEqual([]);

  rmSync(filler);
  const freedAt = Date.now();
  const resumedAt = await until(
    `${ctx}: boarding resumes by itself`,
    async () => ((await set.acked()) > stalled ? Date.now() : undefined),
    60_000,
    50,
  );
  await until(
    `${ctx}: all ${LOANS} acknowledged`,
    async () => ((await set.acked()) >= LOANS ? true : undefined),
    120_000,
  );
  const after = await readyzWhen(set.replica, `${ctx}: /readyz ready again`, (r) => r.ready, 20_000);
  expect(after.checks['disk']?.ok, ctx).toBe(true);
  set.replica.signal('SIGTERM');
  expect(await set.replica.exited(), `${ctx}: SIGTERM`).toEqual({ code: 0, signal: null });
  // The state database went through ENOSPC mid-transaction (SQLITE_FULL): intact, no torn page.
  const db = new Database(set.dbPath, { readonly: true, fileMustExist: true });
  try {
    expect(db.pragma('integrity_check', { simple: true }), `${ctx}: state database integrity`).toBe('ok');
  } finally {
    db.close();
  }
  await expectExactlyOnce(set, ctx);
  report(`disk full: ${which}`, {
    loans: LOANS,
    ackedWhenFull: stalled,
    detectMs,
    recoveryMs: resumedAt - freedAt,
    alertLines: alerts.length,
  });
}

/** Acknowledged loans with a document in an imaging batch that is not sealed (no ready marker). */
function ackedWithoutFolder(dbPath: string): unknown[] {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare(
        `SELECT DISTINCT l.id, b.id AS batch, b.status FROM loans l
           JOIN imaging_documents d ON d.loan_id = l.id JOIN imaging_batches b ON b.id = d.batch_id
          WHERE l.state = 'acknowledged' AND b.status <> 'sealed'`,
      )
      .all();
  } finally {
    db.close();
  }
}

/**
 * imaging.dir (and its staging directory beside it) on a small tmpfs, a test importer draining it
 * like a DIP process. Filled to the last byte with the importer paused: boarding stops with the
 * disk alert naming imaging.dir, no loan is acknowledged without its folder published, the importer
 * never meets a folder with a marker that is not whole; space back (and the importer again), every
 * document of every loan is imported exactly once with the file core's sha256.
 */
async function imagingScenario(): Promise<void> {
  const loans = Math.min(LOANS, 60);
  const mnt = join(base, 'imaging');
  const m = mountTmpfs(mnt, 24);
  if ('skip' in m) throw new Error(m.skip);
  mounts.push(m);
  const imagingDir = join(mnt, 'dip');
  const set = await startSingle({
    loans,
    ...RATE,
    seed: 45,
    config: {
      imaging: {
        enabled: true,
        dir: imagingDir,
        layout: 'imaging/onbase-tagged.yaml',
        batch: { mode: 'loan' },
      },
    },
  });
  sets.push(set);
  const ctx = `imaging.dir full (logs in ${set.logDir})`;
  const importer = new TestImporter({
    dir: imagingDir,
    indexFile: 'index.txt',
    format: 'tagged',
    begin: 'BEGIN:',
    fileKeyword: '>>FullPath',
  });
  const problems = new Set<string>();
  let draining = true;
  const timer = setInterval(() => {
    if (!draining) return;
    try {
      importer.poll();
    } catch (err) {
      problems.add((err as Error).message);
    }
  }, 50);
  try {
    set.replica.start();
    await until(
      `${ctx}: 10 loans acknowledged`,
      async () => ((await set.acked()) >= 10 ? true : undefined),
      60_000,
    );

    draining = false;
    const filler = fillDisk(mnt);
    const z = await readyzWhen(
      set.replica,
      `${ctx}: /readyz reports the full disk`,
      (r) => r.checks['disk']?.ok === false,
      20_000,
    );
    expect(z.checks['disk']?.detail, ctx).toMatch(/^DISK FULL: imaging\.dir .* free/);
    expect(gauge((await set.replica.metrics()) ?? '', 'boarding_disk_full'), ctx).toBe(1);
    await sleep(3000);
    const stalled = await set.acked();
    await sleep(10_000);
    expect(await set.acked(), `${ctx}: boarding stopped while the disk is full`).toBe(stalled);
    expect(stalled, `${ctx}: loans left once space returns`).toBeLessThan(loans);
    expect(ackedWithoutFolder(set.dbPath), `${ctx}: acknowledged without a published folder`).toEqual([]);
    expect(set.replica.running, `${ctx}: the daemon stays up`).toBe(true);

    rmSync(filler);
    draining = true;
    await until(
      `${ctx}: all ${loans} acknowledged`,
      async () => ((await set.acked()) >= loans ? true : undefined),
      120_000,
    );
    await readyzWhen(set.replica, `${ctx}: /readyz ready again`, (r) => r.ready, 20_000);
    set.replica.signal('SIGTERM');
    expect(await set.replica.exited(), `${ctx}: SIGTERM`).toEqual({ code: 0, signal: null });
  } finally {
    clearInterval(timer);
  }
  importer.poll();
  expect([...problems], `${ctx}: what the importer met`).toEqual([]);
  expect(readdirSync(imagingDir), `${ctx}: folders left to import`).toEqual([]);
  expect(ackedWithoutFolder(set.dbPath), ctx).toEqual([]);
  await expectExactlyOnce(set, ctx);
  const byDoc = new Map<string, (typeof importer.imported)[number]>();
  for (const d of importer.imported) {
    const id = d.keywords['Platform Doc ID'] as string;
    expect(byDoc.has(id), `${ctx}: document ${id} imported twice`).toBe(false);
    byDoc.set(id, d);
  }
  let expected = 0;
  for (const id of set.released) {
    const manifest = await readManifest(join(set.coreDir, 'packages', safeId(id)));
    for (const d of manifest?.documents ?? []) {
      expected += 1;
      expect(byDoc.get(d.documentId)?.sha256, `${ctx}: ${id}/${d.documentId}`).toBe(d.sha256);
    }
  }
  expect(importer.imported, ctx).toHaveLength(expected);
  report('disk full: imaging.dir', { loans, documents: expected, folders: importer.batches.length });
}

describe.skipIf(skip !== null)('disk full', () => {
  it('on imaging.dir: boarding waits, no ack without its folder, nothing half-visible, every document imported once', async () => {
    await imagingScenario();
  });

  it('on core.file.dir: boarding stops with one alert, nothing half-written, resumes when space returns', async () => {
    await scenario('core.file.dir');
  });

  it('on the state directory: boarding stops with one alert, the state intact, resumes when space returns', async () => {
    await scenario('store.path');
  });
});
