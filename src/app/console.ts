import { userInfo } from 'node:os';
import type { Express } from 'express';
import type { Registry } from 'prom-client';
import type { Config } from '../config/schema.js';
import { createConsoleAuth } from '../console/auth.js';
import { createConsoleService } from '../console/service.js';
import { createConsoleExecutor, type ConsoleExecutor } from '../console/executor.js';
import { mountConsole } from '../console/index.js';
import { registerConsoleMetrics } from '../console/metrics.js';
import type { ConsoleService } from '../console/contract.js';
import { reboardLoan } from '../ops/reboard.js';
import { previewLoanNow } from '../ops/board-preview.js';
import { reboardDeps, reboardPreviewDeps } from './reboard.js';
import type { PlatformClient } from '../platform/client.js';
import { createConsoleStore } from '../store/console.js';
import { applyUnlock, planUnlock } from '../ops/unlock.js';
import { UsageError } from '../lib/errors.js';
import { openState, type CommandScope } from './session.js';
import type { BoardingRuntime } from './runtime.js';
import { rateAdminFor } from './platform.js';
import { reconcileNow } from '../ops/reconcile.js';
import { hashPassword } from '../console/auth.js';
import type { ImagingExport } from '../imaging/export.js';
import { reexportLoan } from '../ops/imaging.js';
import { reexportInput } from './imaging.js';

/** The console is on when a user is configured or a trusted proxy names users. */
export function consoleEnabled(config: Pick<Config, 'console'>): boolean {
  return config.console.users.length > 0 || config.console.proxy !== undefined;
}

export interface DaemonConsole {
  service: ConsoleService;
  executor: ConsoleExecutor;
  /** Mounts /console/api and /console/ on the admin listener. */
  mount(app: Express): void;
  /** Adds the console's metrics (throttled logins) to the daemon's /metrics registry. */
  registerMetrics(registry: Registry): void;
}

export interface DaemonConsoleHooks {
  requestCycle: (reason: string) => void;
  readiness: () => Promise<unknown>;
  lastCycleAt: () => number | null;
  /** Approved requests run on the leader only, fenced (src/app/daemon.ts leaderGate). */
  gate?: (pass: () => Promise<number>) => Promise<number>;
  /** This replica's role (the status page says which replica leads). */
  role?: () => 'leader' | 'standby';
}

/** The console's four-eyes imaging re-export: the CLI's `imaging reexport` on the daemon's runtime. */
function imagingReexportFor(
  rt: BoardingRuntime,
  exporter: ImagingExport,
): NonNullable<Parameters<typeof createConsoleExecutor>[0]['imagingReexport']> {
  return (loanId, actor, reason, signal) =>
    reexportLoan(
      {
        exporter,
        store: rt.store,
        fetchInput: (id, s) => reexportInput({ platform: rt.platform, store: rt.store }, id, s ?? signal),
        now: () => rt.clock.now(),
      },
      { loanId, reason, by: actor },
    );
}

/**
 * The ops console of the daemon (`run`): service, auth and the executor of approved requests,
 * over the daemon's runtime (the re-board and its preview use the daemon's mapper and platform
 * client; the seal, its file core; the strike clear, its platform client). Null when off.
 */
export function createDaemonConsole(rt: BoardingRuntime, hooks: DaemonConsoleHooks): DaemonConsole | null {
  if (!consoleEnabled(rt.config)) return null;
  const consoleStore = createConsoleStore(rt.db);
  const platform = rt.platform as Partial<Pick<PlatformClient, 'clearStrikes'>> & BoardingRuntime['platform'];
  const executor = createConsoleExecutor({
    store: rt.store,
    consoleStore,
    clock: rt.clock,
    logger: rt.logger,
    reboard: (loanId, actor, reason, signal) =>
      reboardLoan(reboardDeps(rt), loanId, { actor, reason, signal }),
    ...(rt.core.batching ? { batching: rt.core.batching } : {}),
    clearStrikes: (by) =>
      typeof platform.clearStrikes === 'function'
        ? platform.clearStrikes(by)
        : rateAdminFor(rt.config, rt.db, { clock: rt.clock, logger: rt.logger }).clearStrikes(by),
    requestCycle: hooks.requestCycle,
    ...(hooks.gate ? { gate: hooks.gate } : {}),
    ...(rt.imaging ? { imagingReexport: imagingReexportFor(rt, rt.imaging) } : {}),
  });
  const service = createConsoleService({
    store: rt.store,
    consoleStore,
    config: rt.config,
    clock: rt.clock,
    logger: rt.logger,
    executor,
    reboardPreview: (loanId) => previewLoanNow(reboardPreviewDeps(rt), loanId),
    ...(rt.core.batching ? { batching: rt.core.batching } : {}),
    platformHealth: () => rt.platform.health(),
    coreHealth: () => rt.core.health(),
    readiness: hooks.readiness,
    lastCycleAt: hooks.lastCycleAt,
    role: hooks.role ?? (() => 'leader'),
    reconcileNow: () =>
      reconcileNow({
        config: rt.config,
        platform: rt.platform,
        reads: rt.store.reports,
        core: rt.core,
        logger: rt.logger,
        clock: rt.clock,
      }),
  });
  const auth = createConsoleAuth({
    config: rt.config.console,
    clock: rt.clock,
    logger: rt.logger,
    store: consoleStore,
    onEvent: (kind, name, detail) => {
      service
        .recordAuth(kind, name, detail)
        .catch((err: unknown) =>
          rt.logger.warn({ err }, 'console: could not record a login failure in the audit log'),
        );
    },
  });
  return {
    service,
    executor,
    registerMetrics: (registry) => registerConsoleMetrics(registry, auth),
    mount: (app) =>
      mountConsole(app, {
        config: rt.config.console,
        service,
        auth,
        logger: rt.logger,
        clock: rt.clock,
        timeZone: rt.config.bank.timeZone,
      }),
  };
}

/**
 * `console unlock NAME`: an unlock line in the audit log, which the running daemon reads at the
 * next login check of that user (auth.ts) and lifts the lock by. Returns the configured name.
 */
export async function unlockFromCli(scope: CommandScope, name: string, actor: string): Promise<string> {
  const plan = planUnlock(scope.config().console.users, name);
  if (!plan.ok) throw new UsageError(`console unlock: ${plan.message}`);
  const { db } = await openState(scope);
  return (await applyUnlock(createConsoleStore(db), plan, actor, scope.clock.now())).user;
}

/** `console passwd`: the hash a console user's passwordHash takes (the console's own scrypt parameters). */
export function consolePasswordHash(password: string): Promise<string> {
  return hashPassword(password);
}

/** Reads a password typed on a terminal without echoing it (raw mode; Enter ends, Ctrl-C aborts). */
function readHidden(
  input: NodeJS.ReadStream,
  prompt: (s: string) => void,
  question: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    prompt(question);
    let value = '';
    input.setRawMode(true);
    input.resume();
    input.setEncoding('utf8');
    const finish = (err: Error | null): void => {
      input.setRawMode(false);
      input.pause();
      input.off('data', onData);
      prompt('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: string): void => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return finish(null);
        if (ch === '\u0003' || ch === '\u0004') return finish(new UsageError('console passwd: aborted'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    input.on('data', onData);
  });
}

/** Reads the first line of a piped stdin (`printf '%s' "$PW" | … console passwd`). */
async function readPiped(input: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of input) {
    text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (text.length > 10_000) throw new UsageError('console passwd: stdin is too long for a password');
  }
  return text.replace(/\r?\n[\s\S]*$/, '');
}

/** `console passwd`: the new password, asked twice on a terminal (not echoed), or the first line of a pipe. */
export async function readNewPassword(
  stdin: NodeJS.ReadStream,
  say: (text: string) => void,
): Promise<string> {
  if (!stdin.isTTY) return readPiped(stdin);
  const password = await readHidden(stdin, say, 'New console password: ');
  const again = await readHidden(stdin, say, 'Again: ');
  if (again !== password) throw new UsageError('console passwd: the two passwords differ; nothing printed');
  return password;
}

/**
 * Who acts from the CLI in the console's audit log: `cli:<os user>`, or `cli` where the uid has no name (a
 * container).
 */
export function cliActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return 'cli';
  }
}
