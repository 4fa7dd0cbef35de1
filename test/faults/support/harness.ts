/**
 * The fault suite's common parts (issue 37, `npm run test:faults`): one `boarding-connector run`
 * (dist/main.js, as a bank runs it) on SQLite against the sandbox, or the failover harness's
 * replicas on PostgreSQL (test/support/failover.ts); the checks every scenario ends with (every
 * released loan boarded exactly once: one core package, one first-board batch line and one
 * acknowledgement each, 0 × 429); and the recovery time each scenario prints.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { expect } from 'vitest';
import { verifyPackage } from '../../../src/core/file/manifest.js';
import { safeId } from '../../../src/core/safe-name.js';
import { startTestPlatform, type TestPlatform } from '../../integration/pipeline/harness.js';
import { coreRecords, Replica, sealOpenBatches, until, type Readyz } from '../../support/failover.js';
import type { SandboxOptions } from '../../../src/sandbox/index.js';

export { Replica, until, sleep, type Readyz } from '../../support/failover.js';

const IO_EXPR = `expr: 'paymentFrequency = "irregular payments" ? null : $interestOnlyPeriods(monthsInterestOnly, paymentFrequency)'`;

/** A bank's fixed copy of the generic set, so every generated loan maps (as the crash test does). */
export function mappingsCopy(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'faults-mappings-')), 'generic');
  spawnSync('cp', ['-r', join(process.cwd(), 'mappings/generic'), dir]);
  const file = join(dir, 'mapping.yaml');
  writeFileSync(file, readFileSync(file, 'utf8').replace(IO_EXPR, `expr: 'null'`));
  return dir;
}

export interface SingleOptions {
  loans: number;
  seed?: number;
  windowMs: number;
  readsPerWindow: number;
  writesPerWindow: number;
  sandbox?: Partial<SandboxOptions>;
  /** Where the state file goes (default: the set's temp dir). */
  stateDir?: string;
  /** core.file.dir (default: the set's temp dir). */
  coreDir?: string;
  /** Merged over the defaults (top-level keys replace). */
  config?: Record<string, unknown>;
}

export interface SingleSet {
  platform: TestPlatform;
  replica: Replica;
  released: string[];
  dir: string;
  logDir: string;
  coreDir: string;
  dbPath: string;
  configPath: string;
  acked(): Promise<number>;
  close(): Promise<void>;
}

export async function startSingle(o: SingleOptions): Promise<SingleSet> {
  const platform = await startTestPlatform({
    loans: o.loans,
    releaseRatio: 1,
    seed: o.seed ?? 11,
    windowMs: o.windowMs,
    readsPerWindow: o.readsPerWindow,
    writesPerWindow: o.writesPerWindow,
    ...o.sandbox,
  });
  const list = (await platform.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
  const released = list.data.map((l) => l.id);
  const dir = mkdtempSync(join(tmpdir(), 'faults-'));
  const logDir = join(dir, 'logs');
  mkdirSync(logDir);
  const coreDir = o.coreDir ?? join(dir, 'core');
  const dbPath = join(o.stateDir ?? dir, 'state.sqlite');
  const config = {
    platform: {
      baseUrl: platform.sandbox.baseUrl,
      apiKey: platform.apiKey,
      environment: 'staging',
      rateLimit: {
        windowMs: o.windowMs,
        readsPerWindow: o.readsPerWindow,
        writesPerWindow: o.writesPerWindow,
      },
    },
    store: { path: dbPath },
    core: { adapter: 'file', file: { dir: coreDir } },
    mappings: { dir: mappingsCopy() },
    schedule: { drain: '*/2 * * * * *' },
    boarding: {
      concurrency: 4,
      retryBaseMs: 200,
      retryMaxMs: 2000,
      maxAttempts: 1000,
      shutdownTimeoutMs: 5000,
      minFreeDiskMb: 1,
      documentHosts: { allow: ['127.0.0.1'] },
    },
    webhooks: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    ...o.config,
  };
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, stringify(config));
  const replica = new Replica('a', configPath, logDir);
  return {
    platform,
    replica,
    released,
    dir,
    logDir,
    coreDir,
    dbPath,
    configPath,
    acked: async () => Object.keys((await platform.counters()).acks).length,
    async close() {
      replica.signal('SIGKILL');
      await replica.exited();
      await platform.close();
    },
  };
}

/** Waits until /readyz answers with `pred` true; returns that answer. */
export function readyzWhen(
  r: Replica,
  what: string,
  pred: (z: Readyz) => boolean,
  timeoutMs = 60_000,
): Promise<Readyz> {
  return until(
    what,
    async () => {
      const z = await r.readyz();
      return z && pred(z) ? z : undefined;
    },
    timeoutMs,
    100,
  );
}

/** A gauge's value from a Prometheus text page (first sample matching the name and labels). */
export function gauge(metrics: string, name: string, labels = ''): number | null {
  const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const hit = new RegExp(`^${esc(name)}${labels ? esc(`{${labels}}`) : ''} (\\S+)$`, 'm').exec(metrics);
  return hit ? Number(hit[1]) : null;
}

/** JSON log lines of every run of a replica, parsed (non-JSON lines dropped). */
export function logLines(logDir: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const f of readdirSync(logDir).sort()) {
    for (const line of readFileSync(join(logDir, f), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // a line cut by a kill
      }
    }
  }
  return out;
}

/** Files that writes cut short would leave (durable-fs temp files) anywhere under dir. */
export function tempFilesUnder(dir: string): string[] {
  const r = spawnSync('find', [dir, '-name', '.tmp-*'], { encoding: 'utf8' });
  return r.stdout.split('\n').filter((l) => l !== '');
}

/**
 * The end of every scenario: each released loan acknowledged exactly once on the platform, no 429,
 * one complete (verified) package per loan, and after a seal one first-board line per loan across
 * the sealed batches. `label` goes into every message.
 */
export async function expectExactlyOnce(
  p: {
    platform: TestPlatform;
    released: string[];
    coreDir: string;
    configPath: string;
    replicas?: Replica[];
    replica?: Replica;
  },
  label: string,
): Promise<void> {
  const c = await p.platform.counters();
  expect(c.rateLimited, `${label}: 429s`).toBe(0);
  expect(c.duplicateAcks, `${label}: duplicate acks`).toEqual({});
  const missing = p.released.filter((id) => c.acks[id] !== 1);
  expect(missing, `${label}: loans not acknowledged exactly once`).toEqual([]);
  // With the replicas' environment: on PostgreSQL the store's password is BOARDING_STORE_PASSWORD.
  const seal = await sealOpenBatches(p.configPath, p.replicas?.[0]?.env ?? p.replica?.env ?? {});
  expect(seal.code, `${label}: batches seal: ${seal.stderr}`).toBe(0);
  const core = coreRecords(p.coreDir);
  expect(core.packages, `${label}: one package per loan`).toEqual([...p.released].map(safeId).sort());
  for (const id of core.packages) {
    const v = await verifyPackage(join(p.coreDir, 'packages', id));
    expect(v.problems, `${label}: package ${id}`).toEqual([]);
  }
  expect([...core.firstBoardLines.keys()].sort(), `${label}: every loan in a sealed batch`).toEqual(
    [...p.released].sort(),
  );
  expect(
    [...core.firstBoardLines].filter(([, k]) => k !== 1),
    `${label}: loans with two first-board lines`,
  ).toEqual([]);
  expect(tempFilesUnder(p.coreDir), `${label}: temp files left in the core`).toEqual([]);
}

/** Prints one line the CI log keeps: the scenario's recovery time and figures. */
export function report(scenario: string, figures: Record<string, unknown>): void {
  process.stdout.write(`[faults] ${scenario}: ${JSON.stringify(figures)}\n`);
}

/** Mounts a tmpfs of sizeMb at dir (root only); returns the unmount, or why it cannot. */
export function mountTmpfs(dir: string, sizeMb: number): { umount(): void } | { skip: string } {
  if (process.getuid?.() !== 0)
    return {
      skip: 'not root: the disk-full scenario mounts a small tmpfs (run the fault suite as root, as CI does)',
    };
  mkdirSync(dir, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m,mode=0755`, 'tmpfs', dir], {
    encoding: 'utf8',
  });
  if (r.status !== 0)
    return {
      skip: `mount -t tmpfs failed (${r.status}): ${r.stderr.trim()} (a container without CAP_SYS_ADMIN cannot mount)`,
    };
  return {
    umount() {
      spawnSync('umount', ['-l', dir]);
    },
  };
}

/** Fills the file system under dir to the last byte (dd until ENOSPC); returns the filler's path. */
export function fillDisk(dir: string): string {
  const filler = join(dir, 'filler.bin');
  spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'ignore' });
  return filler;
}
