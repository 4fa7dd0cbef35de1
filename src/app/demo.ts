import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { fatalSentence } from '../pipeline/board-loan.js';
import { loadConfig } from '../config/load.js';
import { SHIPPED_GENERIC_MAPPINGS } from '../config/schema.js';
import type { Config } from '../config/schema.js';
import { UsageError, errorMessage } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { reconcileNow as reconcile } from '../ops/reconcile.js';
import { PERMISSIONS } from '../sandbox/keys.js';
import {
  shippedMappingsFor,
  type CoreSimulatorName,
  type RunningCoreSimulator,
} from '../sandbox/cores/index.js';
import { WEBHOOK_EVENTS } from '../contract/schemas.js';
import { WEBHOOK_PATH } from '../webhooks/path.js';
import { registerEndpoint } from '../platform/endpoint/registration.js';
import { CONNECTOR_VERSION } from '../version.js';
import { UNACKNOWLEDGED_STATES } from '../store/loan-states.js';
import { buildRuntime, type BoardingRuntime } from './runtime.js';
import type { ConnectorDaemon } from './daemon.js';

/**
 * `demo` (what `npm start` runs): the Loan Platform sandbox and the connector daemon in one
 * process, on embedded defaults, so a new user sees loans board within a minute. Its state lives
 * under --dir (default ./var/demo) and is wiped at start: the sandbox is in memory and makes the
 * same loan ids every run, so yesterday's state would only describe loans that no longer exist.
 */

export interface DemoOptions {
  dir: string;
  /** Between two scripted sandbox steps (a hidden option: tests run the script quickly). */
  stepMs: number;
  loans: number;
  exitAfter?: number;
  reportAfter: number;
  windowMs: number;
  /** Board into this core simulator (held to its vendor's published contract) instead of the file core. */
  core?: CoreSimulatorName;
}

const DEMO_MARKER = '.boarding-connector-demo';

/** The report written when the demo stops gives up after this long (the sandbox's read budget may be spent). */
const FINAL_REPORT_TIMEOUT_MS = 30_000;

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r, j) => {
    srv.once('error', j);
    srv.listen(0, '127.0.0.1', () => r());
  });
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/**
 * The demo starts fresh, but only ever wipes a directory it made itself: `--dir .` or a typo
 * pointing at real data must not be deleted.
 */
export function prepareDemoDir(dir: string): void {
  if (existsSync(dir) && readdirSync(dir).length > 0) {
    if (!existsSync(`${dir}/${DEMO_MARKER}`)) {
      throw new UsageError(
        `--dir ${dir}: exists and was not made by the demo (no ` +
          `${DEMO_MARKER}); refusing to wipe it. Pick an empty or new directory.`,
      );
    }
    rmSync(dir, { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/${DEMO_MARKER}`, 'made by `boarding-connector demo`; wiped at its next start\n');
}

/** A console user of the demo: its password is made per run and printed (the hash goes into the config). */
export interface DemoUser {
  name: string;
  password: string;
  roles: Array<'viewer' | 'operator' | 'approver'>;
}

/**
 * The demo's console users: an operator who asks and an approver who approves, so four eyes can
 * be tried. New passwords every run (the demo's state is wiped at start; nothing to keep).
 */
export function demoUsers(): DemoUser[] {
  const pw = (): string => randomBytes(12).toString('base64url');
  return [
    { name: 'demo-operator', password: pw(), roles: ['viewer', 'operator'] },
    { name: 'demo-approver', password: pw(), roles: ['viewer', 'approver'] },
  ];
}

/** The demo's imaging folder (file core only: the generic set ships the imaging layouts). */
export function demoImagingDir(dir: string): string {
  return `${dir}/imaging/dip`;
}

/**
 * The demo's `core:` and `mappings:` lines: the file core under --dir with the generic set, or the
 * core simulator's own block with the set shipped for it. The bank customer extract is the file
 * core's (Fineract and Mambu are searched for existing customers instead).
 */
function coreLines(dir: string, core: RunningCoreSimulator | null): string[] {
  const q = (s: string): string => JSON.stringify(s);
  if (core === null)
    return [
      `core: { adapter: file, file: { dir: ${q(`${dir}/core`)} } }`,
      `mappings: { dir: ${q(SHIPPED_GENERIC_MAPPINGS)}, allowLast4Tin: true }`,
      `customers: { tinHashKey: ${q(randomBytes(24).toString('base64url'))}, ` +
        `extract: { path: ${q(`${dir}/customers.csv`)}, maxAgeHours: 36 } }`,
      // Every document to an imaging folder too, in the documented OnBase layout (docs/imaging.md).
      `imaging: { enabled: true, dir: ${q(demoImagingDir(dir))}, layout: imaging/onbase-tagged.yaml, ` +
        'batch: { mode: loan } }',
    ];
  return [
    `core: ${JSON.stringify(core.coreBlock())}`,
    `mappings: { dir: ${q(shippedMappingsFor(core.name))}, allowLast4Tin: true }`,
    `customers: { tinHashKey: ${q(randomBytes(24).toString('base64url'))} }`,
  ];
}

function demoConfig(
  o: DemoOptions,
  core: RunningCoreSimulator | null,
  sandbox: { baseUrl: string; apiKey: string },
  listen: { port: number; adminPort: number },
  users: ReadonlyArray<{ name: string; passwordHash: string; roles: readonly string[] }>,
  logLevel: string,
): Config {
  const { port, adminPort } = listen;
  const dir = resolve(o.dir);
  const q = (s: string): string => JSON.stringify(s);
  return loadConfig({
    env: {},
    filePath: 'demo defaults',
    fileText: [
      'platform:',
      `  baseUrl: ${q(sandbox.baseUrl)}`,
      `  apiKey: ${q(sandbox.apiKey)}`,
      '  environment: development',
      // The sandbox runs the documented budgets (100 reads / 30 writes) on a shorter window so
      // the demo moves; the connector is told the same window.
      `  rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: ${o.windowMs} }`,
      `store: { path: ${q(`${dir}/state.sqlite`)} }`,
      `webhooks: { host: 127.0.0.1, port: ${port}, publicUrl: ${q(`http://127.0.0.1:${port}${WEBHOOK_PATH}`)}, ` +
        `debounceMs: 500 }`,
      `admin: { host: 127.0.0.1, port: ${adminPort} }`,
      // The demo's key reads full tax ids, so customer match can find repeat borrowers and the
      // customers of the bank's extract by tax id (a masked one would still board: allowLast4Tin).
      // A fresh tax-id hash key each run: the demo wipes its state database at start.
      ...coreLines(dir, core),
      "schedule: { drain: '*/15 * * * * *', reconcile: '*/5 * * * *', endpointCheck: '*/5 * * * *' }",
      'boarding: { retryBaseMs: 2000, retryMaxMs: 30000, shutdownTimeoutMs: 10000 }',
      `reports: { dir: ${q(`${dir}/reports`)} }`,
      `log: { level: ${logLevel} }`,
      // The ops console on the admin listener, so the report's /console/loans/… links answer.
      `console: { users: ${JSON.stringify(users)} }`,
      '',
    ].join('\n'),
  });
}

type Admin = (path: string, body?: unknown) => Promise<unknown>;

/**
 * The demo's scripted minute: release, fund and add loans on the sandbox's admin API. A platform
 * id is opaque (`/ % ?`, spaces and non-ASCII included: the sandbox's default data has them), so
 * it goes into a path as one percent-encoded segment (regression: 7 of 10 steps failed with 404
 * on every run, seed 1 always picking such an id).
 */
export function demoScript(admin: Admin): Array<() => Promise<string>> {
  const script: Array<() => Promise<string>> = [];
  const unreleased = async (): Promise<Array<{ id: string; status: string }>> =>
    (
      (await admin('/loans?released=false')) as {
        data: Array<{ id: string; status: string; archived: boolean }>;
      }
    ).data.filter((l) => !l.archived);
  for (let i = 0; i < 10; i++) {
    script.push(async () => {
      const pick = (await unreleased())[0];
      if (!pick) return 'nothing left to release';
      const loan = `/loans/${encodeURIComponent(pick.id)}`;
      await admin(`${loan}/release`, {});
      if (i % 2 === 0) {
        // Funding emits loan.funded: the receiver asks for an early cycle.
        await admin(`${loan}/fund`, {});
        return `released and funded ${pick.id}`;
      }
      return `released ${pick.id}`;
    });
    if (i === 4) {
      script.push(async () => {
        const r = (await admin('/loans', { count: 3, release: true })) as { ids: string[] };
        return `3 new loans released: ${r.ids.join(', ')}`;
      });
    }
  }
  return script;
}

/** What the demo needs from the command that runs it: where to print, the clock, stop and cleanup. */
export interface DemoIo {
  env: Record<string, string | undefined>;
  clock: Clock;
  shutdown: AbortSignal;
  onClose(fn: () => Promise<void> | void): void;
  onHangup(fn: () => void): () => void;
  /** A line on stdout. */
  say(text: string): void;
  /** The live status line (one updating line on a terminal) and lines printed above it. */
  status: { show(text: string): void; println(text: string): void };
}

interface DemoStack {
  dir: string;
  config: Config;
  logger: Logger;
  rt: BoardingRuntime;
  daemon: ConnectorDaemon;
  sandboxUrls: { baseUrl: string; adminUrl: string };
  /** The core simulator (`--core`), or null for the file core under --dir. */
  core: RunningCoreSimulator | null;
  port: number;
  adminPort: number;
  /** The console's users with their passwords of this run (printed in the banner). */
  users: DemoUser[];
  /** Cycles the daemon ran; `onFirstCycle` is called after the first. */
  cycles(): number;
  onFirstCycle(fn: () => void): void;
}

/** The sandbox, a runtime on the demo's config and the daemon (not started yet), closed with the command. */
async function buildDemoStack(io: DemoIo, opts: DemoOptions): Promise<DemoStack> {
  const dir = resolve(opts.dir);
  // Logs go to a file so the status line stays readable; LOG_LEVEL=debug etc. still applies.
  const logLevel = io.env['LOG_LEVEL'] ?? 'info';
  const logFile = pino.destination({ dest: `${dir}/demo.log`, sync: false, mkdir: true });
  const logger: Logger = createLogger({ level: logLevel, destination: logFile, pretty: false });
  io.onClose(() => {
    try {
      logFile.flushSync();
    } catch {
      // Not open yet (a very early stop): nothing was buffered.
    }
  });
  // Loaded here: other commands never load the sandbox's and the daemon's HTTP stack.
  const [{ startSandbox }, { createConnectorDaemon }, { consolePasswordHash }] = await Promise.all([
    import('../sandbox/index.js'),
    import('./daemon.js'),
    import('./console.js'),
  ]);
  const sandbox = await startSandbox({
    port: 0,
    loans: opts.loans,
    allowLoopbackWebhooks: true,
    windowMs: opts.windowMs,
    webhookRetry: { attempts: 5, baseMs: 500 },
    // Repeat borrowers at a realistic share, and a customer extract in which some are the bank's.
    repeatBorrowers: 0.2,
    customerExtract: { path: `${dir}/customers.csv`, existingShare: 0.3 },
    apiKeyPermissions: [...PERMISSIONS],
    logger: logger.child({ component: 'sandbox' }),
  });
  io.onClose(() => sandbox.close());
  const port = await freePort();
  const adminPort = await freePort();
  const users = demoUsers();
  const hashed = await Promise.all(
    users.map(async (u) => ({
      name: u.name,
      passwordHash: await consolePasswordHash(u.password),
      roles: u.roles,
    })),
  );
  let core: RunningCoreSimulator | null = null;
  if (opts.core !== undefined) {
    const { startCoreSimulator } = await import('../sandbox/cores/index.js');
    const sim = await startCoreSimulator(opts.core);
    io.onClose(() => sim.close());
    core = sim;
  }
  const config = demoConfig(opts, core, sandbox, { port, adminPort }, hashed, logLevel);
  const rt = await buildRuntime(config, logger, { clock: io.clock });
  io.onClose(() => rt.close());

  // Register our receiver on the sandbox; the secret comes back once and goes straight into the
  // receiver's config (never printed or logged).
  const url = `http://127.0.0.1:${port}${WEBHOOK_PATH}`;
  const reg = await registerEndpoint(
    rt.platform,
    rt.store.keys,
    { url, name: 'boarding-connector demo', events: [...WEBHOOK_EVENTS] },
    { clock: rt.clock },
  );
  if (reg.kind !== 'created' || typeof reg.endpoint.secret !== 'string')
    throw new Error('the sandbox did not return a webhook secret');
  const secret = reg.endpoint.secret;

  // The same composition as `run` (src/app/daemon.ts), over a runtime whose config carries the
  // secret just issued.
  const live: BoardingRuntime = {
    ...rt,
    config: { ...config, webhooks: { ...config.webhooks, secrets: [secret] } },
  };
  let cycles = 0;
  let firstCycleDone = (): void => undefined;
  const daemon = createConnectorDaemon(live, {
    onHangup: (fn) => io.onHangup(fn),
    onCycle: () => {
      cycles += 1;
      // The first report as soon as there is something to reconcile, not a minute in.
      if (cycles === 1) firstCycleDone();
    },
  });
  return {
    dir,
    config,
    logger,
    rt,
    daemon,
    sandboxUrls: { baseUrl: sandbox.baseUrl, adminUrl: sandbox.adminUrl },
    core,
    port,
    adminPort,
    users,
    cycles: () => cycles,
    onFirstCycle: (fn) => {
      firstCycleDone = fn;
      if (cycles >= 1) fn();
    },
  };
}

/** Reconciliations of the demo, one at a time (a report asked for while one runs waits for it). */
function demoReports(io: DemoIo, s: DemoStack, base: string) {
  let reports = 0;
  let reconciling: Promise<void> = Promise.resolve();
  const reconcileNow = (signal: AbortSignal, when: string): Promise<void> => {
    const run = async (): Promise<void> => {
      try {
        const r = await reconcile(
          {
            config: s.config,
            platform: s.rt.platform,
            reads: s.rt.store.reports,
            core: s.rt.core,
            logger: s.logger,
            clock: io.clock,
          },
          { signal },
        );
        reports += 1;
        const ties = r.summary.tieOut.every((c) => c.ties);
        io.status.println(
          `  · report ${r.runId} (${when}): ${ties ? 'totals tie' : 'totals do NOT tie'}, ` +
            `${r.summary.exceptionCount} exception(s) → ${base}/console/reports/latest`,
        );
      } catch (err) {
        if (!signal.aborted) io.status.println(`  · reconciliation (${when}) failed: ${errorMessage(err)}`);
      }
    };
    reconciling = reconciling.then(run);
    return reconciling;
  };
  return { reconcileNow, count: () => reports };
}

/** Over the first minute: release, fund and add loans on the sandbox, one step every stepMs. */
function runScript(io: DemoIo, adminUrl: string, stepMs: number) {
  const admin = async (path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${adminUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw new Error(`sandbox admin ${path}: HTTP ${res.status}`);
    return res.json();
  };
  const script = demoScript(admin);
  let step = 0;
  let failed = 0;
  const timer = setInterval(() => {
    const next = script[step++];
    if (!next) {
      clearInterval(timer);
      return;
    }
    next().then(
      (text) => io.status.println(`  · ${text}`),
      (err: unknown) => {
        failed += 1;
        io.status.println(`  · sandbox step failed: ${errorMessage(err)}`);
      },
    );
  }, stepMs);
  return {
    stop: () => clearInterval(timer),
    summary: () =>
      `${Math.min(step, script.length)} of ${script.length} sandbox step(s) run, ${failed} failed`,
  };
}

/**
 * `demo`: the sandbox and the daemon on the demo's config until Ctrl-C (or --exit-after), a live
 * status line, reconciliation reports after the first cycle, after --report-after and at stop.
 */
export async function runDemo(io: DemoIo, opts: DemoOptions): Promise<void> {
  prepareDemoDir(resolve(opts.dir));
  const s = await buildDemoStack(io, opts);
  const { dir, rt, daemon, port } = s;
  io.say(`boarding-connector ${CONNECTOR_VERSION} demo`);
  io.say(`  sandbox (Loan Platform): ${s.sandboxUrls.baseUrl}   admin: ${s.sandboxUrls.adminUrl}`);
  if (s.core === null) {
    io.say(`  state, core files, reports, log: ${dir}`);
    io.say(
      `  imaging: ${demoImagingDir(dir)}   (every document, an OnBase self-configuring tagged index, ` +
        'one folder per loan: docs/imaging.md)',
    );
  } else {
    const vendor = s.core.name === 'fineract' ? 'Apache Fineract' : 'Mambu';
    io.say(`  core: ${vendor} simulator at ${s.core.url} (held to its published contract)`);
    io.say(`  state, reports, log: ${dir}`);
  }
  await daemon.start();
  // Ops pages are on the admin listener, never on the webhook receiver the platform reaches.
  const base = `http://127.0.0.1:${s.adminPort}`;
  io.say(
    `  metrics: ${base}/metrics   health: ${base}/healthz   ` +
      `(webhook receiver: 127.0.0.1:${port}, POST ${WEBHOOK_PATH})`,
  );
  io.say(
    `  console: ${base}/console/queue   log in as ` +
      s.users
        .map((u) => `${u.name} / ${u.password} (${u.roles.filter((r) => r !== 'viewer').join(', ')})`)
        .join(' or ') +
      '; new passwords every run; an operator asks, the approver approves (four eyes)',
  );
  io.say(
    `  report:  ${base}/console/reports/latest   (log in as above; after the first cycle, ` +
      `after ${opts.reportAfter} s and when the demo stops; files in ${dir}/reports/latest/)`,
  );
  io.say('  Ctrl-C stops.');

  const stopping = new AbortController();
  const stop = (): void => stopping.abort();
  if (io.shutdown.aborted) stop();
  io.shutdown.addEventListener('abort', stop, { once: true });
  const exitTimer = opts.exitAfter === undefined ? null : setTimeout(stop, opts.exitAfter * 1000);
  const script = runScript(io, s.sandboxUrls.adminUrl, opts.stepMs);
  const reports = demoReports(io, s, base);
  s.onFirstCycle(() => void reports.reconcileNow(stopping.signal, 'after the first cycle'));
  const firstReport = setTimeout(
    () => void reports.reconcileNow(stopping.signal, `after ${opts.reportAfter} s`),
    opts.reportAfter * 1000,
  );
  const render = async (): Promise<void> => {
    const c = await rt.store.loans.countByState();
    const pending = UNACKNOWLEDGED_STATES.reduce((n, st) => n + c[st], 0);
    io.status.show(
      `boarded ${c.acknowledged} · queued ${pending} · quarantined ${c.quarantined} · funded webhooks ` +
        `${await rt.store.reports.fundedWebhooks()} · cycles ${s.cycles()} · reports ${reports.count()}`,
    );
  };
  const ticker = setInterval(() => void render().catch(() => undefined), 500);
  await render();

  const daemonExit = daemon.done.then((exit) => {
    if (exit.kind === 'fatal') io.status.println(`  · ${fatalSentence(exit.code, exit.message)}`);
    stop();
  });
  await new Promise<void>((r) => {
    if (stopping.signal.aborted) r();
    else stopping.signal.addEventListener('abort', () => r(), { once: true });
  });
  script.stop();
  clearInterval(ticker);
  clearTimeout(firstReport);
  if (exitTimer) clearTimeout(exitTimer);
  io.shutdown.removeEventListener('abort', stop);
  await render();
  io.status.println('');
  io.say('stopping: letting loans in flight finish…');
  await daemon.stop();
  await daemonExit;
  // A last report of where the demo stopped (Ctrl-C included), bounded in time; a second Ctrl-C
  // still forces the exit (main.ts).
  io.say('writing a last reconciliation report…');
  await reports.reconcileNow(AbortSignal.timeout(FINAL_REPORT_TIMEOUT_MS), 'at stop');
  const c = await rt.store.loans.countByState();
  io.say(
    `stopped. boarded ${c.acknowledged}, quarantined ${c.quarantined}; ${reports.count()} report(s); ` +
      (s.core === null
        ? ''
        : `${s.core.name}: ${s.core.loanCount()} loan(s), ${s.core.refusedCount()} request(s) refused; `) +
      `${script.summary()}; state and reports kept in ${dir} (latest: ${dir}/reports/latest/)`,
  );
}
