/**
 * Executes approved console requests, one at a time: each request's stored plan is applied by
 * ops/planned-action.ts through the same operations the CLI uses (ops/bulk.ts for retry and skip,
 * ops/reboard.ts, ops/seal.ts, ops/strike-clear.ts, ops/imaging.ts); this file only claims, runs
 * and records the request. It runs in the daemon (`run`): the daemon calls `runApproved` after each
 * cycle and the service kicks it on an approval. A request is claimed before it runs, so two
 * processes never execute one twice; a claim left by a crash is taken over at once when its process
 * (on this host) is gone, else after CLAIM_STALE_MS. Loans already changed before the crash are
 * then named in the result (no longer in the state the request saw), never changed twice.
 * With leader election (issue 26) only the leader should run it: one place to gate.
 */
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { applyPlanned, type PlannedActionDeps } from '../ops/planned-action.js';
import { errorMessage } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { ConsoleStore, RequestRow } from '../store/console.js';
import type { BoardingStore } from '../store/index.js';
import { processAlive } from '../store/leadership/leases.js';
import type { ExecutorHandle } from './service-context.js';
import type { RequestAction, RequestResult } from './contract.js';

const CLAIM_STALE_MS = 30 * 60_000;

/** What the requests are applied with (ops/planned-action.ts: the re-board, batches, strike ledger, imaging). */
export interface ConsoleExecutorDeps extends Omit<PlannedActionDeps, 'now'> {
  store: BoardingStore;
  consoleStore: ConsoleStore;
  clock: Clock;
  logger: Logger;
  /** Asks the daemon for a cycle now (after retries). */
  requestCycle?: (reason: string) => void;
  /** Runs a pass only where it may (several replicas: on the leader, fenced). Without it, every pass runs. */
  gate?: (pass: () => Promise<number>) => Promise<number>;
}

export interface ConsoleExecutor extends ExecutorHandle {
  /** Runs every approved request now; resolves with how many it finished. */
  runApproved(): Promise<number>;
  stop(): Promise<void>;
}

/** Runs one approved request: its stored plan applied by ops/planned-action.ts; its status and result. */
async function executeRequest(
  deps: ConsoleExecutorDeps,
  r: RequestRow,
  signal: AbortSignal,
): Promise<{ status: 'executed' | 'failed'; result: RequestResult }> {
  const approvedBy = r.decidedBy === 'system' ? null : r.decidedBy;
  const actor = approvedBy ? `${r.maker} (console, approved by ${approvedBy})` : `${r.maker} (console)`;
  const action = r.action as RequestAction;
  const { status, ...result } = await applyPlanned(
    { ...deps, now: () => deps.clock.now() },
    {
      action,
      loans:
        action === 'seal' || action === 'strike_clear' ? [] : await deps.consoleStore.requestLoanStates(r.id),
      batch: r.batch,
      actor,
      reason: r.reason,
      loanReason: `${r.reason} (console request ${r.id})`,
      origin: { request: { id: r.id, reason: r.reason, approvedBy } },
      signal,
    },
  );
  if (action === 'strike_clear')
    deps.logger
      .child({ component: 'console-executor' })
      .warn(
        { by: actor, reason: r.reason, cleared: result.done },
        'console request cleared the 429-strike ledger',
      );
  if (action === 'retry' && result.done > 0) deps.requestCycle?.(`console request ${r.id}`);
  return { status, result };
}

/** A claim left by a process on this host that is gone (a restart mid-request) is taken over at once. */

export function createConsoleExecutor(deps: ConsoleExecutorDeps): ConsoleExecutor {
  const { consoleStore: cs, clock } = deps;
  const log = deps.logger.child({ component: 'console-executor' });
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const finished = new EventEmitter();
  finished.setMaxListeners(0);
  const stopping = new AbortController();
  let running: Promise<number> | null = null;
  let again = false;

  function claimantGone(claimedBy: string | null): boolean {
    if (claimedBy === null) return false;
    const [host, pid] = claimedBy.split(':');
    return host === hostname() && Number.isInteger(Number(pid)) && !processAlive(Number(pid));
  }

  async function runOne(id: string): Promise<boolean> {
    const now = clock.now();
    const before = await cs.request(id);
    const staleBefore =
      before && claimantGone(before.claimedBy) ? Number.MAX_SAFE_INTEGER : now - CLAIM_STALE_MS;
    if (!(await cs.claim(id, owner, now, staleBefore))) return false;
    const r = await cs.request(id);
    if (!r || r.status !== 'approved') return false;
    let outcome: { status: 'executed' | 'failed'; result: RequestResult };
    try {
      outcome = await executeRequest(deps, r, stopping.signal);
    } catch (err) {
      if (stopping.signal.aborted) return false;
      log.error({ err, requestId: id }, 'console request failed');
      outcome = {
        status: 'failed',
        result: { done: 0, failed: [{ loanId: null, message: errorMessage(err) }], detail: null },
      };
    }
    const at = clock.now();
    await cs.finish(id, outcome.status, at, JSON.stringify(outcome.result), {
      at,
      actor: 'connector',
      kind: outcome.status === 'executed' ? 'execute' : 'fail',
      action: r.action,
      requestId: id,
      reason: r.reason,
      detail: {
        done: outcome.result.done,
        failed: outcome.result.failed.length,
        ...(outcome.result.detail ? { detail: outcome.result.detail } : {}),
      },
    });
    log.info(
      {
        requestId: id,
        action: r.action,
        status: outcome.status,
        done: outcome.result.done,
        failed: outcome.result.failed.length,
      },
      'console request executed',
    );
    finished.emit(id);
    return true;
  }

  async function loop(): Promise<number> {
    let n = 0;
    do {
      again = false;
      for (const id of await cs.approvedIds(100)) {
        if (stopping.signal.aborted) return n;
        if (await runOne(id)) n += 1;
      }
    } while (again && !stopping.signal.aborted);
    return n;
  }

  const executor: ConsoleExecutor = {
    runApproved() {
      if (stopping.signal.aborted) return Promise.resolve(0);
      if (running) {
        again = true;
        return running;
      }
      running = (deps.gate ? deps.gate(loop) : loop())
        .catch((err: unknown) => {
          log.error({ err }, 'console executor pass failed; the next cycle tries again');
          return 0;
        })
        .finally(() => {
          running = null;
        });
      return running;
    },
    kick() {
      void executor.runApproved();
    },
    settled(id, ms) {
      return new Promise<void>((resolve) => {
        const timer = clock.timeout(ms, done);
        function done(): void {
          timer.cancel();
          finished.off(id, done);
          resolve();
        }
        finished.on(id, done);
        // Already finished (by an earlier pass, or another process)?
        void cs.request(id).then((r) => {
          if (r && r.status !== 'approved' && r.status !== 'pending') done();
        });
      });
    },
    async stop() {
      stopping.abort();
      await running;
    },
  };
  return executor;
}
