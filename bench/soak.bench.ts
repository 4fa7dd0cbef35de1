/**
 * `npm run bench -- soak` (issue 37): a long `run` (the built dist/main.js, as a bank runs it) on
 * SQLite against the sandbox, with everything a day brings, compressed:
 *   - loans released all along (BENCH_SOAK_LOANS_PER_MINUTE, default 30) and boarded,
 *   - a signed webhook delivery every second (loan.funded / loan.status_changed of those loans),
 *   - cycles every 10 s (a bank's drain is every minute), the reconciliation every 3 minutes
 *     (nightly at a bank), the inbox prune after the first cycle and the daily seal job,
 * for BENCH_SOAK_MINUTES (default 30). Every minute it prints the daemon's RSS (all, anonymous,
 * file pages) and open file descriptors (each the mean of that minute's readings, one every 5 s),
 * state size (database + WAL) per loan and the inbox's rows; at the end the ratio of
 * the last to the first 10 minutes' means (the last ÷ first third on a run shorter than 30 min).
 * Goal: ≤ 1.1 for RSS, descriptors and state size per loan. Prints numbers; never fails on them.
 * BENCH_SOAK_NODE_ARGS passes node options to the daemon. BENCH_SOAK_MAIN soaks another build's main.js instead (a copy of the worktree's dist/ and
 * package.json in a directory of their own under it, so rebuilding dist/ meanwhile changes nothing).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Webhook } from 'standardwebhooks';
import { startTestPlatform, writeConnectorConfig } from '../test/integration/pipeline/harness.js';

const MINUTES = Number(process.env['BENCH_SOAK_MINUTES'] ?? 30);
const LOANS_PER_MINUTE = Number(process.env['BENCH_SOAK_LOANS_PER_MINUTE'] ?? 30);
const SECRET = `whsec_${Buffer.from('bench-secret-bench-secret-32byte').toString('base64')}`;
const GOAL = 1.1;
/** Node options for the daemon (e.g. "--max-semi-space-size=8" to see what V8's young generation adds to RSS). */
const NODE_ARGS = (process.env['BENCH_SOAK_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
/** How often RSS and descriptors are read (each minute's row is the mean of its readings). */
const PROBE_MS = 5_000;
/** Another build to soak (e.g. a copy of dist/, so rebuilding the worktree meanwhile does not touch it); default: build dist/. */
const MAIN = process.env['BENCH_SOAK_MAIN'] ?? null;

interface Sample {
  minute: number;
  acked: number;
  rssMb: number;
  /** RSS split (/proc/<pid>/status): anonymous memory (heap, malloc, SQLite's cache) and file pages (node's own code paged in). */
  anonMb: number;
  fileMb: number;
  fds: number;
  stateBytes: number;
  bytesPerLoan: number;
  inbox: number;
  reports: number;
  /** From the daemon's /metrics: V8 heap in use and memory held outside the heap (Buffers, SQLite). */
  heapMb: number;
  externalMb: number;
  /** The V8 young generation's reserved size: V8 grows it (up to 32 MiB) under allocation, and shrinks it when idle. */
  newSpaceMb: number;
}

/** A gauge's value from a Prometheus text page (NaN when absent). */
function gauge(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

async function heapFigures(
  admin: string | null,
): Promise<{ heapMb: number; externalMb: number; newSpaceMb: number }> {
  if (admin === null) return { heapMb: NaN, externalMb: NaN, newSpaceMb: NaN };
  try {
    const text = await (await fetch(`${admin}/metrics`)).text();
    return {
      heapMb: gauge(text, 'boarding_nodejs_heap_size_used_bytes') / 1048576,
      externalMb: gauge(text, 'boarding_nodejs_external_memory_bytes') / 1048576,
      newSpaceMb:
        Number(/^boarding_nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)$/m.exec(text)?.[1] ?? NaN) /
        1048576,
    };
  } catch {
    return { heapMb: NaN, externalMb: NaN, newSpaceMb: NaN };
  }
}

function statusKb(pid: number, field: 'VmRSS' | 'RssAnon' | 'RssFile'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

function mean(xs: number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

async function main(): Promise<void> {
  if (MAIN === null) {
    const build = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
    if (build.status !== 0) throw new Error('npm run build failed');
  }
  // The sandbox enforces the limits the connector is configured with (a budget that never limits here).
  const limits = { windowMs: 60_000, readsPerWindow: 3000, writesPerWindow: 1000 };
  const p = await startTestPlatform({ loans: 50, releaseRatio: 1, seed: 37, ...limits });
  const cfg = writeConnectorConfig(p, {
    ...limits,
    extra: {
      schedule: { drain: '*/10 * * * * *', reconcile: '*/3 * * * *', endpointCheck: '*/15 * * * *' },
      webhooks: { host: '127.0.0.1', port: 0, secrets: [SECRET] },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'warn' },
    },
  });
  const reportsDir = join(cfg.dir, 'reports');
  spawnSync('sh', ['-c', `printf 'reports:\\n  dir: ${reportsDir}\\n' >> '${cfg.configPath}'`]);
  let receiver: string | null = null;
  let admin: string | null = null;
  const child = spawn(
    process.execPath,
    [...NODE_ARGS, MAIN ?? join(process.cwd(), 'dist/main.js'), 'run', '--config', cfg.configPath],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } },
  );
  let errors = 0;
  let partial = '';
  child.stderr.on('data', (c: Buffer) => {
    const lines = (partial + c.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const rec = JSON.parse(line) as { msg?: string; url?: string; level?: number };
      if (rec.msg === 'webhook receiver listening' && rec.url) receiver = rec.url;
      if (rec.msg === 'admin listener (ops pages) listening' && rec.url) admin = rec.url;
      if ((rec.level ?? 0) >= 50) {
        errors += 1;
        if (errors <= 5) process.stderr.write(`daemon error: ${line.slice(0, 400)}\n`);
      }
    }
  });
  const pid = child.pid as number;
  const released: string[] = [];
  const timers: NodeJS.Timeout[] = [];
  const wh = new Webhook(SECRET);
  let delivered = 0;
  let refused = 0;
  const deliver = async (): Promise<void> => {
    if (receiver === null || released.length === 0) return;
    const loanId = released[Math.floor(Math.random() * released.length)]!;
    const id = `msg_${randomBytes(12).toString('hex')}`;
    const now = new Date();
    const type = Math.random() < 0.5 ? 'loan.funded' : 'loan.status_changed';
    const body = JSON.stringify({
      id: `evt_${id}`,
      type,
      createdAt: now.toISOString(),
      data: { loanId, fundedAt: now.toISOString(), status: 'funded' },
    });
    try {
      // The receiver logs its full address (…/webhooks/platform).
      const res = await fetch(receiver, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': wh.sign(id, now, body),
        },
        body,
      });
      if (res.ok) delivered += 1;
      else {
        refused += 1;
        if (refused <= 3)
          process.stderr.write(`webhook refused: ${res.status} ${(await res.text()).slice(0, 300)}\n`);
      }
    } catch {
      refused += 1;
    }
  };
  const release = async (): Promise<void> => {
    try {
      const r = (await p.admin('POST', '/loans', { count: 1, release: true })) as { ids: string[] };
      released.push(...r.ids);
    } catch (err) {
      process.stderr.write(`release failed: ${String(err)}\n`);
    }
  };
  const samples: Sample[] = [];
  // RSS and descriptors saw-tooth within a minute (the heap grows to a collection, a reconciliation
  // comes and goes): one reading a minute aliases that, so they are read every PROBE_MS and each
  // minute's row is the mean of its readings.
  let probes: Array<{ rss: number; anon: number; file: number; fds: number }> = [];
  const probe = (): void => {
    try {
      probes.push({
        rss: statusKb(pid, 'VmRSS') / 1024,
        anon: statusKb(pid, 'RssAnon') / 1024,
        file: statusKb(pid, 'RssFile') / 1024,
        fds: readdirSync(`/proc/${pid}/fd`).length,
      });
    } catch {
      // The daemon is gone: the minute's check says so.
    }
  };
  const t0 = Date.now();
  try {
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    released.push(...list.data.map((l) => l.id));
    timers.push(setInterval(() => void deliver(), 1000));
    timers.push(setInterval(probe, PROBE_MS));
    timers.push(setInterval(() => void release(), Math.max(100, Math.round(60_000 / LOANS_PER_MINUTE))));
    process.stdout.write(
      `soak: ${MINUTES} min, ${LOANS_PER_MINUTE} loans/min released, 1 webhook/s, cycles every 10 s, reconcile every 3 min (state in ${cfg.dir})\n`,
    );
    process.stdout.write(
      'min  acked  rssMB  anonMB  fileMB    fds  stateKB  bytes/loan  inbox  reports  heapMB  extMB  newMB  load\n',
    );
    for (let minute = 1; minute <= MINUTES; minute++) {
      await new Promise((r) => setTimeout(r, t0 + minute * 60_000 - Date.now()));
      if (child.exitCode !== null) throw new Error(`the daemon exited with ${child.exitCode}`);
      const acked = Object.keys((await p.counters()).acks).length;
      const stateBytes = fileSize(cfg.dbPath) + fileSize(`${cfg.dbPath}-wal`);
      const db = new Database(cfg.dbPath, { readonly: true, fileMustExist: true });
      let inbox = 0;
      try {
        inbox = (db.prepare('SELECT COUNT(*) AS n FROM webhook_inbox').get() as { n: number }).n;
      } finally {
        db.close();
      }
      let reports = 0;
      try {
        reports = readdirSync(reportsDir).length;
      } catch {
        reports = 0;
      }
      probe();
      const minuteProbes = probes;
      probes = [];
      const s: Sample = {
        minute,
        acked,
        rssMb: mean(minuteProbes.map((x) => x.rss)),
        anonMb: mean(minuteProbes.map((x) => x.anon)),
        fileMb: mean(minuteProbes.map((x) => x.file)),
        fds: mean(minuteProbes.map((x) => x.fds)),
        stateBytes,
        bytesPerLoan: acked > 0 ? stateBytes / acked : 0,
        inbox,
        reports,
        ...(await heapFigures(admin)),
      };
      samples.push(s);
      process.stdout.write(
        `${String(minute).padStart(3)}  ${String(acked).padStart(5)}  ${s.rssMb.toFixed(1).padStart(5)}  ${s.anonMb.toFixed(1).padStart(6)}  ${s.fileMb.toFixed(1).padStart(6)}  ${s.fds.toFixed(1).padStart(5)}  ${String(Math.round(stateBytes / 1024)).padStart(7)}  ${String(Math.round(s.bytesPerLoan)).padStart(10)}  ${String(inbox).padStart(5)}  ${String(reports).padStart(7)}  ${s.heapMb.toFixed(1).padStart(6)}  ${s.externalMb.toFixed(1).padStart(5)}  ${s.newSpaceMb.toFixed(0).padStart(5)}  ${loadavg()[0]?.toFixed(1) ?? '?'}\n`,
      );
    }
  } finally {
    for (const t of timers) clearInterval(t);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    await p.close();
  }
  const span = samples.length >= 30 ? 10 : Math.max(1, Math.floor(samples.length / 3));
  const first = samples.slice(0, span);
  const last = samples.slice(-span);
  const ratio = (f: (s: Sample) => number): number => mean(last.map(f)) / mean(first.map(f));
  const r = {
    rss: ratio((s) => s.rssMb),
    fds: ratio((s) => s.fds),
    bytesPerLoan: ratio((s) => s.bytesPerLoan),
    heap: ratio((s) => s.heapMb),
    anon: ratio((s) => s.anonMb),
    file: ratio((s) => s.fileMb),
  };
  const verdict = (x: number): string => (x <= GOAL ? 'flat' : 'GROWS');
  // The state's growth per loan boarded within each span (bytes/loan above also carries the
  // empty database's fixed size, which the first minutes are dominated by).
  const marginal = (from: number, to: number): number => {
    const a = samples[Math.max(0, from)];
    const b = samples[Math.min(samples.length - 1, to)];
    return a && b && b.acked > a.acked ? (b.stateBytes - a.stateBytes) / (b.acked - a.acked) : NaN;
  };
  const growth = { first: marginal(0, span), last: marginal(samples.length - 1 - span, samples.length - 1) };
  process.stdout.write(
    `soak ${samples.length} min: webhooks delivered ${delivered} (refused ${refused}), loans acknowledged ${samples.at(-1)?.acked ?? 0} of ${released.length} released, daemon error lines ${errors}\n` +
      `last ÷ first ${span} min: RSS ${r.rss.toFixed(3)} (${verdict(r.rss)}), fds ${r.fds.toFixed(3)} (${verdict(r.fds)}), state bytes/loan ${r.bytesPerLoan.toFixed(3)} (${verdict(r.bytesPerLoan)}) — goal ≤ ${GOAL}; V8 heap in use ${r.heap.toFixed(3)}; RSS anonymous ${r.anon.toFixed(3)}, file pages ${r.file.toFixed(3)}\n` +
      (samples.length >= 3 * span
        ? `warm-up left out: last ÷ middle ${span} min: RSS ${(mean(last.map((x) => x.rssMb)) / mean(samples.slice(span, 2 * span).map((x) => x.rssMb))).toFixed(3)}, ` +
          `fds ${(mean(last.map((x) => x.fds)) / mean(samples.slice(span, 2 * span).map((x) => x.fds))).toFixed(3)} ` +
          `(V8 sizes its young generation to the allocation rate in the first minutes: newMB)\n`
        : '') +
      `state growth per loan boarded (database + WAL, inbox rows included): first ${span} min ${Math.round(growth.first)} B, last ${span} min ${Math.round(growth.last)} B, ratio ${(growth.last / growth.first).toFixed(3)}\n` +
      `machine: ${cpus().length} cores, load average (1 min) at the end ${loadavg()[0]?.toFixed(1) ?? '?'} (other load skews the figures)\n`,
  );
}

await main();
