/**
 * What the console service's page-group files share: its dependencies, the context built from them
 * once, the role check, and how an ops refusal (plain data) becomes the HTTP status the API sends.
 */
import type { ConsoleConfig } from '../config/schema.js';
import type { BatchingCapability } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { BoardPreview } from '../ops/board-preview.js';
import type { ReboardPreview } from '../ops/reboard.js';
import { RefusedError, type Refusal } from '../ops/refusal.js';
import type { PlatformHealth } from '../platform/api.js';
import type { ConsoleStore } from '../store/console.js';
import type { BoardingStore } from '../store/index.js';
import { ConsoleError, hasRole, type ConsoleUser } from './contract.js';

/** Paging: the default page and the largest one. */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;
/** The longest reason or note a person may type. */
export const MAX_REASON = 1000;

/** The executor as the service sees it: told of an approval, and waited on for a while. */
export interface ExecutorHandle {
  kick(): void;
  /** Resolves when request `id` has finished (executed or failed) or after `ms`, whichever first. */
  settled(id: string, ms: number): Promise<void>;
}

export interface ConsoleServiceDeps {
  store: BoardingStore;
  consoleStore: ConsoleStore;
  config: {
    console: ConsoleConfig;
    bank: { timeZone: string };
    reports: { dir: string };
    imaging?: { enabled: boolean };
  };
  clock: Clock;
  logger: Logger;
  /** The daemon's executor; absent: approved requests wait for a daemon. */
  executor?: ExecutorHandle;
  /**
   * The dry-run diff of one loan, or the board check of one not boarded (needs platform reads and the mapper:
   * the daemon's runtime).
   */
  reboardPreview?: (loanId: string) => Promise<ReboardPreview | BoardPreview>;
  /** The file core's batches; absent for other cores. */
  batching?: BatchingCapability;
  platformHealth?: () => PlatformHealth;
  coreHealth?: () => Promise<{ ok: boolean; detail?: string }>;
  readiness?: () => Promise<unknown>;
  lastCycleAt?: () => number | null;
  role?: () => 'leader' | 'standby';
  /**
   * The reconciliation as `reconcile` and the nightly job run it (src/app/reconcile.ts); resolves
   * with the folder of the new run (`<reports.dir>/<day>/<run>`). Absent: no "run now".
   */
  reconcileNow?: () => Promise<{ dir: string }>;
}

/** What the service's parts share: the deps and the values derived from them once. */
export interface ServiceContext {
  deps: ConsoleServiceDeps;
  store: BoardingStore;
  cs: ConsoleStore;
  clock: Clock;
  tz: string;
  log: Logger;
  reportsDir: string;
}

export function requireRole(user: ConsoleUser, role: 'operator' | 'approver', what: string): void {
  if (!hasRole(user, role))
    throw new ConsoleError(
      403,
      `${what} needs the ${role} role (user ${user.name} has ${user.roles.join(', ') || 'none'})`,
    );
}

const STATUS = { invalid: 400, forbidden: 403, not_found: 404, conflict: 409 } as const;

/** An ops refusal as the console's error (its status, field and link). */
export function consoleRefusal(r: Refusal): ConsoleError {
  return new ConsoleError(STATUS[r.kind], r.message, r.field, r.link);
}

/** Runs an ops call; a refusal it throws becomes the console's error. */
export async function orRefuse<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof RefusedError) throw consoleRefusal(err.refusal);
    throw err;
  }
}
