import type { Command } from 'commander';
import { retryLoan, skipLoan } from '../boarding/ops.js';
import { FatalError, UsageError } from '../lib/errors.js';
import { openDatabase } from '../store/db.js';
import { createBoardingStore, type BoardingStore } from '../store/index.js';
import { numberPoolsOf } from '../store/numbers.js';
import { LOAN_STATES, isLoanState } from '../store/loan-states.js';
import type { LoanRow } from '../store/loans.js';
import { runningDaemons } from '../boarding/daemon-guard.js';
import { out, type CliContext } from './context.js';
import { writtenForCurrentRelease } from '../boarding/release.js';
import { assertSameMappingAsDaemon } from '../boarding/daemon-guard.js';
import { reboardLoan, type ReboardResult } from '../boarding/reboard.js';
import { buildRuntime } from '../app/runtime.js';
import { CONNECTOR_VERSION } from '../version.js';
import { QUARANTINE_REASONS, RETRYABLE_STATES, type LoanState, type QuarantineReason } from '../store/loan-states.js';

function openStore(ctx: CliContext): BoardingStore {
  const db = openDatabase(ctx.config().store.path, { onWarning: (m) => ctx.logger().warn(m) });
  ctx.onClose(() => {
    db.close();
  });
  return createBoardingStore(db, { numberPools: numberPoolsOf(ctx.config().identity) });
}

function actorOf(ctx: CliContext, by: string | undefined): string {
  const who = by ?? ctx.env['USER'] ?? ctx.env['USERNAME'];
  if (who === undefined || who.trim() === '') throw new UsageError('who is acting? pass --by NAME (no USER in the environment)');
  return who.trim();
}

/** --since: an ISO date-time, or how long ago (30m, 2h, 1d). */
function parseSince(v: string, now: number): number {
  const rel = /^(\d+)\s*(m|h|d)$/.exec(v.trim());
  if (rel) return now - Number(rel[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[rel[2] as 'm' | 'h' | 'd'];
  const t = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v.trim()) || Number.isNaN(t)) throw new UsageError(`--since: expected an ISO date-time (2026-11-25T09:00:00Z) or a duration (30m, 2h, 1d), got ${JSON.stringify(v)}`);
  return t;
}

function formatReboard(r: ReboardResult): string {
  switch (r.outcome) {
    case 'rewritten':
      return [`loan ${r.loanId}: re-boarded (${r.previousVersion ?? '?'} → ${r.mappingVersion}; core ${r.coreReference})`, ...r.changes.slice(0, 30).map((c) => `    ${c}`), ...(r.changes.length > 30 ? [`    … ${r.changes.length - 30} more`] : [])].join('\n');
    case 'unchanged':
      return `loan ${r.loanId}: unchanged (already boarded with ${r.mappingVersion} from the same data; --force to write anyway)`;
    case 'would_quarantine':
      return `loan ${r.loanId}: NOT re-boarded: the mapping would quarantine it (${r.reason}): ${r.message}`;
    case 'not_acknowledged':
      return `loan ${r.loanId}: NOT re-boarded: it is ${r.state}, not acknowledged (use \`loans retry\`)`;
    case 'failed':
      return `loan ${r.loanId}: FAILED: ${r.message} (the core keeps its earlier records)`;
  }
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
      const customers = store.customers.forLoan(id);
      // The bank's account number: allocated from the pool (kept in bank_numbers), or the core's own (read back after the write).
      const pooled = store.numbers.get('account', id);
      const accountNumber = row.accountNumber ?? pooled;
      const identity = { accountNumber, accountNumberSource: accountNumber === null ? null : pooled !== null && pooled === accountNumber ? 'pool' : 'core', customers: customers.map((c) => ({ entityId: c.entityId, cif: c.cif, matchedBy: c.matchedBy, existing: c.existing, nameAgrees: c.nameAgrees })) };
      if (opts.json === true) {
        out(ctx, JSON.stringify({ loan: view(row), identity, daemon: daemon ? { pid: daemon.pid, host: daemon.host, mappingVersion: daemon.mappingVersion, reloadError: daemon.reloadError } : null, events: events.map((e) => ({ ...e, at: iso(e.at) })), idempotencyKeys: keys.map((k) => ({ ...k, createdAt: iso(k.createdAt), completedAt: iso(k.completedAt) })) }));
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
        '',
        'identity:',
        `  account number:  ${accountNumber === null ? '(none yet: allocated when the loan is fetched, or read back from the core after the write)' : `${accountNumber} (${identity.accountNumberSource === 'pool' ? 'from the pool, identity.accountNumbers' : "the core's own"})`}`,
      ];
      if (row.lastErrorCode) lines.push(`  last error:      [${row.lastErrorCode}] ${row.lastErrorMessage ?? ''}`);
      if (customers.length > 0) {
        // Customer match: each business and person → the bank's CIF, and how it was found.
        lines.push('', 'identity (customers):');
        for (const c of customers) {
          lines.push(`  ${c.entityId}  CIF ${c.cif ?? '(assigned by the core at create)'}  ${c.matchedBy}${c.existing ? ' · existing customer' : ' · new customer (this loan creates it)'}${c.nameAgrees === false ? ' · name differs from the core (review item)' : ''}`);
        }
      }
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
    .description('put quarantined (or retry_wait, skipped) loans back in the queue, audited; a running daemon starts a cycle at once')
    .argument('[ids...]', 'platform loan ids (or --all)')
    .option('--all', 'every quarantined loan (narrow with --reason, --since, --state)')
    .option('--reason <reason>', `with --all: only loans quarantined for this reason (${QUARANTINE_REASONS.join(', ')})`)
    .option('--since <time>', 'with --all: only loans that entered their state since this ISO time or this long ago (30m, 2h, 1d)')
    .option('--state <state>', 'with --all: quarantined (default), retry_wait or skipped')
    .option('--by <name>', 'who is acting (default: $USER)')
    .action((ids: string[], opts: { all?: boolean; reason?: string; since?: string; state?: string; by?: string }) => {
      const actor = actorOf(ctx, opts.by);
      const store = openStore(ctx);
      const now = ctx.clock.now();
      let targets: string[];
      if (opts.all === true) {
        if (ids.length > 0) throw new UsageError('loans retry: give loan ids or --all, not both');
        const state = opts.state ?? 'quarantined';
        if (!(RETRYABLE_STATES as readonly string[]).includes(state)) throw new UsageError(`--state: expected ${RETRYABLE_STATES.join(', ')}, got ${JSON.stringify(state)}`);
        if (opts.reason !== undefined && !(QUARANTINE_REASONS as readonly string[]).includes(opts.reason)) {
          throw new UsageError(`--reason: expected one of ${QUARANTINE_REASONS.join(', ')}, got ${JSON.stringify(opts.reason)}`);
        }
        const since = opts.since === undefined ? null : parseSince(opts.since, now);
        targets = store.loans
          .list({ state: state as LoanState, ...(since !== null ? { enteredSince: since } : {}), ...(opts.reason !== undefined ? { quarantineReason: opts.reason as QuarantineReason } : {}) })
          .map((r) => r.id);
      } else {
        if (opts.reason !== undefined || opts.since !== undefined || opts.state !== undefined) throw new UsageError('--reason, --since and --state go with --all');
        if (ids.length === 0) throw new UsageError('loans retry: give loan ids or --all');
        targets = ids;
      }
      let ackOnly = 0;
      for (const id of targets) {
        const row = retryLoan(store.loans, id, actor, now, opts.all === true ? { bulk: { reason: opts.reason ?? null, since: opts.since ?? null } } : undefined);
        if (writtenForCurrentRelease(row)) ackOnly += 1;
        if (targets.length <= 20) out(ctx, `loan ${id} queued by ${actor}${writtenForCurrentRelease(row) ? ' (the core already holds this release: the next cycle only acknowledges it)' : ''}`);
      }
      if (targets.length === 0) {
        out(ctx, 'no loans match: nothing retried');
        return;
      }
      if (targets.length > 20) out(ctx, `${targets.length} loans queued by ${actor}${ackOnly > 0 ? ` (${ackOnly} only need their acknowledgement)` : ''}`);
      // Do not make the operator wait for the schedule: a running daemon polls for this request.
      const daemons = runningDaemons(store.daemon, now);
      if (daemons.length > 0 && store.daemon.requestCycle(actor, now) > 0) out(ctx, `asked the running daemon (pid ${daemons.map((d) => d.pid).join(', ')}) for a cycle now`);
      else out(ctx, 'no daemon is running: board them with `sync --once` (or start `run`)');
    });

  loans
    .command('reboard')
    .description('write acknowledged loans to the core again with the mapping on disk (after a mapping fix); idempotent by external id, no second acknowledgement, audited')
    .argument('[ids...]', 'platform loan ids (or --mapping-version)')
    .option('--mapping-version <version>', 'every acknowledged loan boarded with this mapping version')
    .requiredOption('--reason <text>', 'why (kept in the audit log)')
    .option('--by <name>', 'who is acting (default: $USER)')
    .option('--force', 'write even when neither the mapping version nor the loan changed since its last write')
    .option('--json', 'print the results as JSON')
    .addHelpText('after', '\nExit status: 0 when every loan was re-written (or was unchanged); 1 when one failed or would now be quarantined.')
    .action(async (ids: string[], opts: { mappingVersion?: string; reason: string; by?: string; force?: boolean; json?: boolean }) => {
      const actor = actorOf(ctx, opts.by);
      if (opts.reason.trim() === '') throw new UsageError('loans reboard: --reason must say why (it is kept in the audit log)');
      if ((ids.length > 0) === (opts.mappingVersion !== undefined)) throw new UsageError('loans reboard: give loan ids or --mapping-version V (one of them)');
      const rt = await buildRuntime(ctx.config(), ctx.logger(), { clock: ctx.clock });
      ctx.onClose(() => rt.close());
      const mine = { version: rt.mapper.version, dir: rt.config.mappings.dir };
      assertSameMappingAsDaemon(rt.store.daemon, mine, ctx.clock.now(), 'loans reboard');
      const targets = opts.mappingVersion !== undefined ? rt.store.loans.list({ state: 'acknowledged' }).filter((r) => r.mappingVersion === opts.mappingVersion).map((r) => r.id) : ids;
      const results: ReboardResult[] = [];
      for (const id of targets) {
        if (ctx.shutdown.aborted) break;
        // A long run: the daemon may reload meanwhile, and one version boards at a time.
        assertSameMappingAsDaemon(rt.store.daemon, mine, ctx.clock.now(), 'loans reboard');
        const r = await reboardLoan(
          { store: rt.store, platform: rt.platform, mapper: rt.mapper, core: rt.core, fetchDocument: rt.fetchDocument, clock: rt.clock, logger: rt.logger, connectorVersion: CONNECTOR_VERSION, accountNumbers: rt.accountNumbers },
          id,
          { actor, reason: opts.reason.trim(), force: opts.force === true, signal: ctx.shutdown },
        );
        results.push(r);
        if (opts.json !== true) out(ctx, formatReboard(r));
      }
      if (opts.json === true) out(ctx, JSON.stringify(results));
      else out(ctx, targets.length === 0 ? 'no acknowledged loans match: nothing re-boarded' : `${results.filter((r) => r.outcome === 'rewritten').length} re-boarded, ${results.filter((r) => r.outcome === 'unchanged').length} unchanged, ${results.filter((r) => r.outcome !== 'rewritten' && r.outcome !== 'unchanged').length} not re-boarded (mapping ${rt.mapper.version}; no acknowledgement sent)`);
      const bad = results.filter((r) => r.outcome === 'failed' || r.outcome === 'would_quarantine' || r.outcome === 'not_acknowledged');
      if (bad.length > 0) throw new FatalError(`loans reboard: ${bad.length} loan(s) not re-boarded`);
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
