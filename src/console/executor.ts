/**
 * Executes approved console requests, one at a time, through the same operations the CLI uses
 * (ops/retry.ts and ops/skip.ts under ops/bulk.ts, ops/reboard.ts, the file core's early seal, the platform
 * client's strike clear). It runs in the daemon (`run`): the daemon calls `runApproved` after each
 * cycle and the service kicks it on an approval. A request is claimed before it runs, so two
 * processes never execute one twice; a claim left by a crash is taken over at once when its process
 * (on this host) is gone, else after CLAIM_STALE_MS. Loans already changed before the crash are
 * then named in the result (no longer in the state the request saw), never changed twice.
 * With leader election (issue 26) only the leader should run it: one place to gate.
 */
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { applyLoanAction } from '../ops/bulk.js';
import { sealEarly } from '../ops/seal.js';
import { clearStrikes } from '../ops/strike-clear.js';
import type { BatchingCapability } from '../core/port.js';
import type { ReboardResult } from '../ops/reboard.js';
import { errorMessage } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { ConsoleStore, RequestRow } from '../store/console.js';
import type { BoardingStore } from '../store/index.js';
import { processAlive } from '../store/leadership/leases.js';
import type { ExecutorHandle } from './service-context.js';
import type { RequestResult } from './contract.js';

const CLAIM_STALE_MS = 30 * 60_000;

export interface ConsoleExecutorDeps {
  store: BoardingStore;
  consoleStore: ConsoleStore;
  clock: Clock;
  logger: Logger;
  /** Re-boards one loan with the daemon's runtime (ops/reboard.ts reboardLoan). */
  reboard?: (loanId: string, actor: string, reason: string, signal: AbortSignal) => Promise<ReboardResult>;
  batching?: BatchingCapability;
  /** The platform client's strike clear (forgets the ledger, in memory and stored). */
  clearStrikes?: (by: string) => number | Promise<number>;
  /** Sends one loan's documents to imaging again (ops/imaging.ts reexportLoan); absent when imaging is off. */
  imagingReexport?: (
    loanId: string,
    actor: string,
    reason: string,
    signal: AbortSignal,
  ) => Promise<{ batchId: string | null; documents: string[] }>;
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

/** Runs one approved request through the operations the CLI uses; its status and result. */
async function executeRequest(
  deps: ConsoleExecutorDeps,
  r: RequestRow,
  signal: AbortSignal,
): Promise<{ status: 'executed' | 'failed'; result: RequestResult }> {
  const { store, consoleStore: cs, clock } = deps;
  const log = deps.logger.child({ component: 'console-executor' });
  const approvedBy = r.decidedBy === 'system' ? null : r.decidedBy;
  const actor = approvedBy ? `${r.maker} (console, approved by ${approvedBy})` : `${r.maker} (console)`;
  const origin = { request: { id: r.id, reason: r.reason, approvedBy } };
  const failed: RequestResult['failed'] = [];
  let done = 0;
  switch (r.action) {
    case 'retry':
    case 'skip': {
      // The one rule of ops/bulk.ts: the loan as it was when the request was made, chunked.
      const res = await applyLoanAction(
        { store, now: () => clock.now() },
        {
          action: r.action,
          loans: await cs.requestLoanStates(r.id),
          actor,
          reason: r.reason,
          origin,
          signal,
        },
      );
      if (res.stopped)
        throw new Error('the daemon stopped before the request finished; it runs again on the next start');
      done = res.done.length;
      failed.push(...res.failed);
      if (r.action === 'retry' && done > 0) deps.requestCycle?.(`console request ${r.id}`);
      return {
        status: done === 0 && failed.length > 0 ? 'failed' : 'executed',
        result: { done, failed, detail: null },
      };
    }
    case 'reboard': {
      if (!deps.reboard) throw new Error('re-board is not available in this process');
      const ids = await cs.requestLoans(r.id);
      const outcomes: Record<string, number> = {};
      for (const id of ids) {
        if (signal.aborted) throw new Error('the daemon stopped before the request finished');
        const res = await deps.reboard(id, actor, `${r.reason} (console request ${r.id})`, signal);
        outcomes[res.outcome] = (outcomes[res.outcome] ?? 0) + 1;
        if (res.outcome === 'rewritten' || res.outcome === 'unchanged') done += 1;
        else
          failed.push({
            loanId: id,
            message:
              res.outcome === 'failed'
                ? res.message
                : res.outcome === 'would_quarantine'
                  ? `would quarantine (${res.reason}): ${res.message}`
                  : `not acknowledged (${res.state})`,
          });
      }
      return {
        status: done === 0 && failed.length > 0 ? 'failed' : 'executed',
        result: {
          done,
          failed,
          detail: Object.entries(outcomes)
            .map(([k, n]) => `${k} ${n}`)
            .join(', '),
        },
      };
    }
    case 'seal': {
      if (!deps.batching) throw new Error('this core has no batches to seal');
      const sealed = await sealEarly(deps.batching, {
        reason: r.reason,
        by: actor,
        id: r.batch ?? undefined,
      });
      if (!sealed.ok)
        return {
          status: 'failed',
          result: { done: 0, failed: [{ loanId: null, message: sealed.message }], detail: null },
        };
      return { status: 'executed', result: { done: 1, failed: [], detail: `sealed ${sealed.id}` } };
    }
    case 'strike_clear': {
      const ledger = deps.clearStrikes;
      if (!ledger) throw new Error('the strike ledger is not available in this process');
      const n = await clearStrikes({ clearStrikes: ledger }, { by: actor, reason: r.reason });
      log.warn({ by: actor, reason: r.reason, cleared: n }, 'console request cleared the 429-strike ledger');
      return { status: 'executed', result: { done: n, failed: [], detail: `cleared ${n} strike(s)` } };
    }
    case 'imaging_reexport': {
      if (!deps.imagingReexport)
        throw new Error('the imaging export is not on in this process (imaging.enabled)');
      const batches: string[] = [];
      let documents = 0;
      for (const id of await cs.requestLoans(r.id)) {
        if (signal.aborted) throw new Error('the daemon stopped before the request finished');
        try {
          const res = await deps.imagingReexport(id, actor, `${r.reason} (console request ${r.id})`, signal);
          done += 1;
          documents += res.documents.length;
          if (res.batchId !== null) batches.push(res.batchId);
        } catch (err) {
          failed.push({ loanId: id, message: errorMessage(err) });
        }
      }
      return {
        status: done === 0 && failed.length > 0 ? 'failed' : 'executed',
        result: {
          done,
          failed,
          detail: `${documents} document(s) re-exported${batches.length > 0 ? ` into ${batches.join(', ')}` : ''}`,
        },
      };
    }
    default:
      throw new Error(`unknown action ${r.action}`);
  }
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
