/**
 * The loan page group: one loan's whole history (as `loans show --json` gathers it, with the
 * console's requests, batches and documents), and the re-board check (ops/board-preview.ts) run at
 * most one at a time and a few per user a minute (ops/preview-throttle.ts), since each spends
 * platform reads.
 */
import { gatherLoanHistory, lastReviewItems, loanHistoryJson } from '../ops/loan-history.js';
import type { BoardPreview } from '../ops/board-preview.js';
import { PreviewThrottle } from '../ops/preview-throttle.js';
import type { ReboardPreview } from '../ops/reboard.js';
import { FileBatchStore } from '../store/file-batches.js';
import { ConsoleError, type ConsoleService } from './contract.js';
import { loanDocuments } from './loan-documents.js';
import { parseJson } from './paging.js';
import { requestView } from './requests.js';
import { requireRole, type ServiceContext } from './service-context.js';

/** A loan's history and the re-board check. */
export function loanMethods(c: ServiceContext): Pick<ConsoleService, 'loan' | 'reboardDiff'> {
  const { deps, store, cs, clock } = c;
  const fileBatches = new FileBatchStore(store.db);
  const throttle = new PreviewThrottle();

  return {
    async loan(id) {
      const h = await gatherLoanHistory(store, id, clock.now());
      if (!h) return null;
      const base = loanHistoryJson(h);
      const requests = await cs.requestsForLoan(id, 50);
      return {
        ...base,
        reviewItems: lastReviewItems(h)?.items ?? [],
        records: parseJson(h.row.boardedRecords),
        batches: (await fileBatches.batchesOfLoan(id)).map((b) => ({
          batchId: b.batchId,
          status: b.status,
          kind: b.kind,
        })),
        requests: requests.map((r) => requestView(r, null)),
        documents: await loanDocuments(store.db, id, base.events, deps.config.imaging?.enabled === true),
      };
    },

    async reboardDiff(user, id) {
      requireRole(user, 'operator', 'a re-board check (it spends platform reads)');
      const empty = { loanId: id, mappingVersion: null, previousVersion: null, changes: [] as string[] };
      if (!deps.reboardPreview)
        return {
          ...empty,
          outcome: 'unavailable',
          message: 'the re-board preview runs in the daemon (`run`); use `loans reboard --dry-run`',
        };
      if (!(await store.loans.get(id))) throw new ConsoleError(404, `no loan ${id}`);
      // It reads the platform (within the rate budget the boarding shares): ops' throttle decides.
      const started = throttle.start(user.name, clock.now());
      if (!started.ok)
        throw started.why === 'busy'
          ? new ConsoleError(
              409,
              'another re-board preview is running (each reads the platform); try again in a moment',
            )
          : new ConsoleError(
              429,
              `at most ${started.perMinute} re-board checks a ` +
                `minute per user (each reads the platform): try again in ${started.waitS} s`,
            );
      let p: ReboardPreview | BoardPreview;
      try {
        p = await deps.reboardPreview(id);
      } finally {
        started.done();
      }
      switch (p.outcome) {
        case 'would_rewrite':
          return {
            loanId: id,
            outcome: p.outcome,
            mappingVersion: p.mappingVersion,
            previousVersion: p.previousVersion,
            changes: p.changes,
            message: null,
          };
        case 'unchanged':
          return { ...empty, outcome: p.outcome, mappingVersion: p.mappingVersion, message: null };
        case 'would_board':
          return {
            ...empty,
            outcome: p.outcome,
            mappingVersion: p.mappingVersion,
            changes: p.reviewItems,
            message:
              p.reviewItems.length === 0
                ? `it would board now with mapping ${p.mappingVersion}: request a retry`
                : `it would board now with mapping ${p.mappingVersion}, with ${p.reviewItems.length} review ` +
                  `item${p.reviewItems.length === 1 ? '' : 's'}: request a retry`,
          };
        case 'would_quarantine':
          return {
            ...empty,
            outcome: p.outcome,
            message: `it would not board now: ${p.reason}: ${p.message}`,
          };
        case 'not_acknowledged':
          return { ...empty, outcome: p.outcome, message: `the loan is ${p.state}, not acknowledged` };
        case 'failed':
          return { ...empty, outcome: p.outcome, message: p.message };
      }
    },
  };
}
