import type { Command } from 'commander';
import { FatalError, UsageError } from '../lib/errors.js';
import type { BulkAction } from '../ops/bulk.js';
import { runBulkAction } from '../ops/bulk-run.js';
import { bulkRunLines } from './bulk-text.js';
import { localDateTime, parseInstant } from '../lib/calendar.js';
import {
  lastReviewItems,
  loanHistoryJson,
  loanView,
  showLoan,
  type LoanHistoryParts,
} from '../ops/loan-history.js';
import {
  LOAN_STATES,
  QUARANTINE_REASONS,
  SKIPPABLE_STATES,
  listLoans,
  type LoanRow,
} from '../ops/loan-list.js';
import { runReboard, runReboardPreview } from '../app/reboard.js';
import { countOutcomes, type ReboardPreview, type ReboardResult } from '../ops/reboard-run.js';
import { openState } from '../app/session.js';
import { out, type CliContext } from './context.js';
import { confirmBulk } from './confirm.js';
import { followPlatformWaits } from './progress.js';

function actorOf(ctx: CliContext, by: string | undefined): string {
  const who = by ?? ctx.env['USER'] ?? ctx.env['USERNAME'];
  if (who === undefined || who.trim() === '')
    throw new UsageError('who is acting? pass --by NAME (no USER in the environment)');
  return who.trim();
}

function listCommand(loans: Command, ctx: CliContext): void {
  loans
    .command('list')
    .description('list loans with their boarding state')
    .option('--state <state>', `only loans in this state (${LOAN_STATES.join(', ')})`)
    .option('--limit <n>', 'at most this many (newest first)')
    .option('--warnings', 'only loans that mapped with review items (boarded with warnings)')
    .option('--json', 'print JSON (one array)')
    .action(async (opts: { state?: string; limit?: string; warnings?: boolean; json?: boolean }) => {
      const { rows, counts } = await listLoans((await openState(ctx)).store, opts);
      const zone = ctx.config().bank.timeZone;
      if (opts.json === true) return out(ctx, JSON.stringify(rows.map((r) => loanView(r, zone))));
      if (rows.length === 0) {
        const none = opts.state ? `no loans in state ${opts.state}` : 'no loans yet (run `sync --once`)';
        return out(ctx, opts.warnings ? 'no loans with review items' : none);
      }
      out(ctx, loanTableText(rows, zone));
      const all = Object.entries(counts).filter(([, n]) => n > 0);
      out(ctx, `\n${rows.length} loan(s); all states: ${all.map(([k, n]) => `${k} ${n}`).join(', ')}`);
    });
}

function showCommand(loans: Command, ctx: CliContext): void {
  loans
    .command('show')
    .description('show one loan: state, core reference, errors, idempotency keys and its full history')
    .argument('<id>', "platform loan id, or a loan number (the platform's, or the bank's account number)")
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const h = await showLoan((await openState(ctx)).store, ref, ctx.clock.now());
      const zone = ctx.config().bank.timeZone;
      out(ctx, opts.json === true ? JSON.stringify(loanHistoryJson(h, zone)) : loanHistoryText(h, zone));
    });
}

interface BulkFlags {
  all?: boolean;
  reason?: string;
  quarantineReason?: string;
  since?: string;
  state?: string;
  by?: string;
  dryRun?: boolean;
  yes?: boolean;
}

/** The terminal's confirmation of a bulk action (cli/confirm.ts), as the ops and app hooks ask for it. */
function confirmOn(ctx: CliContext, command: string, yes: boolean) {
  return (targets: readonly string[], action: string): Promise<void> =>
    confirmBulk(ctx, {
      ...{ command, action, count: targets.length, yes, sample: [...targets] },
      threshold: ctx.config().boarding.confirmAbove,
    });
}

/** `loans retry` and `loans skip`: ops/bulk-run.ts does the work; here the flags, the terminal and the exit code. */
async function bulkAction(
  ctx: CliContext,
  action: BulkAction,
  ids: string[],
  opts: BulkFlags,
): Promise<void> {
  const name = `loans ${action}`;
  const store = (await openState(ctx)).store;
  const progress = ctx.progress();
  const res = await runBulkAction({ store, now: () => ctx.clock.now() }, action, ids, opts, {
    actor: () => actorOf(ctx, opts.by),
    confirm: confirmOn(ctx, name, opts.yes === true),
    progress: (n, total) => progress.status(`${action === 'retry' ? 'retrying' : 'skipping'} ${n}/${total}`),
    signal: ctx.shutdown,
  });
  progress.done();
  for (const line of bulkRunLines(action, res)) out(ctx, line);
  if (res.notDone > 0)
    throw new FatalError(`${name}: ${res.notDone} loan(s) not ${action === 'retry' ? 'retried' : 'skipped'}`);
}

interface ReboardFlags {
  mappingVersion?: string;
  reason?: string;
  by?: string;
  force?: boolean;
  dryRun?: boolean;
  yes?: boolean;
  json?: boolean;
}

/** `loans reboard --dry-run` (app/reboard.ts: reads and maps only, writes nothing). */
async function reboardDryRun(ctx: CliContext, ids: string[], opts: ReboardFlags): Promise<void> {
  const progress = ctx.progress();
  const { results, targets, version, unreadable } = await runReboardPreview(
    ctx,
    { ids, mappingVersion: opts.mappingVersion, force: opts.force === true },
    {
      platform: (platform) => followPlatformWaits(progress, platform),
      before: (id, i, n) => progress.status(`dry run: reading and mapping ${i + 1}/${n}: loan ${id}`),
      loan: (r) => (opts.json === true ? undefined : out(ctx, previewText(r))),
      signal: ctx.shutdown,
    },
  );
  progress.done();
  out(ctx, opts.json === true ? JSON.stringify(results) : previewSummaryText(results, targets, version));
  if (unreadable > 0)
    throw new FatalError(`loans reboard --dry-run: ${unreadable} loan(s) could not be read`);
}

async function reboard(ctx: CliContext, ids: string[], opts: ReboardFlags): Promise<void> {
  if (ids.length > 0 === (opts.mappingVersion !== undefined))
    throw new UsageError('loans reboard: give loan ids or --mapping-version V (one of them)');
  if (opts.dryRun === true) return reboardDryRun(ctx, ids, opts);
  const actor = actorOf(ctx, opts.by);
  const reason = opts.reason?.trim() ?? '';
  if (reason === '')
    throw new UsageError('loans reboard: --reason must say why (it is kept in the audit log)');
  const progress = ctx.progress();
  const input = { ids, mappingVersion: opts.mappingVersion, actor, reason, force: opts.force === true };
  const { results, targets, version } = await runReboard(ctx, input, {
    confirm: confirmOn(ctx, 'loans reboard', opts.yes === true),
    platform: (platform) => followPlatformWaits(progress, platform),
    before: (id, i, n) => progress.status(`re-boarding ${i + 1}/${n}: loan ${id}`),
    loan: (r) => (opts.json === true ? undefined : out(ctx, reboardText(r))),
    signal: ctx.shutdown,
  });
  progress.done();
  const summary = reboardSummaryText(results, targets, version);
  out(ctx, opts.json === true ? JSON.stringify(results) : summary.text);
  if (summary.notReboarded > 0)
    throw new FatalError(`loans reboard: ${summary.notReboarded} loan(s) not re-boarded`);
}

const CONFIRM_HELP =
  '\nMore loans than boarding.confirmAbove (default 10) ask for confirmation on a terminal; without one,\n' +
  '--yes is needed (exit 2 otherwise, nothing done).';
const SINCE_HELP =
  'with --all: only loans that entered their state since this ISO time or this long ago (30m, 2h, 1d)';

export function registerLoansCommands(program: Command, ctx: CliContext): void {
  const loans = program.command('loans').description('inspect and operate on loans in the state database');
  listCommand(loans, ctx);
  showCommand(loans, ctx);
  loans
    .command('retry')
    .description(
      'put quarantined (or retry_wait, skipped) loans back in ' +
        'the queue, audited; a running daemon starts a cycle at once',
    )
    .argument('[ids...]', 'platform loan ids (or --all)')
    .option('--all', 'every quarantined loan (narrow with --reason, --since, --state)')
    .option(
      '--reason <reason>',
      `with --all: only loans quarantined for this reason (${QUARANTINE_REASONS.join(', ')})`,
    )
    .option('--since <time>', SINCE_HELP)
    .option('--state <state>', 'with --all: quarantined (default), retry_wait or skipped')
    .option('--by <name>', 'who is acting (default: $USER)')
    .option('--dry-run', 'list what would be retried (and what cannot be); change nothing')
    .option('--yes', 'more than boarding.confirmAbove loans: go ahead without asking')
    .addHelpText('after', `${CONFIRM_HELP} One loan that cannot be retried stops them all (exit 2).`)
    .action((ids: string[], opts: BulkFlags) => bulkAction(ctx, 'retry', ids, opts));
  loans
    .command('reboard')
    .description(
      'write acknowledged loans to the core again with the mapping on disk (after a mapping fix); idempotent by ' +
        'external id, no second acknowledgement, audited',
    )
    .argument('[ids...]', 'platform loan ids (or --mapping-version)')
    .option('--mapping-version <version>', 'every acknowledged loan boarded with this mapping version')
    .option('--reason <text>', 'why (kept in the audit log; required unless --dry-run)')
    .option('--by <name>', 'who is acting (default: $USER)')
    .option(
      '--force',
      'write even when neither the mapping version nor the loan changed since its last write',
    )
    .option(
      '--dry-run',
      'per loan, the field changes a re-board would write to the core; write nothing, change no state',
    )
    .option('--yes', 'more than boarding.confirmAbove loans: go ahead without asking')
    .option('--json', 'print the results as JSON')
    .addHelpText(
      'after',
      `\nExit status: 0 when every loan was re-written (or was unchanged); 1 when one failed or would now be ` +
        `quarantined.\nWith --dry-run: 0 when every loan could be read (whatever it would do), 1 when one could ` +
        `not.${CONFIRM_HELP}`,
    )
    .action((ids: string[], opts: ReboardFlags) => reboard(ctx, ids, opts));
  loans
    .command('skip')
    .description('never board these loans unless retried (audited with who and why)')
    .argument('[ids...]', 'platform loan ids (or --all)')
    .option('--reason <text>', 'why (kept in the audit log; required unless --dry-run)')
    .option(
      '--all',
      'every loan in --state (default quarantined), narrowed with --quarantine-reason and --since',
    )
    .option(
      '--state <state>',
      `with --all: the loans' state (${SKIPPABLE_STATES.join(', ')}; default quarantined)`,
    )
    .option(
      '--quarantine-reason <reason>',
      `with --all: only loans quarantined for this reason (${QUARANTINE_REASONS.join(', ')})`,
    )
    .option('--since <time>', SINCE_HELP)
    .option('--by <name>', 'who is acting (default: $USER)')
    .option('--dry-run', 'list what would be skipped (and what cannot be); change nothing')
    .option('--yes', 'more than boarding.confirmAbove loans: go ahead without asking')
    .addHelpText('after', `${CONFIRM_HELP} One loan that cannot be skipped stops them all (exit 2).`)
    .action((ids: string[], opts: BulkFlags) => bulkAction(ctx, 'skip', ids, opts));
}

/**
 * `loans show ID` as text: the row, identity, review items, idempotency keys and the history, one
 * fact a line; times in `timeZone` (bank.timeZone) with its abbreviation, as the console and the
 * report show them.
 */
function loanHistoryText(h: LoanHistoryParts, timeZone: string): string {
  const { row, events, keys, daemon, customers, accountNumber } = h;
  const isoText = (ms: number | null): string => (ms === null ? '' : localDateTime(ms, timeZone));
  // The platform's own text, shown in the bank's zone when it parses (as it came when it does not).
  const platformTime = (text: string): string => {
    const ms = parseInstant(text);
    return ms === null ? text : localDateTime(ms, timeZone);
  };
  const differs = row.mappingVersion && daemon && row.mappingVersion !== daemon.mappingVersion;
  const daemonText = daemon
    ? `${daemon.mappingVersion} (pid ${daemon.pid} on ${daemon.host})` +
      (daemon.reloadError ? ' · last reload refused' : '') +
      (differs ? ' · differs from this loan' : '')
    : '(no daemon running)';
  const source =
    h.accountNumberSource === 'pool' ? 'from the pool, identity.accountNumbers' : "the core's own";
  const lines = [
    `loan ${row.id}${row.loanNumber ? ` (${row.loanNumber})` : ''}`,
    `  state:           ${row.state}${row.quarantineReason ? ` (${row.quarantineReason})` : ''}`,
    `  attempts:        ${row.attempts}` +
      (row.nextAttemptAt !== null ? ` · next attempt ${isoText(row.nextAttemptAt)}` : ''),
    `  release marker:  ${row.releaseMarker ?? ''}` +
      (row.releasedAtIso ? ` · released ${platformTime(row.releasedAtIso)}` : ''),
    `  core reference:  ${row.coreReference ?? '(not written)'}` +
      (row.writtenAt !== null ? ` · written ${isoText(row.writtenAt)}` : ''),
    `  acknowledged:    ${row.acknowledgedAt !== null ? isoText(row.acknowledgedAt) : 'no'}`,
    `  mapping version: ${row.mappingVersion ?? ''}`,
    `  daemon mapping:  ${daemonText}`,
    `  payload hash:    ${row.payloadHash ?? ''}`,
    '',
    'identity:',
    '  account number:  ' +
      (accountNumber === null
        ? '(none yet: allocated when the loan is fetched, or read back from the core after the write)'
        : `${accountNumber} (${source})`),
  ];
  if (row.lastErrorCode)
    lines.push(`  last error:      [${row.lastErrorCode}] ${row.lastErrorMessage ?? ''}`);
  // Customer match: each business and person → the bank's CIF, and how it was found.
  if (customers.length > 0) lines.push('', 'identity (customers):');
  for (const c of customers) {
    const cif = c.cif ?? '(assigned by the core at create)';
    const seen = c.existing ? ' · existing customer' : ' · new customer (this loan creates it)';
    const name = c.nameAgrees === false ? ' · name differs from the core (review item)' : '';
    lines.push(`  ${c.entityId}  CIF ${cif}  ${c.matchedBy}${seen}${name}`);
  }
  const review = lastReviewItems(h);
  if (review) lines.push('', `review items (boarded with warnings, ${isoText(review.at)}):`);
  for (const w of review?.items ?? []) lines.push(`  [${w.code}] ${w.field}: ${w.message}  (${w.at})`);
  lines.push('', 'idempotency keys:');
  if (keys.length === 0) lines.push('  (none)');
  for (const k of keys) {
    const done =
      k.completedAt !== null ? `completed ${isoText(k.completedAt)} (${k.status ?? ''})` : 'not completed';
    lines.push(`  ${k.key}  ${k.operation}  created ${isoText(k.createdAt)}  ${done}`);
  }
  lines.push('', 'history:');
  for (const e of events) {
    const move = e.toState
      ? `${e.fromState ?? '(new)'} → ${e.toState}`
      : e.fromState
        ? `(${e.fromState})`
        : '';
    const detail = e.detail === null ? '' : ` ${JSON.stringify(e.detail)}`;
    const by = e.actor !== 'connector' ? `  by ${e.actor}` : '';
    const shown = detail.length > 300 ? `${detail.slice(0, 300)}…` : detail;
    lines.push(
      `  ${isoText(e.at)}  ${e.kind.padEnd(10)} ${move}${e.reason ? `  ${e.reason}` : ''}${by}${shown}`,
    );
  }
  return lines.join('\n');
}

/**
 * Widest an id or reference column is shown in `loans list` (platform ids are opaque strings of any
 * length): a longer one is cut in the middle with "…", so both ends stay recognisable; `--json`
 * and `loans show` print it whole.
 */
const LIST_ID_MAX = 40;

/** `text` shortened to `max` characters, keeping its start and end ("ln_7f3a…9c21"). */
function middleEllipsis(text: string, max = LIST_ID_MAX): string {
  const chars = [...text];
  if (chars.length <= max) return text;
  const tail = Math.floor((max - 1) / 2);
  return `${chars.slice(0, max - 1 - tail).join('')}…${chars.slice(chars.length - tail).join('')}`;
}

/**
 * `loans list` as a table: one loan a row, each column as wide as its widest cell (ids and
 * references capped at LIST_ID_MAX), the last one not padded; times in `timeZone` (bank.timeZone)
 * with its abbreviation.
 */
function loanTableText(rows: readonly LoanRow[], timeZone: string): string {
  const when = (ms: number | null): string => (ms === null ? '' : localDateTime(ms, timeZone));
  const head = ['ID', 'LOAN NUMBER', 'STATE', 'REASON', 'REVIEW', 'ATTEMPTS', 'NEXT ATTEMPT', 'CORE REF'];
  const cells = [[...head, 'LAST ERROR']];
  for (const r of rows) {
    const review = r.reviewItems > 0 ? String(r.reviewItems) : '';
    const error = (r.lastErrorMessage ?? '').replace(/\s+/g, ' ').slice(0, 80);
    const id = middleEllipsis(r.id);
    const state = [id, middleEllipsis(r.loanNumber ?? ''), r.state, r.quarantineReason ?? '', review];
    cells.push([
      ...state,
      String(r.attempts),
      when(r.nextAttemptAt),
      middleEllipsis(r.coreReference ?? ''),
      error,
    ]);
  }
  const widths = cells[0]?.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length))) ?? [];
  return cells
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  '))
    .join('\n');
}

const changeLines = (changes: readonly string[]): string[] => [
  ...changes.slice(0, 30).map((c) => `    ${c}`),
  ...(changes.length > 30 ? [`    … ${changes.length - 30} more`] : []),
];

/** One re-board's outcome as a line (and its field changes). */
function reboardText(r: ReboardResult | Exclude<ReboardPreview, { outcome: 'would_rewrite' }>): string {
  const id = `loan ${r.loanId}`;
  switch (r.outcome) {
    case 'rewritten':
      return [
        `${id}: re-boarded (${r.previousVersion ?? '?'} → ${r.mappingVersion}; core ${r.coreReference})`,
        ...changeLines(r.changes),
      ].join('\n');
    case 'unchanged':
      return `${id}: unchanged (already boarded with ${r.mappingVersion} from the same data; --force to write anyway)`;
    case 'would_quarantine':
      return `${id}: NOT re-boarded: the mapping would quarantine it (${r.reason}): ${r.message}`;
    case 'not_acknowledged':
      return `${id}: NOT re-boarded: it is ${r.state}, not acknowledged (use \`loans retry\`)`;
    case 'failed':
      return `${id}: FAILED: ${r.message} (the core keeps its earlier records)`;
  }
}

/** One dry-run preview as a line (and the field changes it would write). */
function previewText(r: ReboardPreview): string {
  if (r.outcome === 'unchanged')
    return (
      `loan ${r.loanId}: unchanged (already boarded with ` +
      `${r.mappingVersion} from the same data; --force would write anyway)`
    );
  if (r.outcome === 'failed') return `loan ${r.loanId}: could not be read: ${r.message}`;
  if (r.outcome !== 'would_rewrite') return reboardText(r);
  const what = r.changes.length === 0 ? 'no field changes' : `${r.changes.length} change(s)`;
  return [
    `loan ${r.loanId}: would re-write (${r.previousVersion ?? '?'} → ${r.mappingVersion}): ${what}`,
    ...changeLines(r.changes),
  ].join('\n');
}

/** The last line of `loans reboard --dry-run`. */
function previewSummaryText(results: readonly ReboardPreview[], targets: number, version: string): string {
  if (targets === 0) return 'no acknowledged loans match: nothing would be re-boarded';
  const n = countOutcomes(results);
  const [rewrite, same] = [n['would_rewrite'] ?? 0, n['unchanged'] ?? 0];
  return (
    `dry run with mapping ${version}: ${rewrite} would be re-written, ${same} unchanged, ` +
    `${results.length - rewrite - same} would not be ` +
    `re-boarded; nothing was written to the core, no state changed`
  );
}

/**
 * The last line of `loans reboard`, and how many loans were not re-boarded (failed, would quarantine, not
 * acknowledged).
 */
function reboardSummaryText(
  results: readonly ReboardResult[],
  targets: number,
  version: string,
): { text: string; notReboarded: number } {
  const n = countOutcomes(results);
  const [rewritten, same] = [n['rewritten'] ?? 0, n['unchanged'] ?? 0];
  const notReboarded = results.length - rewritten - same;
  return {
    notReboarded,
    text:
      targets === 0
        ? 'no acknowledged loans match: nothing re-boarded'
        : `${rewritten} re-boarded, ${same} unchanged, ${notReboarded} ` +
          `not re-boarded (mapping ${version}; no acknowledgement sent)`,
  };
}
