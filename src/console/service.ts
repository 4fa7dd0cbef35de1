/**
 * The ops console service (the ConsoleService of contract.ts) over the state database: the exception
 * queue, loan history, requests with four eyes, the audit log, reconciliation runs and sign-off,
 * batches and status. Executing approved requests is the executor's (executor.ts), in the daemon.
 */
import { randomBytes } from 'node:crypto';
import { readFile, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import type { ConsoleConfig } from '../config/schema.js';
import type { BatchingCapability } from '../core/port.js';
import { planRetry } from '../ops/retry.js';
import { planSkip } from '../ops/skip.js';
import { businessDaysBetween, localDate, zonedToUtc } from '../lib/calendar.js';
import { spreadsheetField } from '../lib/csv.js';
import { searchKey } from '../lib/search-key.js';
import { userNameKey } from '../lib/user-name.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { PlatformHealth } from '../platform/api.js';
import { ageBucket } from '../reports/compute.js';
import { REPORT_FILES } from '../reports/files.js';
import {
  DISPOSITIONS,
  runExceptions,
  writeSignOff,
  type Disposition,
  type ExceptionDisposition,
} from '../reports/signoff.js';
import type { ReportException } from '../reports/types.js';
import type { ReboardPreview } from '../ops/reboard.js';
import type { BoardPreview } from '../ops/board-preview.js';
import { gatherLoanHistory, lastReviewItems, loanHistoryJson } from '../ops/loan-history.js';
import { loanDocuments } from './loan-documents.js';
import { runningDaemons } from '../ops/daemon-guard.js';
import { FileBatchStore } from '../store/file-batches.js';
import type { BoardingStore } from '../store/index.js';
import { QUARANTINE_REASONS } from '../store/loan-states.js';
import type {
  AuditRow,
  ConsoleStore,
  ExceptionSqlFilter,
  NewAudit,
  RequestRow,
  SignOffRow,
} from '../store/console.js';
import {
  AGE_BUCKETS,
  ConsoleError,
  EXCEPTION_SORTS,
  REQUEST_ACTIONS,
  REQUEST_STATUSES,
  hasRole,
  type ActionRequest,
  type AuditEntry,
  type ConsoleService,
  type ConsoleUser,
  type ExceptionFilter,
  type ExceptionItem,
  type ExceptionQuery,
  type NewRequest,
  type ReportRun,
  type RequestAction,
  type RequestStatus,
  type StatusView,
} from './contract.js';

/** A bulk request covers at most this many loans (narrow the filter beyond). */
export const MAX_REQUEST_LOANS = 100_000;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 500;
const MAX_REASON = 1000;
/** Re-board checks each user may start per minute: each spends platform reads the boarding needs. */
export const REBOARD_PREVIEWS_PER_MINUTE = 6;

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

/** The audit line of an unlock (the console's and `console unlock`'s): auth finds it by the user's name key. */
export function unlockAudit(actor: string, user: string, at: number): NewAudit {
  return { at, actor, kind: 'unlock', action: 'login', reason: userNameKey(user), detail: { user } };
}

// ---------------------------------------------------------------------------------------------
// Parsing (shared by the API and the pages)
// ---------------------------------------------------------------------------------------------

const EXCEPTION_REASON_VALUES = [...QUARANTINE_REASONS, 'review'] as const;
const day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, { error: 'expected a date YYYY-MM-DD' });
const cents = z.coerce
  .number({ error: 'expected a whole number of cents' })
  .int({ error: 'expected a whole number of cents' })
  .refine(Number.isSafeInteger, { error: 'expected a whole number of cents' });
const days = z.coerce
  .number({ error: 'expected a whole number of business days ≥ 0' })
  .int({ error: 'expected a whole number of business days ≥ 0' })
  .min(0, { error: 'expected a whole number of business days ≥ 0' })
  .max(3650, { error: 'expected at most 3650 business days' });
const text = (max: number) =>
  z
    .string({ error: 'expected text' })
    .trim()
    .min(1, { error: 'expected text' })
    .max(max, { error: `expected at most ${max} characters` });

export const exceptionFilterSchema = z.strictObject({
  state: z.enum(['quarantined', 'review'], { error: 'expected quarantined or review' }).optional(),
  reason: z
    .enum(EXCEPTION_REASON_VALUES, { error: `expected one of ${EXCEPTION_REASON_VALUES.join(', ')}` })
    .optional(),
  q: text(200).optional(),
  product: text(200).optional(),
  minAmountCents: cents.optional(),
  maxAmountCents: cents.optional(),
  mappingVersion: text(200).optional(),
  releasedFrom: day.optional(),
  releasedTo: day.optional(),
  minAgeDays: days.optional(),
  maxAgeDays: days.optional(),
});

const exceptionQuerySchema = exceptionFilterSchema.extend({
  sort: z.enum(EXCEPTION_SORTS, { error: `expected one of ${EXCEPTION_SORTS.join(', ')}` }).optional(),
  dir: z.enum(['asc', 'desc'], { error: 'expected asc or desc' }).optional(),
  limit: z.coerce
    .number({ error: `expected a whole number 1–${MAX_LIMIT}` })
    .int({ error: `expected a whole number 1–${MAX_LIMIT}` })
    .min(1, { error: `expected a whole number 1–${MAX_LIMIT}` })
    .max(MAX_LIMIT, { error: `expected a whole number 1–${MAX_LIMIT}` })
    .optional(),
  cursor: z.string().max(2000).optional(),
});

function zodToConsole(err: z.ZodError, prefix = ''): ConsoleError {
  const issue = err.issues[0];
  const path = issue ? issue.path.map(String).join('.') : '';
  const field = `${prefix}${path}`;
  const message =
    issue?.code === 'unrecognized_keys'
      ? `unknown field(s) ${issue.keys.join(', ')}`
      : (issue?.message ?? 'invalid');
  return new ConsoleError(400, `${field || 'body'}: ${message}`, field || undefined);
}

/** An exception query from URL parameters (empty values are absent). 400 naming the parameter. */
export function parseExceptionQuery(raw: Record<string, unknown>): ExceptionQuery {
  const cleaned = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== ''));
  for (const [k, v] of Object.entries(cleaned))
    if (typeof v !== 'string') throw new ConsoleError(400, `${k}: expected one value`, k);
  const r = exceptionQuerySchema.safeParse(cleaned);
  if (!r.success) throw zodToConsole(r.error);
  return stripUndefined(r.data) as ExceptionQuery;
}

/** An exception filter from a JSON body (a bulk request). 400 naming `filter.<field>`. */
export function parseExceptionFilter(raw: unknown): ExceptionFilter {
  const r = exceptionFilterSchema.safeParse(raw);
  if (!r.success) throw zodToConsole(r.error, 'filter.');
  return stripUndefined(r.data) as ExceptionFilter;
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

// ---------------------------------------------------------------------------------------------
// Ages in business days (as the reconciliation report counts them)
// ---------------------------------------------------------------------------------------------

function previousDay(d: string): string {
  const t = Date.UTC(Number(d.slice(0, 4)), Number(d.slice(5, 7)) - 1, Number(d.slice(8, 10))) - 86_400_000;
  return new Date(t).toISOString().slice(0, 10);
}

/** The first instant whose age (business days to today, bank zone) is at most `maxDays`. */
function ageStart(maxDays: number, now: number, timeZone: string): number {
  const today = localDate(now, timeZone);
  let d = today;
  for (let i = 0; i < maxDays * 2 + 14; i++) {
    const prev = previousDay(d);
    if (businessDaysBetween(prev, today) > maxDays) break;
    d = prev;
  }
  return zonedToUtc(
    { year: Number(d.slice(0, 4)), month: Number(d.slice(5, 7)), day: Number(d.slice(8, 10)) },
    timeZone,
  );
}

function nextDayString(d: string): string {
  const t = Date.UTC(Number(d.slice(0, 4)), Number(d.slice(5, 7)) - 1, Number(d.slice(8, 10))) + 86_400_000;
  return new Date(t).toISOString().slice(0, 10);
}

function sqlFilter(f: ExceptionFilter, now: number, timeZone: string): ExceptionSqlFilter {
  const out: ExceptionSqlFilter = {};
  if (f.state !== undefined) out.state = f.state;
  if (f.reason !== undefined) out.reason = f.reason;
  if (f.q !== undefined) {
    out.q = f.q;
    const key = searchKey(f.q);
    if (key !== '') out.qKey = key;
  }
  if (f.product !== undefined) out.product = f.product;
  if (f.minAmountCents !== undefined) out.minAmountCents = f.minAmountCents;
  if (f.maxAmountCents !== undefined) out.maxAmountCents = f.maxAmountCents;
  if (f.mappingVersion !== undefined) out.mappingVersion = f.mappingVersion;
  if (f.releasedFrom !== undefined) out.releasedFrom = f.releasedFrom;
  if (f.releasedTo !== undefined) out.releasedTo = nextDayString(f.releasedTo);
  if (f.maxAgeDays !== undefined) out.enteredSince = ageStart(f.maxAgeDays, now, timeZone);
  if (f.minAgeDays !== undefined && f.minAgeDays > 0)
    out.enteredBefore = ageStart(f.minAgeDays - 1, now, timeZone);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------------------------

interface ExceptionCursor {
  s: string;
  d: string;
  v: number | string;
  id: string;
}

function encodeCursor(c: object): string {
  return Buffer.from(JSON.stringify(c), 'utf8').toString('base64url');
}

function decodeCursor<T>(raw: string, check: (v: unknown) => v is T): T {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw new ConsoleError(
      400,
      'cursor: not a cursor this API returned (pass `next` of the previous page)',
      'cursor',
    );
  }
  if (!check(v))
    throw new ConsoleError(
      400,
      'cursor: not a cursor this API returned (pass `next` of the previous page)',
      'cursor',
    );
  return v;
}

// What reaches SQL from a cursor is checked here, by type: a hand-made cursor with a string where a
// number column is compared was a 500 on PostgreSQL (22P02) and a 200 on SQLite (issue 33); a NUL
// in a text value is refused by PostgreSQL too.
const isText = (v: unknown): v is string => typeof v === 'string' && !v.includes('\u0000');
/**
 * A whole number a BIGINT column holds exactly (2^53 in magnitude: the amount sort's "no amount" sentinel is
 * -2^53).
 */
const isWhole = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= 2 ** 53;
const isExceptionCursor = (v: unknown): v is ExceptionCursor =>
  typeof v === 'object' &&
  v !== null &&
  isText((v as ExceptionCursor).s) &&
  isText((v as ExceptionCursor).d) &&
  isText((v as ExceptionCursor).id) &&
  (isWhole((v as ExceptionCursor).v) || isText((v as ExceptionCursor).v));
const isRequestCursor = (v: unknown): v is { at: number; id: string } =>
  typeof v === 'object' &&
  v !== null &&
  isWhole((v as { at: unknown }).at) &&
  isText((v as { id: unknown }).id);
const isSeqCursor = (v: unknown): v is { seq: number } =>
  typeof v === 'object' && v !== null && Number.isSafeInteger((v as { seq: unknown }).seq);

// ---------------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------------

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export function requestView(r: RequestRow, loans: string[] | null): ActionRequest {
  return {
    id: r.id,
    action: r.action as RequestAction,
    loans,
    filter: (parseJson(r.filter) as ExceptionFilter | null) ?? null,
    batch: r.batch,
    previewCount: r.previewCount,
    reason: r.reason,
    maker: r.maker,
    createdAt: iso(r.createdAt) as string,
    status: r.status as RequestStatus,
    decidedBy: r.decidedBy,
    decidedAt: iso(r.decidedAt),
    decisionNote: r.decisionNote,
    executedAt: iso(r.executedAt),
    result: parseJson(r.result) as ActionRequest['result'],
  };
}

function auditView(r: AuditRow): AuditEntry {
  return {
    seq: r.seq,
    at: iso(r.at) as string,
    actor: r.actor,
    kind: r.kind as AuditEntry['kind'],
    action: r.action as AuditEntry['action'],
    requestId: r.requestId,
    loanId: r.loanId,
    reason: r.reason,
    detail: parseJson(r.detail),
  };
}

function signOffView(s: SignOffRow | null): ReportRun['signOff'] {
  return {
    preparedBy: s?.preparedBy ?? null,
    preparedAt: iso(s?.preparedAt ?? null),
    reviewedBy: s?.reviewedBy ?? null,
    reviewedAt: iso(s?.reviewedAt ?? null),
    preparedNote: s?.preparedNote ?? null,
    reviewedNote: s?.reviewedNote ?? null,
    dispositions: (parseJson(s?.dispositions ?? null) as ExceptionDisposition[] | null) ?? [],
  };
}

/** One CSV cell of the audit export, through the one CSV module (quoting, control characters, formulas). */
function csvCell(v: unknown): string {
  return spreadsheetField(
    v === null || v === undefined
      ? null
      : typeof v === 'string' || typeof v === 'number'
        ? v
        : JSON.stringify(v),
  );
}

const DAY_DIR = /^\d{4}-\d{2}-\d{2}$/;
const RUN_DIR = /^run-(\d{6})(?:-(\d{1,4}))?$/;

function runOrder(run: string): [string, number] {
  const m = RUN_DIR.exec(run);
  return [m?.[1] ?? '', Number(m?.[2] ?? 1)];
}

/** The core's health, or not ok after CORE_HEALTH_MS (a hung core must not hang the status page). */
const CORE_HEALTH_MS = 3_000;
async function boundedHealth(
  health: () => Promise<{ ok: boolean; detail?: string }>,
  clock: Clock,
): Promise<{ ok: boolean; detail: string | null }> {
  let timer: { cancel(): void } | null = null;
  const late = new Promise<{ ok: boolean; detail: string | null }>((resolve) => {
    timer = clock.timeout(CORE_HEALTH_MS, () =>
      resolve({ ok: false, detail: `no answer within ${CORE_HEALTH_MS / 1000} s` }),
    );
  });
  try {
    return await Promise.race([
      health().then(
        (h) => ({ ok: h.ok, detail: h.detail ?? null }),
        (err: unknown) => ({ ok: false, detail: err instanceof Error ? err.message : String(err) }),
      ),
      late,
    ]);
  } finally {
    (timer as { cancel(): void } | null)?.cancel();
  }
}

// ---------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------

/** What the service's parts share: the deps and the values derived from them once. */
interface ServiceContext {
  deps: ConsoleServiceDeps;
  store: BoardingStore;
  cs: ConsoleStore;
  clock: Clock;
  tz: string;
  log: Logger;
  reportsDir: string;
}

function requireRole(user: ConsoleUser, role: 'operator' | 'approver', what: string): void {
  if (!hasRole(user, role))
    throw new ConsoleError(
      403,
      `${what} needs the ${role} role (user ${user.name} has ${user.roles.join(', ') || 'none'})`,
    );
}

/** The exception queue, a loan's history and the re-board check. */
function readMethods(
  c: ServiceContext,
): Pick<ConsoleService, 'exceptions' | 'exceptionCounts' | 'loan' | 'reboardDiff'> {
  return { ...exceptionMethods(c), ...loanMethods(c) };
}

/** The exception queue: a page of it, and its counts by reason and age. */
function exceptionMethods(c: ServiceContext): Pick<ConsoleService, 'exceptions' | 'exceptionCounts'> {
  const { cs, clock, tz } = c;

  function exceptionItem(
    r: Awaited<ReturnType<ConsoleStore['exceptionPage']>>['rows'][number],
    now: number,
  ): ExceptionItem {
    const ageDays = businessDaysBetween(localDate(r.enteredAt, tz), localDate(now, tz));
    return {
      id: r.id,
      loanNumber: r.loanNumber,
      state: r.state,
      reason: r.reason as ExceptionItem['reason'],
      reviewItems: r.reviewItems,
      borrowerName: r.borrowerName,
      productId: r.productId,
      amountCents: r.amountCents,
      mappingVersion: r.mappingVersion,
      releasedAt: r.releasedAt,
      since: iso(r.enteredAt) as string,
      ageBusinessDays: ageDays,
      ageBucket: ageBucket(ageDays),
      lastErrorCode: r.lastErrorCode,
      lastErrorMessage: r.lastErrorMessage,
      attempts: r.attempts,
    };
  }

  return {
    async exceptions(query) {
      const now = clock.now();
      const sort = query.sort ?? 'age';
      const dir = query.dir ?? 'asc';
      const limit = query.limit ?? DEFAULT_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new ConsoleError(400, `limit: expected a whole number 1–${MAX_LIMIT}`, 'limit');
      let after = null;
      if (query.cursor !== undefined) {
        const c = decodeCursor(query.cursor, isExceptionCursor);
        if (c.s !== sort || c.d !== dir)
          throw new ConsoleError(
            400,
            'cursor: it belongs to another sort order (start again without a cursor)',
            'cursor',
          );
        // age and amount compare integer columns, released and id text: the value must be of that kind.
        if ((sort === 'age' || sort === 'amount') !== (typeof c.v === 'number'))
          throw new ConsoleError(
            400,
            'cursor: not a cursor this API returned (pass `next` of the previous page)',
            'cursor',
          );
        after = { v: c.v, id: c.id };
      }
      const { rows } = await cs.exceptionPage(sqlFilter(query, now, tz), sort, dir, after, limit + 1);
      const more = rows.length > limit;
      const page = more ? rows.slice(0, limit) : rows;
      const tail = page[page.length - 1];
      let next: string | null = null;
      if (more && tail) {
        const v =
          sort === 'age'
            ? tail.enteredAt
            : sort === 'amount'
              ? (tail.amountCents ?? -9007199254740992)
              : sort === 'released'
                ? (tail.releasedAt ?? '')
                : tail.id;
        next = encodeCursor({ s: sort, d: dir, v, id: tail.id });
      }
      return { items: page.map((r) => exceptionItem(r, now)), next };
    },

    async exceptionCounts(filter = {}) {
      const now = clock.now();
      const rows = await cs.exceptionCounts(
        sqlFilter(filter, now, tz),
        ageStart(1, now, tz),
        ageStart(5, now, tz),
      );
      return rows.map((r) => {
        const byAge = Object.fromEntries(AGE_BUCKETS.map((b) => [b, 0])) as Record<
          (typeof AGE_BUCKETS)[number],
          number
        >;
        byAge['0-1'] = r.a;
        byAge['2-5'] = r.b;
        byAge['>5'] = r.c;
        return { reason: r.reason as ExceptionItem['reason'], total: r.a + r.b + r.c, byAge };
      });
    },
  };
}

/** A loan's history and the re-board check. */
function loanMethods(c: ServiceContext): Pick<ConsoleService, 'loan' | 'reboardDiff'> {
  const { deps, store, cs, clock } = c;
  const fileBatches = new FileBatchStore(store.db);
  let previewing = false;
  /** Start times of each user's re-board checks in the last minute. */
  const previewStarts = new Map<string, number[]>();

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
      // It reads the platform (within the rate budget the boarding shares): one at a time, a few per user a minute.
      if (previewing)
        throw new ConsoleError(
          409,
          'another re-board preview is running (each reads the platform); try again in a moment',
        );
      const now = clock.now();
      const recent = (previewStarts.get(user.name) ?? []).filter((t) => t > now - 60_000);
      if (recent.length >= REBOARD_PREVIEWS_PER_MINUTE) {
        const wait = Math.max(1, Math.ceil(((recent[0] as number) + 60_000 - now) / 1000));
        throw new ConsoleError(
          429,
          `at most ${REBOARD_PREVIEWS_PER_MINUTE} re-board checks a ` +
            `minute per user (each reads the platform): try again in ${wait} s`,
        );
      }
      recent.push(now);
      previewStarts.set(user.name, recent);
      previewing = true;
      let p: ReboardPreview | BoardPreview;
      try {
        p = await deps.reboardPreview(id);
      } finally {
        previewing = false;
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

/** imaging_reexport: the export on in this process, and named loans only (never a filter). */
function checkImagingReexport(deps: ConsoleServiceDeps, input: NewRequest): void {
  if (input.action !== 'imaging_reexport') return;
  if (deps.config.imaging?.enabled !== true)
    throw new ConsoleError(
      400,
      'action: imaging_reexport needs the imaging export (imaging.enabled)',
      'action',
    );
  if (input.filter !== undefined)
    throw new ConsoleError(400, 'imaging_reexport: give "loans" (a list of ids), not a filter', 'filter');
}

/** What a new request is checked against: its targets, overlap with requests still to run, its fields. */
function requestChecks(c: ServiceContext) {
  const { deps, store, cs, tz } = c;
  /** What a request acts on: the loans (validated against the action), or 400/409 naming what is wrong. */
  async function resolveTargets(
    input: NewRequest,
    now: number,
  ): Promise<{
    loans: string[];
    filter: ExceptionFilter | null;
    refused: Array<{ loanId: string; why: string }>;
  }> {
    const action = input.action;
    if (action === 'seal' || action === 'strike_clear') {
      if (input.loans !== undefined || input.filter !== undefined)
        throw new ConsoleError(
          400,
          `${action} takes no loans or filter`,
          input.loans !== undefined ? 'loans' : 'filter',
        );
      if (action === 'seal' && deps.batching === undefined)
        throw new ConsoleError(
          400,
          'action: seal needs the file core with batches (core.adapter file, a layout.yaml and core.file.csvBatches)',
          'action',
        );
      return { loans: [], filter: null, refused: [] };
    }
    checkImagingReexport(deps, input);
    if ((input.loans === undefined) === (input.filter === undefined))
      throw new ConsoleError(
        400,
        `${action}: give "loans" (a list of ids) or "filter" (one of them)`,
        'loans',
      );
    if (input.loans !== undefined) {
      if (
        !Array.isArray(input.loans) ||
        input.loans.length === 0 ||
        input.loans.some((l) => typeof l !== 'string' || l === '')
      )
        throw new ConsoleError(400, 'loans: expected a non-empty list of loan ids', 'loans');
      const ids = [...new Set(input.loans)];
      if (ids.length > MAX_REQUEST_LOANS)
        throw new ConsoleError(400, `loans: at most ${MAX_REQUEST_LOANS} per request`, 'loans');
      const refused: Array<{ loanId: string; why: string }> = [];
      for (const id of ids) {
        if (action === 'retry' || action === 'skip') {
          const p = action === 'retry' ? await planRetry(store.loans, id) : await planSkip(store.loans, id);
          if (!p.ok) refused.push({ loanId: id, why: p.why });
        } else {
          const row = await store.loans.get(id);
          const what = action === 'imaging_reexport' ? 're-exported to imaging' : 're-boarded';
          if (!row) refused.push({ loanId: id, why: `no loan ${id} in the state database` });
          else if (row.state !== 'acknowledged')
            refused.push({
              loanId: id,
              why: `loan ${id} is ${row.state}; only acknowledged loans can be ${what} (retry the others)`,
            });
        }
      }
      return { loans: ids, filter: null, refused };
    }
    const filter = parseExceptionFilter(input.filter);
    // By filter: retry and skip take quarantined exceptions, re-board the acknowledged ones with review items.
    const sql = sqlFilter(filter, now, tz);
    if (action === 'reboard') {
      if (filter.state === 'quarantined')
        throw new ConsoleError(
          400,
          'filter.state: reboard takes loans boarded with review items (state review); retry quarantined loans',
          'filter.state',
        );
      sql.state = 'review';
    } else {
      if (filter.state === 'review')
        throw new ConsoleError(
          400,
          `filter.state: ${action} takes quarantined loans; boarded loans with review items are re-boarded`,
          'filter.state',
        );
      sql.state = 'quarantined';
    }
    let ids = await cs.exceptionIds(sql, MAX_REQUEST_LOANS + 1);
    if (action === 'reboard') {
      const acked: string[] = [];
      for (const id of ids) if ((await store.loans.get(id))?.state === 'acknowledged') acked.push(id);
      ids = acked;
    }
    if (ids.length > MAX_REQUEST_LOANS)
      throw new ConsoleError(
        400,
        `filter: matches more than ${MAX_REQUEST_LOANS} loans; narrow it`,
        'filter',
      );
    return { loans: ids, filter, refused: [] };
  }

  /** A loan in two requests still to run: the later one would end "failed"; refused now, pointing at the first. */
  async function refuseOverlap(action: RequestAction, loans: readonly string[]): Promise<void> {
    if (action === 'seal' || action === 'strike_clear') {
      const open = await cs.openRequestsOf(action);
      if (open[0] !== undefined)
        throw new ConsoleError(
          409,
          `request ${open[0]} (${action}) is still to run: approve, reject or withdraw it first`,
          'action',
          `/console/requests/${encodeURIComponent(open[0])}`,
        );
      return;
    }
    const hits = await cs.openRequestsCovering(loans, 20);
    const first = hits[0];
    if (first === undefined) return;
    const same = hits.filter((h) => h.requestId === first.requestId).map((h) => h.loanId);
    throw new ConsoleError(
      409,
      `request ${first.requestId} is still to run and already covers loan${same.length === 1 ? '' : 's'} ` +
        `${same.slice(0, 5).join(', ')}${same.length > 5 ? ', …' : ''}` +
        (hits.length > same.length ? ' (and other requests cover more)' : '') +
        ': nothing requested; wait for it, or have it withdrawn or rejected',
      'loans',
      `/console/requests/${encodeURIComponent(first.requestId)}`,
    );
  }

  function checkNew(user: ConsoleUser, input: NewRequest): void {
    requireRole(user, 'operator', 'making a request');
    if (typeof input !== 'object' || input === null)
      throw new ConsoleError(400, 'body: expected a JSON object { action, loans | filter, reason }');
    if (!(REQUEST_ACTIONS as readonly string[]).includes(input.action))
      throw new ConsoleError(400, `action: expected one of ${REQUEST_ACTIONS.join(', ')}`, 'action');
    if (typeof input.reason !== 'string' || input.reason.trim() === '')
      throw new ConsoleError(400, 'reason: required: say why (it is kept in the audit log)', 'reason');
    if (input.reason.length > MAX_REASON)
      throw new ConsoleError(400, `reason: at most ${MAX_REASON} characters`, 'reason');
    if (
      input.batch !== undefined &&
      (input.action !== 'seal' || typeof input.batch !== 'string' || input.batch === '')
    )
      throw new ConsoleError(400, 'batch: only with action seal, a batch id', 'batch');
  }

  const exempt = (action: RequestAction): boolean =>
    action === 'retry' && deps.config.console.fourEyes.exemptRetries;

  return { resolveTargets, refuseOverlap, checkNew, exempt };
}

/** A request with its loans (and their rows), or null. */
async function loadRequest(c: ServiceContext, id: string): Promise<ActionRequest | null> {
  const { cs } = c;
  const r = await cs.request(id);
  if (!r) return null;
  const loans = r.action === 'seal' || r.action === 'strike_clear' ? null : await cs.requestLoans(id);
  const view = requestView(r, loans);
  if (loans !== null) view.loanDetails = await cs.requestLoanRows(id, 500);
  return view;
}

/** Kicks the executor and waits (console.approveWaitMs at most) for it to run the request. */
async function waitForExecution(c: ServiceContext, id: string): Promise<ActionRequest> {
  const { deps } = c;
  if (deps.executor) {
    deps.executor.kick();
    await deps.executor.settled(id, deps.config.console.approveWaitMs);
  }
  return (await loadRequest(c, id)) as ActionRequest;
}

/** Requests: preview, make (four eyes, no overlap), decide, withdraw, read. */
function requestMethods(
  c: ServiceContext,
): Pick<
  ConsoleService,
  'previewRequest' | 'createRequest' | 'approve' | 'reject' | 'withdraw' | 'request' | 'requests'
> {
  return { ...makeRequestMethods(c), ...decideRequestMethods(c), ...readRequestMethods(c) };
}

/** A new request: its preview, and making it (an exempt retry approved at once). */
function makeRequestMethods(c: ServiceContext): Pick<ConsoleService, 'previewRequest' | 'createRequest'> {
  const { store, cs, clock, log } = c;
  const { resolveTargets, refuseOverlap, checkNew, exempt } = requestChecks(c);

  return {
    async previewRequest(user, input) {
      checkNew(user, input);
      const t = await resolveTargets(input, clock.now());
      return {
        action: input.action,
        count: t.loans.length - t.refused.length,
        sample: t.loans.filter((l) => !t.refused.some((r) => r.loanId === l)).slice(0, 20),
        refused: t.refused,
        exempt: exempt(input.action),
      };
    },

    async createRequest(user, input) {
      checkNew(user, input);
      const now = clock.now();
      const t = await resolveTargets(input, now);
      if (t.refused.length > 0) {
        const why =
          t.refused
            .slice(0, 10)
            .map((r) => r.why)
            .join('; ') + (t.refused.length > 10 ? `; … ${t.refused.length - 10} more` : '');
        throw new ConsoleError(409, `${why}: nothing requested`, 'loans');
      }
      if (input.filter !== undefined && t.loans.length === 0)
        throw new ConsoleError(400, `filter: matches no loan that ${input.action} can take`, 'filter');
      await refuseOverlap(input.action, t.loans);
      const id = `r-${randomBytes(8).toString('hex')}`;
      const reason = input.reason.trim();
      const isExempt = exempt(input.action);
      await cs.insertRequest(
        {
          id,
          action: input.action,
          filter: t.filter ? JSON.stringify(t.filter) : null,
          batch: input.batch ?? null,
          previewCount: t.loans.length,
          reason,
          maker: user.name,
          createdAt: now,
          status: 'pending',
        },
        await Promise.all(
          t.loans.map(async (l) => ({ id: l, state: (await store.loans.get(l))?.state ?? null })),
        ),
        {
          at: now,
          actor: user.name,
          kind: 'request',
          action: input.action,
          requestId: id,
          reason,
          detail: {
            count: t.loans.length,
            ...(t.filter ? { filter: t.filter } : {}),
            ...(input.batch ? { batch: input.batch } : {}),
            ...(t.loans.length === 1 ? { loan: t.loans[0] } : {}),
          },
        },
      );
      log.info(
        { user: user.name, requestId: id, action: input.action, count: t.loans.length },
        'console request made',
      );
      if (isExempt) {
        await cs.decide(id, 'approved', 'system', now, 'console.fourEyes.exemptRetries', {
          at: now,
          actor: 'system',
          kind: 'approve',
          action: input.action,
          requestId: id,
          reason: 'exempt from four eyes (console.fourEyes.exemptRetries)',
        });
        return waitForExecution(c, id);
      }
      return (await loadRequest(c, id)) as ActionRequest;
    },
  };
}

/** A pending request decided: approved or rejected by another approver, withdrawn by its maker. */
function decideRequestMethods(c: ServiceContext): Pick<ConsoleService, 'approve' | 'reject' | 'withdraw'> {
  const { cs, clock, log } = c;

  return {
    async approve(user, id, note) {
      const r = await cs.request(id);
      if (!r) throw new ConsoleError(404, `no request ${id}`);
      requireRole(user, 'approver', 'approving a request');
      if (r.maker === user.name)
        throw new ConsoleError(
          403,
          `four eyes: ${user.name} made request ${id} and cannot approve it; another approver must`,
        );
      if (r.status !== 'pending') throw new ConsoleError(409, `request ${id} is ${r.status}, not pending`);
      const now = clock.now();
      const ok = await cs.decide(id, 'approved', user.name, now, note?.trim() || null, {
        at: now,
        actor: user.name,
        kind: 'approve',
        action: r.action,
        requestId: id,
        reason: note?.trim() || null,
      });
      if (!ok) throw new ConsoleError(409, `request ${id} was decided by someone else meanwhile`);
      log.info(
        { user: user.name, requestId: id, action: r.action, maker: r.maker },
        'console request approved',
      );
      return waitForExecution(c, id);
    },

    async reject(user, id, note) {
      const r = await cs.request(id);
      if (!r) throw new ConsoleError(404, `no request ${id}`);
      requireRole(user, 'approver', 'rejecting a request');
      if (r.maker === user.name)
        throw new ConsoleError(
          403,
          `four eyes: ${user.name} made request ${id}; another approver decides it`,
        );
      if (typeof note !== 'string' || note.trim() === '')
        throw new ConsoleError(400, 'note: required: say why it is rejected', 'note');
      if (r.status !== 'pending') throw new ConsoleError(409, `request ${id} is ${r.status}, not pending`);
      const now = clock.now();
      const ok = await cs.decide(id, 'rejected', user.name, now, note.trim(), {
        at: now,
        actor: user.name,
        kind: 'reject',
        action: r.action,
        requestId: id,
        reason: note.trim(),
      });
      if (!ok) throw new ConsoleError(409, `request ${id} was decided by someone else meanwhile`);
      log.info({ user: user.name, requestId: id }, 'console request rejected');
      return (await loadRequest(c, id)) as ActionRequest;
    },

    async withdraw(user, id, note) {
      const r = await cs.request(id);
      if (!r) throw new ConsoleError(404, `no request ${id}`);
      if (r.maker !== user.name)
        throw new ConsoleError(
          403,
          `only its maker (${r.maker}) withdraws request ${id}; an approver rejects it`,
        );
      if (r.status !== 'pending') throw new ConsoleError(409, `request ${id} is ${r.status}, not pending`);
      const now = clock.now();
      const why = note?.trim() || null;
      const ok = await cs.decide(id, 'withdrawn', user.name, now, why, {
        at: now,
        actor: user.name,
        kind: 'withdraw',
        action: r.action,
        requestId: id,
        reason: why,
      });
      if (!ok) throw new ConsoleError(409, `request ${id} was decided meanwhile`);
      log.info({ user: user.name, requestId: id }, 'console request withdrawn by its maker');
      return (await loadRequest(c, id)) as ActionRequest;
    },
  };
}

/** One request, and a page of them. */
function readRequestMethods(c: ServiceContext): Pick<ConsoleService, 'request' | 'requests'> {
  const { cs } = c;

  return {
    request: (id) => loadRequest(c, id),

    async requests(query) {
      if (query.status !== undefined && !(REQUEST_STATUSES as readonly string[]).includes(query.status))
        throw new ConsoleError(400, `status: expected one of ${REQUEST_STATUSES.join(', ')}`, 'status');
      const limit = query.limit ?? DEFAULT_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new ConsoleError(400, `limit: expected a whole number 1–${MAX_LIMIT}`, 'limit');
      const after = query.cursor === undefined ? null : decodeCursor(query.cursor, isRequestCursor);
      const rows = await cs.requests(
        query.status ?? null,
        after === null ? null : { createdAt: after.at, id: after.id },
        limit + 1,
      );
      const page = rows.slice(0, limit);
      const tail = page[page.length - 1];
      return {
        items: page.map((r) => requestView(r, null)),
        next: rows.length > limit && tail ? encodeCursor({ at: tail.createdAt, id: tail.id }) : null,
      };
    },
  };
}

/** The audit log, login events, and file batches and status. */
function auditAndOpsMethods(
  c: ServiceContext,
): Pick<ConsoleService, 'audit' | 'auditCsv' | 'recordAuth' | 'recordUnlock' | 'batches' | 'status'> {
  const { deps, store, cs, clock, log } = c;
  return {
    async audit(query) {
      const limit = query.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new ConsoleError(400, `limit: expected a whole number 1–${MAX_LIMIT}`, 'limit');
      const before = query.cursor === undefined ? null : decodeCursor(query.cursor, isSeqCursor).seq;
      const rows = await cs.audit(
        {
          ...(query.loan !== undefined ? { loanId: query.loan } : {}),
          ...(query.requestId !== undefined ? { requestId: query.requestId } : {}),
        },
        before,
        limit + 1,
      );
      const page = rows.slice(0, limit);
      const tail = page[page.length - 1];
      return {
        items: page.map(auditView),
        next: rows.length > limit && tail ? encodeCursor({ seq: tail.seq }) : null,
      };
    },

    async *auditCsv(query) {
      yield 'seq,at,actor,kind,action,request_id,loan_id,reason,detail\r\n';
      let after = 0;
      for (;;) {
        const rows = await cs.auditAscending(
          query.loan !== undefined ? { loanId: query.loan } : {},
          after,
          1000,
        );
        if (rows.length === 0) return;
        yield rows
          .map(
            (r) =>
              [r.seq, iso(r.at), r.actor, r.kind, r.action, r.requestId, r.loanId, r.reason, r.detail]
                .map(csvCell)
                .join(',') + '\r\n',
          )
          .join('');
        after = (rows[rows.length - 1] as AuditRow).seq;
      }
    },

    async recordAuth(kind, name, detail) {
      await cs.appendAudit({
        at: clock.now(),
        actor: name === '' ? '(none)' : name,
        kind,
        action: 'login',
        detail,
      });
    },

    async recordUnlock(user, name) {
      requireRole(user, 'approver', 'lifting a login lock');
      const target = deps.config.console.users.find((u) => userNameKey(u.name) === userNameKey(name));
      if (!target) throw new ConsoleError(404, `no console user ${name}`, 'name');
      await cs.appendAudit(unlockAudit(user.name, target.name, clock.now()));
      log.info({ user: user.name, unlocked: target.name }, 'console login lock lifted');
    },
    async batches() {
      if (!deps.batching) return [];
      return (await deps.batching.list(100)).map((b) => ({
        id: b.id,
        status: b.status,
        openedAt: iso(b.openedAt) as string,
        cutoffAt: iso(b.cutoffAt) as string,
        sealedAt: iso(b.sealedAt),
        sealReason: b.sealReason,
        sealedBy: b.sealedBy,
        loanCount: b.loanCount,
        recordCount: b.recordCount,
        principalCents: b.principalCents,
        files: b.files,
      }));
    },

    async status(): Promise<StatusView> {
      const now = clock.now();
      const d = (await runningDaemons(store.daemon, now))[0] ?? null;
      return {
        role: deps.role?.() ?? 'leader',
        daemon: d
          ? {
              pid: d.pid,
              host: d.host,
              startedAt: iso(d.startedAt) as string,
              mappingVersion: d.mappingVersion,
              reloadError: d.reloadError,
            }
          : null,
        lastCycleAt: iso(deps.lastCycleAt?.() ?? null),
        platform: deps.platformHealth?.() ?? null,
        core: deps.coreHealth ? await boundedHealth(deps.coreHealth, clock) : null,
        loansByState: await store.loans.countByState(),
        pendingRequests: await cs.countRequests('pending'),
        readiness: deps.readiness ? await deps.readiness() : null,
      };
    },
  };
}

/** A disposition for each exception of the run (the preparer gives one for every exception), or 400. */
async function preparedDispositions(
  runDir: string,
  input: Record<string, string> | undefined,
): Promise<ExceptionDisposition[]> {
  const exceptions = await runExceptions(runDir).catch(() => [] as ReportException[]);
  const given = input ?? {};
  const dispositions: ExceptionDisposition[] = [];
  for (const [i, e] of exceptions.entries()) {
    const v = given[String(i)];
    if (v === undefined || v === '')
      throw new ConsoleError(
        400,
        `dispositions.${i}: give a disposition for the exception of loan ${e.loanId} (${e.reason}): one of ` +
          `${DISPOSITIONS.join(', ')}`,
        `dispositions.${i}`,
      );
    if (!(DISPOSITIONS as readonly string[]).includes(v))
      throw new ConsoleError(
        400,
        `dispositions.${i}: expected one of ${DISPOSITIONS.join(', ')}`,
        `dispositions.${i}`,
      );
    dispositions.push({ index: i, loanId: e.loanId, reason: e.reason, disposition: v as Disposition });
  }
  return dispositions;
}

/** "Run reconciliation now": an operator runs the same reconcile as the CLI, audited, one at a time. */
function reconcileNowMethod(
  c: ServiceContext,
  reports: () => Promise<ReportRun[]>,
): Pick<ConsoleService, 'runReconciliation'> {
  const { deps, cs, clock, log } = c;
  let running: string | null = null;
  return {
    async runReconciliation(user) {
      requireRole(user, 'operator', 'running the reconciliation');
      if (!deps.reconcileNow)
        throw new ConsoleError(404, 'this console cannot run the reconciliation (no daemon behind it)');
      if (running !== null)
        throw new ConsoleError(409, `a reconciliation started by ${running} is still running: wait for it`);
      running = user.name;
      const started = clock.now();
      log.info({ user: user.name }, 'reconciliation started from the console');
      try {
        const { dir } = await deps.reconcileNow();
        const run = basename(dir);
        const d = basename(dirname(dir));
        const found = (await reports()).find((r) => r.day === d && r.run === run);
        await cs.appendAudit({
          at: clock.now(),
          actor: user.name,
          kind: 'reconcile',
          action: 'reconcile',
          reason: `run now: ${d}/${run}`,
          detail: { day: d, run, seconds: Math.round((clock.now() - started) / 1000) },
        });
        if (!found) throw new Error(`the reconciliation wrote ${dir}, which is not a run of reports.dir`);
        return found;
      } catch (err) {
        if (err instanceof ConsoleError) throw err;
        await cs.appendAudit({
          at: clock.now(),
          actor: user.name,
          kind: 'reconcile',
          action: 'reconcile',
          reason: 'run now: failed',
          detail: { error: (err as Error).message?.slice(0, 500) ?? String(err) },
        });
        log.warn({ err, user: user.name }, 'reconciliation started from the console failed');
        throw err;
      } finally {
        running = null;
      }
    },
  };
}

/** Reconciliation runs, their files and sign-off. */
function reportMethods(
  c: ServiceContext,
): Pick<ConsoleService, 'reports' | 'report' | 'reportFile' | 'signOff'> {
  const { cs, clock, log, reportsDir } = c;
  const service: Pick<ConsoleService, 'reports' | 'report' | 'reportFile' | 'signOff'> = {
    async reports() {
      const days = (await readdir(reportsDir).catch(() => [] as string[]))
        .filter((d) => DAY_DIR.test(d))
        .sort()
        .reverse();
      const signed = new Map((await cs.signOffs()).map((s) => [`${s.day}/${s.run}`, s]));
      const out: ReportRun[] = [];
      for (const d of days) {
        const runs = (await readdir(join(reportsDir, d)).catch(() => [] as string[])).filter((r) =>
          RUN_DIR.test(r),
        );
        runs.sort((a, b) => {
          const [sa, na] = runOrder(a);
          const [sb, nb] = runOrder(b);
          return sa === sb ? nb - na : sa < sb ? 1 : -1;
        });
        for (const [i, run] of runs.entries()) {
          const st = await stat(join(reportsDir, d, run, REPORT_FILES.json)).catch(() => null);
          out.push({
            day: d,
            run,
            generatedAt: st ? st.mtime.toISOString() : null,
            signOff: signOffView(signed.get(`${d}/${run}`) ?? null),
            latestOfDay: i === 0,
          });
        }
      }
      return out;
    },

    async report(d, run) {
      if (!DAY_DIR.test(d) || !RUN_DIR.test(run)) return null;
      const file = join(reportsDir, d, run, REPORT_FILES.json);
      const text = await readFile(file, 'utf8').catch(() => null);
      if (text === null) return null;
      const runs = (await readdir(join(reportsDir, d)))
        .filter((r) => RUN_DIR.test(r))
        .sort((a, b) => {
          const [sa, na] = runOrder(a);
          const [sb, nb] = runOrder(b);
          return sa === sb ? nb - na : sa < sb ? 1 : -1;
        });
      const st = await stat(file);
      return {
        day: d,
        run,
        generatedAt: st.mtime.toISOString(),
        signOff: signOffView(await cs.signOff(d, run)),
        latestOfDay: runs[0] === run,
        report: JSON.parse(text) as unknown,
      };
    },

    async reportFile(d, run, kind) {
      if (!DAY_DIR.test(d) || !RUN_DIR.test(run)) return null;
      const file = join(reportsDir, d, run, REPORT_FILES[kind]);
      return (await stat(file).catch(() => null))?.isFile() ? file : null;
    },

    async signOff(user, d, run, as, input) {
      if (!hasRole(user, 'operator') && !hasRole(user, 'approver'))
        throw new ConsoleError(
          403,
          `signing off needs the operator or approver role (user ${user.name} has ${user.roles.join(', ')})`,
        );
      if (as !== 'prepared' && as !== 'reviewed')
        throw new ConsoleError(400, 'as: expected prepared or reviewed', 'as');
      if ((await service.reportFile(d, run, 'json')) === null)
        throw new ConsoleError(404, `no reconciliation run ${d}/${run}`);
      const note = typeof input?.note === 'string' ? input.note.trim() : '';
      if (note === '')
        throw new ConsoleError(
          400,
          'note: required: a comment for the sign-off (kept in signoff.json and report.html)',
          'note',
        );
      if (note.length > MAX_REASON)
        throw new ConsoleError(400, `note: at most ${MAX_REASON} characters`, 'note');
      const runDir = join(reportsDir, d, run);
      let dispositions: ExceptionDisposition[] | null = null;
      if (as === 'prepared') dispositions = await preparedDispositions(runDir, input.dispositions);
      const now = clock.now();
      const ok = await cs.sign(
        d,
        run,
        as,
        user.name,
        now,
        { note, dispositions: dispositions === null ? null : JSON.stringify(dispositions) },
        {
          at: now,
          actor: user.name,
          kind: 'signoff',
          action: 'signoff',
          reason: `${as} ${d}/${run}: ${note}`,
          detail: { day: d, run, as, ...(dispositions ? { dispositions: dispositions.length } : {}) },
        },
      );
      if (!ok) {
        const s = await cs.signOff(d, run);
        if (as === 'prepared')
          throw new ConsoleError(409, `${d}/${run} was already prepared by ${s?.preparedBy ?? '?'}`);
        if (!s?.preparedBy) throw new ConsoleError(409, `${d}/${run} must be prepared before it is reviewed`);
        if (s.reviewedBy) throw new ConsoleError(409, `${d}/${run} was already reviewed by ${s.reviewedBy}`);
        throw new ConsoleError(
          403,
          `four eyes: ${user.name} prepared ${d}/${run}; another person reviews it`,
        );
      }
      log.info({ user: user.name, day: d, run, as }, 'reconciliation signed off');
      // The run's own files carry the signatures (the database row stays the record if this fails).
      const so = signOffView(await cs.signOff(d, run));
      await writeSignOff(runDir, {
        day: d,
        run,
        preparedBy: so.preparedBy,
        preparedAt: so.preparedAt,
        preparedComment: so.preparedNote ?? null,
        reviewedBy: so.reviewedBy,
        reviewedAt: so.reviewedAt,
        reviewedComment: so.reviewedNote ?? null,
        dispositions: (so.dispositions ?? []) as ExceptionDisposition[],
      }).catch((err: unknown) =>
        log.warn(
          { err, day: d, run },
          'sign-off recorded, but signoff.json / report.html of the run could not be written',
        ),
      );
      const all = await service.reports();
      return all.find((r) => r.day === d && r.run === run) as ReportRun;
    },
  };
  return service;
}

export function createConsoleService(deps: ConsoleServiceDeps): ConsoleService {
  const c: ServiceContext = {
    deps,
    store: deps.store,
    cs: deps.consoleStore,
    clock: deps.clock,
    tz: deps.config.bank.timeZone,
    log: deps.logger.child({ component: 'console' }),
    reportsDir: deps.config.reports.dir,
  };
  const reports = reportMethods(c);
  return {
    ...readMethods(c),
    ...requestMethods(c),
    ...auditAndOpsMethods(c),
    ...reports,
    ...reconcileNowMethod(c, () => reports.reports()),
  };
}
