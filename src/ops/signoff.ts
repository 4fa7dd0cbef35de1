/**
 * Signing a reconciliation run off (the console's Reports page): prepared, with a comment and a
 * disposition for every exception of the run, then reviewed by another person, with a comment. A
 * signature is never overwritten. The store's conditional update is the stale-state check (two
 * people signing at once: one wins, the other is told who did); the run's own files then carry the
 * signatures (signoff.json, report.html re-rendered).
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { REPORT_FILES } from '../reports/files.js';
import {
  DISPOSITIONS,
  runExceptions,
  writeSignOff,
  type Disposition,
  type ExceptionDisposition,
} from '../reports/signoff.js';
import type { ReportException } from '../reports/types.js';
import type { ConsoleStore, SignOffRow } from '../store/console.js';
import { refusal, type Refusal } from './refusal.js';

/** The longest comment a signer may give. */
export const MAX_SIGNOFF_NOTE = 1000;

const DAY_DIR = /^\d{4}-\d{2}-\d{2}$/;
const RUN_DIR = /^run-(\d{6})(?:-(\d{1,4}))?$/;

export interface SignOffRequest {
  day: string;
  run: string;
  as: unknown;
  note: unknown;
  /** The preparer's disposition per exception, by its index in report.json ("0": "explained"…). */
  dispositions?: Record<string, string> | undefined;
}

export interface SignOffPlan {
  ok: true;
  day: string;
  run: string;
  as: 'prepared' | 'reviewed';
  note: string;
  /** The preparer's: one per exception of the run; null for the reviewer. */
  dispositions: ExceptionDisposition[] | null;
  runDir: string;
}

/** Whether a run folder name is one the reconciliation writes (`<day>/run-<time>[-n]`). */
export function isRunFolder(day: string, run: string): boolean {
  return DAY_DIR.test(day) && RUN_DIR.test(run);
}

/** Checks a signature before anything is written: the run exists, a comment, the preparer's dispositions. */
export async function planSignOff(reportsDir: string, req: SignOffRequest): Promise<SignOffPlan | Refusal> {
  const { day, run } = req;
  if (req.as !== 'prepared' && req.as !== 'reviewed')
    return refusal('invalid', 'as: expected prepared or reviewed', 'as');
  const runDir = join(reportsDir, day, run);
  if (!isRunFolder(day, run) || !(await stat(join(runDir, REPORT_FILES.json)).catch(() => null))?.isFile())
    return refusal('not_found', `no reconciliation run ${day}/${run}`);
  const note = typeof req.note === 'string' ? req.note.trim() : '';
  if (note === '')
    return refusal(
      'invalid',
      'note: required: a comment for the sign-off (kept in signoff.json and report.html)',
      'note',
    );
  if (note.length > MAX_SIGNOFF_NOTE)
    return refusal('invalid', `note: at most ${MAX_SIGNOFF_NOTE} characters`, 'note');
  let dispositions: ExceptionDisposition[] | null = null;
  if (req.as === 'prepared') {
    const d = await preparedDispositions(runDir, req.dispositions);
    if (!Array.isArray(d)) return d;
    dispositions = d;
  }
  return { ok: true, day, run, as: req.as, note, dispositions, runDir };
}

/** A disposition for each exception of the run (the preparer gives one for every exception), or a refusal. */
async function preparedDispositions(
  runDir: string,
  input: Record<string, string> | undefined,
): Promise<ExceptionDisposition[] | Refusal> {
  const exceptions = await runExceptions(runDir).catch(() => [] as ReportException[]);
  const given = input ?? {};
  const dispositions: ExceptionDisposition[] = [];
  for (const [i, e] of exceptions.entries()) {
    const v = given[String(i)];
    if (v === undefined || v === '')
      return refusal(
        'invalid',
        `dispositions.${i}: give a disposition for the exception of loan ${e.loanId} (${e.reason}): one of ` +
          `${DISPOSITIONS.join(', ')}`,
        `dispositions.${i}`,
      );
    if (!(DISPOSITIONS as readonly string[]).includes(v))
      return refusal(
        'invalid',
        `dispositions.${i}: expected one of ${DISPOSITIONS.join(', ')}`,
        `dispositions.${i}`,
      );
    dispositions.push({ index: i, loanId: e.loanId, reason: e.reason, disposition: v as Disposition });
  }
  return dispositions;
}

export interface SignOffDeps {
  signOffs: Pick<ConsoleStore, 'sign' | 'signOff'>;
  now: () => number;
  /** Told when the signature is recorded but the run's files could not be written (the row stays the record). */
  onFileError?: (err: unknown) => void;
}

/**
 * Records the signature (audited, in one transaction) unless the run's state refuses it now: already
 * prepared or reviewed, not yet prepared, or the reviewer is the preparer (four eyes). Then writes
 * the run's signoff.json and report.html. Resolves with the run's sign-off row.
 */
export async function applySignOff(
  deps: SignOffDeps,
  plan: SignOffPlan,
  signer: string,
): Promise<{ ok: true; signOff: SignOffRow } | Refusal> {
  const { day, run, as, note, dispositions } = plan;
  const now = deps.now();
  const ok = await deps.signOffs.sign(
    day,
    run,
    as,
    signer,
    now,
    { note, dispositions: dispositions === null ? null : JSON.stringify(dispositions) },
    {
      at: now,
      actor: signer,
      kind: 'signoff',
      action: 'signoff',
      reason: `${as} ${day}/${run}: ${note}`,
      detail: { day, run, as, ...(dispositions ? { dispositions: dispositions.length } : {}) },
    },
  );
  const s = await deps.signOffs.signOff(day, run);
  if (!ok) {
    if (as === 'prepared')
      return refusal('conflict', `${day}/${run} was already prepared by ${s?.preparedBy ?? '?'}`);
    if (!s?.preparedBy) return refusal('conflict', `${day}/${run} must be prepared before it is reviewed`);
    if (s.reviewedBy) return refusal('conflict', `${day}/${run} was already reviewed by ${s.reviewedBy}`);
    return refusal('forbidden', `four eyes: ${signer} prepared ${day}/${run}; another person reviews it`);
  }
  const row = s as SignOffRow;
  const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
  await writeSignOff(plan.runDir, {
    day,
    run,
    preparedBy: row.preparedBy,
    preparedAt: iso(row.preparedAt),
    preparedComment: row.preparedNote,
    reviewedBy: row.reviewedBy,
    reviewedAt: iso(row.reviewedAt),
    reviewedComment: row.reviewedNote,
    dispositions: row.dispositions === null ? [] : (JSON.parse(row.dispositions) as ExceptionDisposition[]),
  }).catch((err: unknown) => deps.onFileError?.(err));
  return { ok: true, signOff: row };
}
