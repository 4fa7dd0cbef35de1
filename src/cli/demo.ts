import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { pino } from 'pino';
import { fatalSentence } from '../boarding/board-loan.js';
import { buildRuntime, type BoardingRuntime } from '../app/runtime.js';
import { loadConfig } from '../config/load.js';
import { SHIPPED_GENERIC_MAPPINGS } from '../config/schema.js';
import type { Config } from '../config/schema.js';
import { UsageError, errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { createLogger } from '../lib/logger.js';
import { runReconcile } from '../reports/run.js';
import { PERMISSIONS } from '../sandbox/keys.js';
import { randomBytes } from 'node:crypto';
import { WEBHOOK_EVENTS } from '../contract/schemas.js';
import { WEBHOOK_PATH } from '../webhooks/path.js';
import { registerEndpoint } from '../platform/endpoint/registration.js';
import { out, type CliContext } from './context.js';
import { CONNECTOR_VERSION } from '../version.js';
import { UNACKNOWLEDGED_STATES } from '../store/loan-states.js';

/**
 * `demo` (what `npm start` runs): the Loan Platform sandbox and the connector daemon in one
 * process, on embedded defaults, so a new user sees loans board within a minute. Its state lives
 * under --dir (default ./var/demo) and is wiped at start: the sandbox is in memory and makes the
 * same loan ids every run, so yesterday's state would only describe loans that no longer exist.
 */

interface DemoOptions {
  dir: string;
  /** Between two scripted sandbox steps (a hidden option: tests run the script quickly). */
  stepMs: number;
  loans: number;
  exitAfter?: number;
  reportAfter: number;
  windowMs: number;
}

const positiveInt =
  (name: string) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0)
      throw new UsageError(`${name}: expected a whole number ≥ 0, got ${JSON.stringify(v)}`);
    return n;
  };

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

const DEMO_MARKER = '.boarding-connector-demo';

/** The report written when the demo stops gives up after this long (the sandbox's read budget may be spent). */
const FINAL_REPORT_TIMEOUT_MS = 30_000;

/**
 * The demo starts fresh, but only ever wipes a directory it made itself: `--dir .` or a typo
 * pointing at real data must not be deleted.
 */
export function prepareDemoDir(dir: string): void {
  if (existsSync(dir) && readdirSync(dir).length > 0) {
    if (!existsSync(`${dir}/${DEMO_MARKER}`)) {
      throw new UsageError(
        `--dir ${dir}: exists and was not made by the demo (no ${DEMO_MARKER}); refusing to wipe it. Pick an empty or new directory.`,
      );
    }
    rmSync(dir, { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/${DEMO_MARKER}`, 'made by `boarding-connector demo`; wiped at its next start\n');
}

function demoConfig(
  o: DemoOptions,
  sandbox: { baseUrl: string; apiKey: string },
  port: number,
  adminPort: number,
  logLevel: string,
): Config {
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
      `core: { adapter: file, file: { dir: ${q(`${dir}/core`)} } }`,
      `webhooks: { host: 127.0.0.1, port: ${port}, publicUrl: ${q(`http://127.0.0.1:${port}${WEBHOOK_PATH}`)}, debounceMs: 500 }`,
      `admin: { host: 127.0.0.1, port: ${adminPort} }`,
      // The demo's key reads full tax ids, so customer match can find repeat borrowers and the
      // customers of the bank's extract by tax id (a masked one would still board: allowLast4Tin).
      `mappings: { dir: ${q(SHIPPED_GENERIC_MAPPINGS)}, allowLast4Tin: true }`,
      // A fresh key each run: the demo wipes its state database at start.
      `customers: { tinHashKey: ${q(randomBytes(24).toString('base64url'))}, extract: { path: ${q(`${dir}/customers.csv`)}, maxAgeHours: 36 } }`,
      "schedule: { drain: '*/15 * * * * *', reconcile: '*/5 * * * *', endpointCheck: '*/5 * * * *' }",
      'boarding: { retryBaseMs: 2000, retryMaxMs: 30000, shutdownTimeoutMs: 10000 }',
      `reports: { dir: ${q(`${dir}/reports`)} }`,
      `log: { level: ${logLevel} }`,
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

/** The live status line: a single updating line on a TTY, one line per change otherwise. */
function statusPrinter(stream: NodeJS.WritableStream & { isTTY?: boolean }): {
  show(text: string): void;
  println(text: string): void;
} {
  const tty = stream.isTTY === true;
  let last = '';
  let drawn = false;
  return {
    show(text) {
      if (text === last) return;
      last = text;
      if (tty) {
        stream.write(`\r\x1b[2K${text}`);
        drawn = true;
      } else stream.write(`${text}\n`);
    },
    println(text) {
      if (tty && drawn) stream.write('\r\x1b[2K');
      stream.write(`${text}\n`);
      if (tty && drawn) stream.write(last);
    },
  };
}

export function registerDemoCommands(program: Command, ctx: CliContext): void {
  program
    .command('demo')
    .description(
      'sandbox + connector daemon together on embedded defaults (what `npm start` runs); Ctrl-C stops',
    )
    .option(
      '--dir <dir>',
      'where the demo keeps its state, core files and reports (wiped at start)',
      './var/demo',
    )
    .option('--loans <n>', 'loans the sandbox starts with', positiveInt('--loans'), 25)
    .option(
      '--exit-after <seconds>',
      'stop by itself after this many seconds (default: run until Ctrl-C)',
      positiveInt('--exit-after'),
    )
    .option(
      '--report-after <seconds>',
      'also reconcile this many seconds after start (reports are written after the first cycle and when the demo stops too)',
      positiveInt('--report-after'),
      60,
    )
    .option(
      '--window-ms <ms>',
      'rate-limit window of the sandbox and the connector',
      positiveInt('--window-ms'),
      10_000,
    )
    .addOption(
      new Option('--step-ms <ms>', 'between two scripted sandbox steps')
        .argParser(positiveInt('--step-ms'))
        .default(5_000)
        .hideHelp(),
    )
    .addHelpText(
      'after',
      '\nTimeline: the sandbox starts with --loans loans (some released), the daemon boards them; over the\nnext minute more loans are released and funded (loan.funded webhooks start early cycles); a\nreconciliation runs at the end of that minute and every 5 minutes. Logs go to --dir/demo.log.',
    )
    .action(async (opts: DemoOptions) => {
      if (opts.windowMs < 1000) throw new UsageError('--window-ms: expected at least 1000');
      await runDemo(ctx, opts);
    });
}

async function runDemo(ctx: CliContext, opts: DemoOptions): Promise<void> {
  const dir = resolve(opts.dir);
  prepareDemoDir(dir);
  const status = statusPrinter(ctx.stderr);
  const say = (text: string): void => out(ctx, text);
  // Logs go to a file so the status line stays readable; LOG_LEVEL=debug etc. still applies.
  const logLevel = ctx.env['LOG_LEVEL'] ?? 'info';
  const logFile = pino.destination({ dest: `${dir}/demo.log`, sync: false, mkdir: true });
  const logger: Logger = createLogger({ level: logLevel, destination: logFile, pretty: false });
  ctx.onClose(() => {
    try {
      logFile.flushSync();
    } catch {
      // Not open yet (a very early stop): nothing was buffered.
    }
  });

  // Loaded here: other commands never load the sandbox's and the daemon's HTTP stack.
  const [{ startSandbox }, { createConnectorDaemon }] = await Promise.all([
    import('../sandbox/index.js'),
    import('../app/daemon.js'),
  ]);
  const sandbox = await startSandbox({
    port: 0,
    loans: opts.loans,
    allowLoopbackWebhooks: true,
    windowMs: opts.windowMs,
    webhookRetry: { attempts: 5, baseMs: 500 },
    // Repeat borrowers at a realistic share, and a customer extract in which some are the bank's.
    repeatBorrowers: 0.2,
    customerExtract: { path: `${resolve(opts.dir)}/customers.csv`, existingShare: 0.3 },
    apiKeyPermissions: [...PERMISSIONS],
    logger: logger.child({ component: 'sandbox' }),
  });
  ctx.onClose(() => sandbox.close());
  const port = await freePort();
  const adminPort = await freePort();
  const config = demoConfig(opts, sandbox, port, adminPort, logLevel);
  const rt = await buildRuntime(config, logger, { clock: ctx.clock });
  ctx.onClose(() => rt.close());

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
    onHangup: (fn) => ctx.onHangup(fn),
    onCycle: () => {
      cycles += 1;
      // The first report as soon as there is something to reconcile, not a minute in.
      if (cycles === 1) firstCycleDone();
    },
  });

  const admin = async (path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${sandbox.adminUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw new Error(`sandbox admin ${path}: HTTP ${res.status}`);
    return res.json();
  };

  say(`boarding-connector ${CONNECTOR_VERSION} demo`);
  say(`  sandbox (Loan Platform): ${sandbox.baseUrl}   admin: ${sandbox.adminUrl}`);
  say(`  state, core files, reports, log: ${dir}`);

  await daemon.start();
  // Ops pages are on the admin listener, never on the webhook receiver the platform reaches.
  const base = `http://127.0.0.1:${adminPort}`;
  say(
    `  metrics: ${base}/metrics   health: ${base}/healthz   (webhooks: http://127.0.0.1:${port}${WEBHOOK_PATH})`,
  );
  say(
    `  report:  ${base}/reports/latest   (after the first cycle, after ${opts.reportAfter} s and when the demo stops; files in ${dir}/reports/latest/)`,
  );
  say('  Ctrl-C stops.');

  const stopping = new AbortController();
  const stop = (): void => stopping.abort();
  if (ctx.shutdown.aborted) stop();
  ctx.shutdown.addEventListener('abort', stop, { once: true });
  let exitTimer: NodeJS.Timeout | null = null;
  if (opts.exitAfter !== undefined) exitTimer = setTimeout(stop, opts.exitAfter * 1000);

  // Over the first minute: release, fund and add loans, one step every few seconds.
  const script = demoScript(admin);
  const stepMs = opts.stepMs;
  let step = 0;
  let failedSteps = 0;
  const actions = setInterval(() => {
    const next = script[step++];
    if (!next) {
      clearInterval(actions);
      return;
    }
    next().then(
      (text) => status.println(`  · ${text}`),
      (err: unknown) => {
        failedSteps += 1;
        status.println(`  · sandbox step failed: ${errorMessage(err)}`);
      },
    );
  }, stepMs);

  let reports = 0;
  // One reconciliation at a time: a report asked for while one runs waits for it.
  let reconciling: Promise<void> = Promise.resolve();
  const reconcileNow = (signal: AbortSignal, when: string): Promise<void> => {
    const run = async (): Promise<void> => {
      try {
        const r = await runReconcile({
          config,
          platform: rt.platform,
          reads: rt.store.reports,
          core: rt.core,
          logger: logger.child({ component: 'reconcile' }),
          clock: ctx.clock,
          connectorVersion: CONNECTOR_VERSION,
          signal,
        });
        reports += 1;
        const ties = r.summary.tieOut.every((c) => c.ties);
        status.println(
          `  · report ${r.runId} (${when}): ${ties ? 'totals tie' : 'totals do NOT tie'}, ${r.summary.exceptionCount} exception(s) → ${base}/reports/latest`,
        );
      } catch (err) {
        if (!signal.aborted) status.println(`  · reconciliation (${when}) failed: ${errorMessage(err)}`);
      }
    };
    reconciling = reconciling.then(run);
    return reconciling;
  };
  firstCycleDone = () => void reconcileNow(stopping.signal, 'after the first cycle');
  if (cycles >= 1) firstCycleDone();
  const firstReport = setTimeout(
    () => void reconcileNow(stopping.signal, `after ${opts.reportAfter} s`),
    opts.reportAfter * 1000,
  );

  const render = async (): Promise<void> => {
    const c = await rt.store.loans.countByState();
    const pending = UNACKNOWLEDGED_STATES.reduce((n, st) => n + c[st], 0);
    status.show(
      `boarded ${c.acknowledged} · queued ${pending} · quarantined ${c.quarantined} · funded webhooks ${await rt.store.reports.fundedWebhooks()} · cycles ${cycles} · reports ${reports}`,
    );
  };
  const tick = (): void => {
    render().catch(() => undefined);
  };
  const ticker = setInterval(tick, 500);
  await render();

  const daemonExit = daemon.done.then((exit) => {
    if (exit.kind === 'fatal') status.println(`  · ${fatalSentence(exit.code, exit.message)}`);
    stop();
  });
  await new Promise<void>((r) => {
    if (stopping.signal.aborted) r();
    else stopping.signal.addEventListener('abort', () => r(), { once: true });
  });
  clearInterval(actions);
  clearInterval(ticker);
  clearTimeout(firstReport);
  if (exitTimer) clearTimeout(exitTimer);
  ctx.shutdown.removeEventListener('abort', stop);
  await render();
  status.println('');
  say('stopping: letting loans in flight finish…');
  await daemon.stop();
  await daemonExit;
  // A last report of where the demo stopped (Ctrl-C included), bounded in time; a second Ctrl-C
  // still forces the exit (main.ts).
  say('writing a last reconciliation report…');
  await reconcileNow(AbortSignal.timeout(FINAL_REPORT_TIMEOUT_MS), 'at stop');
  const c = await rt.store.loans.countByState();
  say(
    `stopped. boarded ${c.acknowledged}, quarantined ${c.quarantined}; ${reports} report(s); ${Math.min(step, script.length)} of ${script.length} sandbox step(s) run, ${failedSteps} failed; state and reports kept in ${dir} (latest: ${dir}/reports/latest/)`,
  );
}
