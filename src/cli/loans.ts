import type { Command } from 'commander';
import { retryLoan, skipLoan } from '../boarding/ops.js';
import { UsageError } from '../lib/errors.js';
import { openDatabase } from '../store/db.js';
import { createBoardingStore, type BoardingStore } from '../store/index.js';
import { LOAN_STATES, isLoanState } from '../store/loan-states.js';
import type { LoanRow } from '../store/loans.js';
import { runningDaemons } from '../boarding/daemon-guard.js';
import { out, type CliContext } from './context.js';
import { writtenForCurrentRelease } from '../boarding/release.js';

function openStore(ctx: CliContext): BoardingStore {
  const db = openDatabase(ctx.config().store.path, { onWarning: (m) => ctx.logger().warn(m) });
  ctx.onClose(() => {
    db.close();
  });
  return createBoardingStore(db);
}

function actorOf(ctx: CliContext, by: string | undefined): string {
  const who = by ?? ctx.env['USER'] ?? ctx.env['USERNAME'];
  if (who === undefined || who.trim() === '') throw new UsageError('who is acting? pass --by NAME (no USER in the environment)');
  return who.trim();
}

const iso = (ms: number | null): string => (ms === null ? '' : new Date(ms).toISOString());

function pad(cells: string[][]): string {
  const widths = cells[0]?.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length))) ?? [];
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')).join('\n');
}

/** The public view of a row (no stored queue item: `loans show --json` carries the history instead). */
function view(r: LoanRow): Record<string, unknown> {
  const { queueItem: _item, ...rest } = r;
  return {
    ...rest,
    nextAttemptAt: r.nextAttemptAt === null ? null : iso(r.nextAttemptAt),
    writtenAt: r.writtenAt === null ? null : iso(r.writtenAt),
    acknowledgedAt: r.acknowledgedAt === null ? null : iso(r.acknowledgedAt),
    coreWriteStartedAt: r.coreWriteStartedAt === null ? null : iso(r.coreWriteStartedAt),
    lastSeenAt: r.lastSeenAt === null ? null : iso(r.lastSeenAt),
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
  };
}

export function registerLoansCommands(program: Command, ctx: CliContext): void {
  const loans = program.command('loans').description('inspect and operate on loans in the state database');

  loans
    .command('list')
    .description('list loans with their boarding state')
    .option('--state <state>', `only loans in this state (${LOAN_STATES.join(', ')})`)
    .option('--limit <n>', 'at most this many (newest first)')
    .option('--warnings', 'only loans that mapped with review items (boarded with warnings)')
    .option('--json', 'print JSON (one array)')
    .action((opts: { state?: string; limit?: string; warnings?: boolean; json?: boolean }) => {
      if (opts.state !== undefined && !isLoanState(opts.state)) {
        throw new UsageError(`--state: expected one of ${LOAN_STATES.join(', ')}, got ${JSON.stringify(opts.state)}`);
      }
      const limit = opts.limit === undefined ? undefined : Number(opts.limit);
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(opts.limit)}`);
      const store = openStore(ctx);
      const rows = store.loans.list({
        ...(opts.state !== undefined && isLoanState(opts.state) ? { state: opts.state } : {}),
        ...(limit ? { limit } : {}),
        ...(opts.warnings === true ? { withReviewItems: true } : {}),
      });
      if (opts.json === true) {
        out(ctx, JSON.stringify(rows.map(view)));
        return;
      }
      if (rows.length === 0) {
        out(ctx, opts.warnings ? 'no loans with review items' : opts.state ? `no loans in state ${opts.state}` : 'no loans yet (run `sync --once`)');
        return;
      }
      const table = [['ID', 'LOAN NUMBER', 'STATE', 'REASON', 'REVIEW', 'ATTEMPTS', 'NEXT ATTEMPT', 'CORE REF', 'LAST ERROR']];
      for (const r of rows) {
        table.push([
          r.id,
          r.loanNumber ?? '',
          r.state,
          r.quarantineReason ?? '',
          r.reviewItems > 0 ? String(r.reviewItems) : '',
          String(r.attempts),
          iso(r.nextAttemptAt),
          r.coreReference ?? '',
          (r.lastErrorMessage ?? '').replace(/\s+/g, ' ').slice(0, 80),
        ]);
      }
      out(ctx, pad(table));
      const counts = store.loans.countByState();
      out(ctx, `\n${rows.length} loan(s); all states: ${Object.entries(counts).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ')}`);
    });

  loans
    .command('show')
    .description('show one loan: state, core reference, errors, idempotency keys and its full history')
    .argument('<id>', 'platform loan id')
    .option('--json', 'print JSON')
    .action((id: string, opts: { json?: boolean }) => {
      const store = openStore(ctx);
      const row = store.loans.get(id);
      if (!row) throw new UsageError(`no loan ${id} in the state database (see \`loans list\`)`);
      const events = store.loans.events(id);
      const keys = store.keys.forLoan(id);
      const daemon = runningDaemons(store.daemon, ctx.clock.now())[0] ?? null;
      if (opts.json === true) {
        out(ctx, JSON.stringify({ loan: view(row), daemon: daemon ? { pid: daemon.pid, host: daemon.host, mappingVersion: daemon.mappingVersion, reloadError: daemon.reloadError } : null, events: events.map((e) => ({ ...e, at: iso(e.at) })), idempotencyKeys: keys.map((k) => ({ ...k, createdAt: iso(k.createdAt), completedAt: iso(k.completedAt) })) }));
        return;
      }
      const lines = [
        `loan ${row.id}${row.loanNumber ? ` (${row.loanNumber})` : ''}`,
        `  state:           ${row.state}${row.quarantineReason ? ` (${row.quarantineReason})` : ''}`,
        `  attempts:        ${row.attempts}${row.nextAttemptAt !== null ? ` · next attempt ${iso(row.nextAttemptAt)}` : ''}`,
        `  release marker:  ${row.releaseMarker ?? ''}${row.releasedAtIso ? ` · released ${row.releasedAtIso}` : ''}`,
        `  core reference:  ${row.coreReference ?? '(not written)'}${row.writtenAt !== null ? ` · written ${iso(row.writtenAt)}` : ''}`,
        `  acknowledged:    ${row.acknowledgedAt !== null ? iso(row.acknowledgedAt) : 'no'}`,
        `  mapping version: ${row.mappingVersion ?? ''}`,
        `  daemon mapping:  ${daemon ? `${daemon.mappingVersion} (pid ${daemon.pid} on ${daemon.host})${daemon.reloadError ? ' · last reload refused' : ''}${row.mappingVersion && row.mappingVersion !== daemon.mappingVersion ? ' · differs from this loan' : ''}` : '(no daemon running)'}`,
        `  payload hash:    ${row.payloadHash ?? ''}`,
      ];
      if (row.lastErrorCode) lines.push(`  last error:      [${row.lastErrorCode}] ${row.lastErrorMessage ?? ''}`);
      const lastReview = [...events].reverse().find((e) => e.kind === 'warning');
      if (row.reviewItems > 0 && lastReview) {
        lines.push('', `review items (boarded with warnings, ${iso(lastReview.at)}):`);
        const items = ((lastReview.detail as { warnings?: Array<{ code: string; field: string; message: string; at: string }> } | null)?.warnings ?? []);
        for (const w of items) lines.push(`  [${w.code}] ${w.field}: ${w.message}  (${w.at})`);
      }
      lines.push('', 'idempotency keys:');
      if (keys.length === 0) lines.push('  (none)');
      for (const k of keys) lines.push(`  ${k.key}  ${k.operation}  created ${iso(k.createdAt)}  ${k.completedAt !== null ? `completed ${iso(k.completedAt)} (${k.status ?? ''})` : 'not completed'}`);
      lines.push('', 'history:');
      for (const e of events) {
        const move = e.toState ? `${e.fromState ?? '(new)'} → ${e.toState}` : e.fromState ? `(${e.fromState})` : '';
        const detail = e.detail === null ? '' : ` ${JSON.stringify(e.detail)}`;
        lines.push(`  ${iso(e.at)}  ${e.kind.padEnd(10)} ${move}${e.reason ? `  ${e.reason}` : ''}${e.actor !== 'connector' ? `  by ${e.actor}` : ''}${detail.length > 300 ? `${detail.slice(0, 300)}…` : detail}`);
      }
      out(ctx, lines.join('\n'));
    });

  loans
    .command('retry')
    .description('put a quarantined, retry_wait or skipped loan back in the queue (audited); the next cycle boards it')
    .argument('<id>', 'platform loan id')
    .option('--by <name>', 'who is acting (default: $USER)')
    .action((id: string, opts: { by?: string }) => {
      const actor = actorOf(ctx, opts.by);
      const store = openStore(ctx);
      const row = retryLoan(store.loans, id, actor, ctx.clock.now());
      out(ctx, `loan ${id} queued by ${actor}${writtenForCurrentRelease(row) ? ' (the core already holds this release: the next cycle only acknowledges it)' : ''}; the next cycle boards it`);
    });

  loans
    .command('skip')
    .description('never board this loan unless retried (audited with who and why)')
    .argument('<id>', 'platform loan id')
    .requiredOption('--reason <text>', 'why (kept in the audit log)')
    .option('--by <name>', 'who is acting (default: $USER)')
    .action((id: string, opts: { reason: string; by?: string }) => {
      const actor = actorOf(ctx, opts.by);
      const store = openStore(ctx);
      skipLoan(store.loans, id, opts.reason, actor, ctx.clock.now());
      out(ctx, `loan ${id} skipped by ${actor}: ${opts.reason.trim()}`);
    });
}
