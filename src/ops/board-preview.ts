/**
 * The console's check of one loan before an action: would it board now (or, acknowledged, what
 * would a re-board write) with the mapping on disk. Reads only; writes nothing.
 */
import { errorMessage } from '../lib/errors.js';
import { formatIssue } from '../mapping/types.js';
import { redactForStorage } from '../lib/redact.js';
import { quarantineReasonFor } from '../pipeline/board-loan.js';
import { fetchMappingInput, storedItemOrLoan } from '../pipeline/mapping-input.js';
import { mappingIdentity } from '../identity/account-numbers.js';
import { storedCustomers } from '../identity/customer-match.js';
import {
  previewReboard,
  type ReboardPreview,
  type ReboardPreviewDeps,
  type ReboardRequest,
} from './reboard.js';

/**
 * The board check of a loan that is not boarded (quarantined, skipped, waiting to retry): would
 * it board now with the mapping on disk, and if not, why. Reads the loan and its entities from
 * the platform (within the rate budget) and maps them; writes nothing. Documents are fetched only
 * when the loan boards, so a refused document host shows then, not here.
 */
export type BoardPreview =
  | { loanId: string; outcome: 'would_board'; mappingVersion: string; reviewItems: string[] }
  | { loanId: string; outcome: 'would_quarantine'; reason: string; message: string; mappingVersion: string }
  | { loanId: string; outcome: 'failed'; message: string };

export async function previewBoard(
  deps: ReboardPreviewDeps,
  loanId: string,
  req: Pick<ReboardRequest, 'signal'> = {},
): Promise<BoardPreview> {
  try {
    const row = await deps.store.loans.get(loanId);
    if (!row) return { loanId, outcome: 'failed', message: `no loan ${loanId} in the state database` };
    const item = await storedItemOrLoan(deps.platform, loanId, row.queueItem, req.signal);
    const input = await fetchMappingInput(deps.platform, item, req.signal);
    const accountNumber = await deps.accountNumbers.preview(row.id);
    const outcome = await deps.mapper.map({
      ...input,
      identity: {
        ...mappingIdentity(accountNumber),
        customers: storedCustomers(await deps.store.customers.forLoan(loanId)),
      },
    });
    if (!outcome.ok) {
      return {
        loanId,
        outcome: 'would_quarantine',
        reason: quarantineReasonFor(outcome.issues),
        message: redactForStorage(outcome.issues.map(formatIssue).join('; ')).slice(0, 2000),
        mappingVersion: outcome.mappingVersion,
      };
    }
    return {
      loanId,
      outcome: 'would_board',
      mappingVersion: outcome.mappingVersion,
      reviewItems: (outcome.warnings ?? []).slice(0, 20).map((w) => redactForStorage(formatIssue(w))),
    };
  } catch (err) {
    return { loanId, outcome: 'failed', message: redactForStorage(errorMessage(err)).slice(0, 2000) };
  }
}

/** The console's check of one loan: a re-board preview when it is acknowledged, else the board check. */
export async function previewLoanNow(
  deps: ReboardPreviewDeps,
  loanId: string,
): Promise<ReboardPreview | BoardPreview> {
  const row = await deps.store.loans.get(loanId);
  if (row && row.state !== 'acknowledged' && ['quarantined', 'skipped', 'retry_wait'].includes(row.state))
    return previewBoard(deps, loanId);
  return previewReboard(deps, loanId);
}
