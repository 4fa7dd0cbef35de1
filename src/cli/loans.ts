import type { Command } from 'commander';
import { planRetry, planSkip, retryLoan, skipLoan, type OpPlan } from '../boarding/ops.js';
import { FatalError, UsageError } from '../lib/errors.js';
import type { BoardingStore } from '../store/index.js';
import { LOAN_STATES, isLoanState } from '../store/loan-states.js';
import { runningDaemons } from '../editloop/daemon-guard.js';
import {
  gatherLoanHistory,
  lastReviewItems,
  resolveLoanRef,
  loanHistoryJson,
  loanView,
} from '../editloop/loan-history.js';
import { out, type CliContext } from './context.js';
import { writtenForCurrentRelease } from '../boarding/release.js';
import { assertSameMappingAsDaemon } from '../editloop/daemon-guard.js';
import { previewReboard, reboardLoan, type ReboardPreview, type ReboardResult } from '../editloop/reboard.js';
import { buildRuntime, loadMapperFromConfig } from '../app/runtime.js';
import { confirmBulk } from './confirm.js';
import { followPlatformWaits } from './progress.js';
import { openPlatformSession, openState } from '../app/session.js';
import { accountNumbersFromConfig } from '../boarding/identity.js';
import { CONNECTOR_VERSION } from '../version.js';
import {
  QUARANTINE_REASONS,
  RETRYABLE_STATES,
  SKIPPABLE_STATES,
  type LoanState,
  type QuarantineReason,
} from '../store/loan-states.js';

async function loanStore(ctx: CliContext): Promise<BoardingStore> {
  return (await openState(ctx)).store;
}

function actorOf(ctx: CliContext, by: string | undefined): string {
  const who = by ?? ctx.env['USER'] ?? ctx.env['USERNAME'];
  if (who === undefined || who.trim() === '')
    throw new UsageError('who is acting? pass --by NAME (no USER in the environment)');
  return who.trim();
}

/** --since: an ISO date-time, or how long ago (30m, 2h, 1d). */
function parseSince(v: string, now: number): number {
  const rel = /^(\d+)\s*(m|h|d)$/.exec(v.trim());
  if (rel)
    return now - Number(rel[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[rel[2] as 'm' | 'h' | 'd'];
  const t = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v.trim()) || Number.isNaN(t))
    throw new UsageError(
      `--since: expected an ISO date-time (2026-11-25T09:00:00Z) or a duration (30m, 2h, 1d), got ${JSON.stringify(v)}`,
    );
  return t;
}

function formatReboard(r: ReboardResult | Exclude<ReboardPreview, { outcome: 'would_rewrite' }>): string {
  switch (r.outcome) {
    case 'rewritten':
      return [
        `loan ${r.loanId}: re-boarded (${r.previousVersion ?? '?'} → ${r.mappingVersion}; core ${r.coreReference})`,
        ...r.changes.slice(0, 30).map((c) => `    ${c}`),
        ...(r.changes.length > 30 ? [`    … ${r.changes.length - 30} more`] : []),
      ].join('\n');
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
  return cells
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  '))
    .join('\n');
}

const view = loanView;

export function registerLoansCommands(program: Command, ctx: CliContext): void {
  const loans = program.command('loans').description('inspect and operate on loans in the state database');

  loans
    .command('list')
    .description('list loans with their boarding state')
    .option('--state <state>', `only loans in this state (${LOAN_STATES.join(', ')})`)
    .option('--limit <n>', 'at most this many (newest first)')
    .option('--warnings', 'only loans that mapped with review items (boarded with warnings)')
    .option('--json', 'print JSON (one array)')
    .action(async (opts: { state?: string; limit?: string; warnings?: boolean; json?: boolean }) => {
      if (opts.state !== undefined && !isLoanState(opts.state)) {
        throw new UsageError(
          `--state: expected one of ${LOAN_STATES.join(', ')}, got ${JSON.stringify(opts.state)}`,
        );
      }
      const limit = opts.limit === undefined ? undefined : Number(opts.limit);
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1))
        throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(opts.limit)}`);
      const store = await loanStore(ctx);
      const rows = await store.loans.list({
        ...(opts.state !== undefined && isLoanState(opts.state) ? { state: opts.state } : {}),
        ...(limit ? { limit } : {}),
        ...(opts.warnings === true ? { withReviewItems: true } : {}),
      });
      if (opts.json === true) {
        out(ctx, JSON.stringify(rows.map(view)));
        return;
      }
      if (rows.length === 0) {
        out(
          ctx,
          opts.warnings
            ? 'no loans with review items'
            : opts.state
              ? `no loans in state ${opts.state}`
              : 'no loans yet (run `sync --once`)',
        );
        return;
      }
      const table = [
        [
          'ID',
          'LOAN NUMBER',
          'STATE',
          'REASON',
          'REVIEW',
          'ATTEMPTS',
          'NEXT ATTEMPT',
          'CORE REF',
          'LAST ERROR',
        ],
      ];
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
      const counts = await store.loans.countByState();
      out(
        ctx,
        `\n${rows.length} loan(s); all states: ${Object.entries(counts)
          .filter(([, n]) => n > 0)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}`,
      );
    });

  loans
    .command('show')
    .description('show one loan: state, core reference, errors, idempotency keys and its full history')
    .argument('<id>', "platform loan id, or a loan number (the platform's, or the bank's account number)")
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const store = await loanStore(ctx);
      const found = await resolveLoanRef(store, ref);
      if (found.kind === 'ambiguous')
        throw new UsageError(
          `${ref} is the loan or account number of ${found.ids.length} loans: ${found.ids.join(', ')}; give the platform loan id`,
        );
      if (found.kind === 'none')
        throw new UsageError(
          `no loan ${ref} in the state database, by platform id, loan number or account number (see \`loans list\`)`,
        );
      const h = await gatherLoanHistory(store, found.id, ctx.clock.now());
      if (!h) throw new UsageError(`no loan ${ref} in the state database (see \`loans list\`)`);
      const { row, events, keys, daemon, customers, accountNumber } = h;
      const identity = { accountNumberSource: h.accountNumberSource };
      if (opts.json === true) {
        out(ctx, JSON.stringify(loanHistoryJson(h)));
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
      if (row.lastErrorCode)
        lines.push(`  last error:      [${row.lastErrorCode}] ${row.lastErrorMessage ?? ''}`);
      if (customers.length > 0) {
        // Customer match: each business and person → the bank's CIF, and how it was found.
        lines.push('', 'identity (customers):');
        for (const c of customers) {
          lines.push(
            `  ${c.entityId}  CIF ${c.cif ?? '(assigned by the core at create)'}  ${c.matchedBy}${c.existing ? ' · existing customer' : ' · new customer (this loan creates it)'}${c.nameAgrees === false ? ' · name differs from the core (review item)' : ''}`,
          );
        }
      }
      const review = lastReviewItems(h);
      if (review) {
        lines.push('', `review items (boarded with warnings, ${iso(review.at)}):`);
        for (const w of review.items) lines.push(`  [${w.code}] ${w.field}: ${w.message}  (${w.at})`);
      }
      lines.push('', 'idempotency keys:');
      if (keys.length === 0) lines.push('  (none)');
      for (const k of keys)
        lines.push(
          `  ${k.key}  ${k.operation}  created ${iso(k.createdAt)}  ${k.completedAt !== null ? `completed ${iso(k.completedAt)} (${k.status ?? ''})` : 'not completed'}`,
        );
      lines.push('', 'history:');
      for (const e of events) {
        const move = e.toState
          ? `${e.fromState ?? '(new)'} → ${e.toState}`
          : e.fromState
            ? `(${e.fromState})`
            : '';
        const detail = e.detail === null ? '' : ` ${JSON.stringify(e.detail)}`;
        lines.push(
          `  ${iso(e.at)}  ${e.kind.padEnd(10)} ${move}${e.reason ? `  ${e.reason}` : ''}${e.actor !== 'connector' ? `  by ${e.actor}` : ''}${detail.length > 300 ? `${detail.slice(0, 300)}…` : detail}`,
        );
      }
      out(ctx, lines.join('\n'));
    });

  loans
    .command('retry')
    .description(
      'put quarantined (or retry_wait, skipped) loans back in the queue, audited; a running daemon starts a cycle at once',
    )
    .argument('[ids...]', 'platform loan ids (or --all)')
    .option('--all', 'every quarantined loan (narrow with --reason, --since, --state)')
    .option(
      '--reason <reason>',
      `with --all: only loans quarantined for this reason (${QUARANTINE_REASONS.join(', ')})`,
    )
    .option(
      '--since <time>',
      'with --all: only loans that entered their state since this ISO time or this long ago (30m, 2h, 1d)',
    )
    .option('--state <state>', 'with --all: quarantined (default), retry_wait or skipped')
    .option('--by <name>', 'who is acting (default: $USER)')
    .option('--dry-run', 'list what would be retried (and what cannot be); change nothing')
    .option('--yes', 'more than boarding.confirmAbove loans: go ahead without asking')
    .addHelpText(
      'after',
      '\nMore loans than boarding.confirmAbove (default 10) ask for confirmation on a terminal; without one,\n--yes is needed (exit 2 otherwise, nothing done). One loan that cannot be retried stops them all (exit 2).',
    )
    .action(
      async (
        ids: string[],
        opts: {
          all?: boolean;
          reason?: string;
          since?: string;
          state?: string;
          by?: string;
          dryRun?: boolean;
          yes?: boolean;
        },
      ) => {
        const actor = opts.dryRun === true ? null : actorOf(ctx, opts.by);
        const store = await loanStore(ctx);
        const now = ctx.clock.now();
        let targets: string[];
        if (opts.all === true) {
          if (ids.length > 0) throw new UsageError('loans retry: give loan ids or --all, not both');
          targets = await selectLoans(
            store,
            { state: opts.state, quarantineReason: opts.reason, since: opts.since, reasonFlag: '--reason' },
            RETRYABLE_STATES,
            now,
          );
        } else {
          if (opts.reason !== undefined || opts.since !== undefined || opts.state !== undefined)
            throw new UsageError('--reason, --since and --state go with --all');
          if (ids.length === 0) throw new UsageError('loans retry: give loan ids or --all');
          targets = [...new Set(ids)];
        }
        const plans: OpPlan[] = [];
        for (const id of targets) plans.push(await planRetry(store.loans, id));
        if (opts.dryRun === true) {
          printPlans(ctx, plans, 'retried', (p) =>
            p.ackOnly
              ? 'would be queued (the core already holds this release: the next cycle only acknowledges it)'
              : 'would be queued',
          );
          return;
        }
        if (targets.length === 0) {
          out(ctx, 'no loans match: nothing retried');
          return;
        }
        refuseIfAny(plans, 'retried');
        await confirmBulk(ctx, {
          command: 'loans retry',
          action: `queue ${targets.length} loans again`,
          count: targets.length,
          threshold: ctx.config().boarding.confirmAbove,
          yes: opts.yes === true,
          sample: targets,
        });
        const by = actor as string;
        const progress = ctx.progress();
        let ackOnly = 0;
        for (const [i, id] of targets.entries()) {
          progress.status(`retrying ${i + 1}/${targets.length}`);
          const row = await retryLoan(
            store.loans,
            id,
            by,
            now,
            opts.all === true
              ? { bulk: { reason: opts.reason ?? null, since: opts.since ?? null } }
              : undefined,
          );
          if (writtenForCurrentRelease(row)) ackOnly += 1;
          if (targets.length <= 20)
            out(
              ctx,
              `loan ${id} queued by ${by}${writtenForCurrentRelease(row) ? ' (the core already holds this release: the next cycle only acknowledges it)' : ''}`,
            );
        }
        progress.done();
        if (targets.length > 20)
          out(
            ctx,
            `${targets.length} loans queued by ${by}${ackOnly > 0 ? ` (${ackOnly} only need their acknowledgement)` : ''}`,
          );
        // Do not make the operator wait for the schedule: a running daemon polls for this request.
        const daemons = await runningDaemons(store.daemon, now);
        if (daemons.length > 0 && (await store.daemon.requestCycle(by, now)) > 0)
          out(ctx, `asked the running daemon (pid ${daemons.map((d) => d.pid).join(', ')}) for a cycle now`);
        else out(ctx, 'no daemon is running: board them with `sync --once` (or start `run`)');
      },
    );

  loans
    .command('reboard')
    .description(
      'write acknowledged loans to the core again with the mapping on disk (after a mapping fix); idempotent by external id, no second acknowledgement, audited',
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
      '\nExit status: 0 when every loan was re-written (or was unchanged); 1 when one failed or would now be quarantined.\nWith --dry-run: 0 when every loan could be read (whatever it would do), 1 when one could not.\nMore loans than boarding.confirmAbove (default 10) ask for confirmation on a terminal; without one,\n--yes is needed (exit 2 otherwise, nothing done).',
    )
    .action(
      async (
        ids: string[],
        opts: {
          mappingVersion?: string;
          reason?: string;
          by?: string;
          force?: boolean;
          dryRun?: boolean;
          yes?: boolean;
          json?: boolean;
        },
      ) => {
        if (ids.length > 0 === (opts.mappingVersion !== undefined))
          throw new UsageError('loans reboard: give loan ids or --mapping-version V (one of them)');
        const pick = async (store: BoardingStore): Promise<string[]> =>
          opts.mappingVersion !== undefined
            ? (await store.loans.list({ state: 'acknowledged' }))
                .filter((r) => r.mappingVersion === opts.mappingVersion)
                .map((r) => r.id)
            : [...new Set(ids)];
        if (opts.dryRun === true) {
          await reboardDryRun(ctx, pick, { force: opts.force === true, json: opts.json === true });
          return;
        }
        const actor = actorOf(ctx, opts.by);
        const reason = opts.reason?.trim() ?? '';
        if (reason === '')
          throw new UsageError('loans reboard: --reason must say why (it is kept in the audit log)');
        const progress = ctx.progress();
        const rt = await buildRuntime(ctx.config(), ctx.logger(), { clock: ctx.clock });
        ctx.onClose(() => rt.close());
        const mine = { version: rt.mapper.version, dir: rt.config.mappings.dir };
        await assertSameMappingAsDaemon(rt.store.daemon, mine, ctx.clock.now(), 'loans reboard');
        const targets = await pick(rt.store);
        await confirmBulk(ctx, {
          command: 'loans reboard',
          action: `re-write ${targets.length} loans in the core with mapping ${rt.mapper.version}`,
          count: targets.length,
          threshold: rt.config.boarding.confirmAbove,
          yes: opts.yes === true,
          sample: targets,
        });
        const results: ReboardResult[] = [];
        followPlatformWaits(progress, rt.platform);
        for (const [i, id] of targets.entries()) {
          if (ctx.shutdown.aborted) break;
          progress.status(`re-boarding ${i + 1}/${targets.length}: loan ${id}`);
          // A long run: the daemon may reload meanwhile, and one version boards at a time.
          await assertSameMappingAsDaemon(rt.store.daemon, mine, ctx.clock.now(), 'loans reboard');
          const r = await reboardLoan(
            {
              store: rt.store,
              platform: rt.platform,
              mapper: rt.mapper,
              core: rt.core,
              fetchDocument: rt.fetchDocument,
              clock: rt.clock,
              logger: rt.logger,
              connectorVersion: CONNECTOR_VERSION,
              accountNumbers: rt.accountNumbers,
            },
            id,
            { actor, reason, force: opts.force === true, signal: ctx.shutdown },
          );
          results.push(r);
          if (opts.json !== true) out(ctx, formatReboard(r));
        }
        progress.done();
        if (opts.json === true) out(ctx, JSON.stringify(results));
        else
          out(
            ctx,
            targets.length === 0
              ? 'no acknowledged loans match: nothing re-boarded'
              : `${results.filter((r) => r.outcome === 'rewritten').length} re-boarded, ${results.filter((r) => r.outcome === 'unchanged').length} unchanged, ${results.filter((r) => r.outcome !== 'rewritten' && r.outcome !== 'unchanged').length} not re-boarded (mapping ${rt.mapper.version}; no acknowledgement sent)`,
          );
        const bad = results.filter(
          (r) =>
            r.outcome === 'failed' || r.outcome === 'would_quarantine' || r.outcome === 'not_acknowledged',
        );
        if (bad.length > 0) throw new FatalError(`loans reboard: ${bad.length} loan(s) not re-boarded`);
      },
    );

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
    .option(
      '--since <time>',
      'with --all: only loans that entered their state since this ISO time or this long ago (30m, 2h, 1d)',
    )
    .option('--by <name>', 'who is acting (default: $USER)')
    .option('--dry-run', 'list what would be skipped (and what cannot be); change nothing')
    .option('--yes', 'more than boarding.confirmAbove loans: go ahead without asking')
    .addHelpText(
      'after',
      '\nMore loans than boarding.confirmAbove (default 10) ask for confirmation on a terminal; without one,\n--yes is needed (exit 2 otherwise, nothing done). One loan that cannot be skipped stops them all (exit 2).',
    )
    .action(
      async (
        ids: string[],
        opts: {
          reason?: string;
          all?: boolean;
          state?: string;
          quarantineReason?: string;
          since?: string;
          by?: string;
          dryRun?: boolean;
          yes?: boolean;
        },
      ) => {
        const store = await loanStore(ctx);
        const now = ctx.clock.now();
        let targets: string[];
        if (opts.all === true) {
          if (ids.length > 0) throw new UsageError('loans skip: give loan ids or --all, not both');
          targets = await selectLoans(
            store,
            {
              state: opts.state,
              quarantineReason: opts.quarantineReason,
              since: opts.since,
              reasonFlag: '--quarantine-reason',
            },
            SKIPPABLE_STATES,
            now,
          );
        } else {
          if (opts.quarantineReason !== undefined || opts.since !== undefined || opts.state !== undefined)
            throw new UsageError('--state, --quarantine-reason and --since go with --all');
          if (ids.length === 0) throw new UsageError('loans skip: give loan ids or --all');
          targets = [...new Set(ids)];
        }
        const plans: OpPlan[] = [];
        for (const id of targets) plans.push(await planSkip(store.loans, id));
        if (opts.dryRun === true) {
          printPlans(ctx, plans, 'skipped', () => 'would be skipped');
          return;
        }
        const actor = actorOf(ctx, opts.by);
        const reason = opts.reason?.trim() ?? '';
        if (reason === '')
          throw new UsageError('loans skip: --reason must say why (it is kept in the audit log)');
        if (targets.length === 0) {
          out(ctx, 'no loans match: nothing skipped');
          return;
        }
        refuseIfAny(plans, 'skipped');
        await confirmBulk(ctx, {
          command: 'loans skip',
          action: `skip ${targets.length} loans`,
          count: targets.length,
          threshold: ctx.config().boarding.confirmAbove,
          yes: opts.yes === true,
          sample: targets,
        });
        const progress = ctx.progress();
        for (const [i, id] of targets.entries()) {
          progress.status(`skipping ${i + 1}/${targets.length}`);
          await skipLoan(store.loans, id, reason, actor, now);
          if (targets.length <= 20) out(ctx, `loan ${id} skipped by ${actor}: ${reason}`);
        }
        progress.done();
        if (targets.length > 20) out(ctx, `${targets.length} loans skipped by ${actor}: ${reason}`);
      },
    );
}

/** --all of `loans retry` / `loans skip`: the loans in a state, narrowed by quarantine reason and age. */
async function selectLoans(
  store: BoardingStore,
  f: {
    state: string | undefined;
    quarantineReason: string | undefined;
    since: string | undefined;
    reasonFlag: string;
  },
  allowed: readonly LoanState[],
  now: number,
): Promise<string[]> {
  const state = f.state ?? 'quarantined';
  if (!(allowed as readonly string[]).includes(state))
    throw new UsageError(`--state: expected ${allowed.join(', ')}, got ${JSON.stringify(state)}`);
  if (
    f.quarantineReason !== undefined &&
    !(QUARANTINE_REASONS as readonly string[]).includes(f.quarantineReason)
  ) {
    throw new UsageError(
      `${f.reasonFlag}: expected one of ${QUARANTINE_REASONS.join(', ')}, got ${JSON.stringify(f.quarantineReason)}`,
    );
  }
  const since = f.since === undefined ? null : parseSince(f.since, now);
  return (
    await store.loans.list({
      state: state as LoanState,
      ...(since !== null ? { enteredSince: since } : {}),
      ...(f.quarantineReason !== undefined
        ? { quarantineReason: f.quarantineReason as QuarantineReason }
        : {}),
    })
  ).map((r) => r.id);
}

/** Several loans are changed together or not at all: one that cannot be is named, and nothing is done. */
function refuseIfAny(plans: readonly OpPlan[], verb: string): void {
  const refused = plans.filter((p): p is Extract<OpPlan, { ok: false }> => !p.ok);
  if (refused.length === 0) return;
  const why =
    refused
      .slice(0, 10)
      .map((p) => p.why)
      .join('; ') + (refused.length > 10 ? `; … ${refused.length - 10} more` : '');
  throw new UsageError(plans.length > 1 ? `${why}: nothing ${verb} (see \`--dry-run\`)` : why);
}

/** The --dry-run listing of `loans retry` / `loans skip`. */
function printPlans(
  ctx: CliContext,
  plans: readonly OpPlan[],
  verb: string,
  would: (p: Extract<OpPlan, { ok: true }>) => string,
): void {
  out(ctx, `dry run: nothing changed`);
  for (const p of plans) {
    if (p.ok)
      out(
        ctx,
        `loan ${p.loanId}${p.loanNumber ? ` (${p.loanNumber})` : ''} ${p.state}${p.quarantineReason ? ` (${p.quarantineReason})` : ''}: ${would(p)}`,
      );
    else out(ctx, `loan ${p.loanId}: cannot be ${verb}: ${p.why}`);
  }
  const ok = plans.filter((p) => p.ok).length;
  out(
    ctx,
    plans.length === 0
      ? 'no loans match'
      : `${ok} loan(s) would be ${verb}${ok < plans.length ? `, ${plans.length - ok} cannot be (the command would refuse them all)` : ''}`,
  );
}

function formatPreview(r: ReboardPreview): string {
  if (r.outcome !== 'would_rewrite') {
    if (r.outcome === 'unchanged')
      return `loan ${r.loanId}: unchanged (already boarded with ${r.mappingVersion} from the same data; --force would write anyway)`;
    if (r.outcome === 'failed') return `loan ${r.loanId}: could not be read: ${r.message}`;
    return formatReboard(r);
  }
  const head = `loan ${r.loanId}: would re-write (${r.previousVersion ?? '?'} → ${r.mappingVersion}): ${r.changes.length === 0 ? 'no field changes' : `${r.changes.length} change(s)`}`;
  return [
    head,
    ...r.changes.slice(0, 30).map((c) => `    ${c}`),
    ...(r.changes.length > 30 ? [`    … ${r.changes.length - 30} more`] : []),
  ].join('\n');
}

/**
 * `loans reboard --dry-run`: reads (state database, platform within the rate budget) and maps
 * only; no core is opened, nothing is written, no state or audit event changes.
 */
async function reboardDryRun(
  ctx: CliContext,
  pick: (store: BoardingStore) => Promise<string[]>,
  opts: { force: boolean; json: boolean },
): Promise<void> {
  const progress = ctx.progress();
  const mapper = await loadMapperFromConfig(ctx.config());
  const { store, platform } = await openPlatformSession(ctx);
  // As the re-board would map: the loan's number, or (pool) the next one, never allocated here.
  const accountNumbers = accountNumbersFromConfig(ctx.config(), store, ctx.logger());
  const targets = await pick(store);
  const results: ReboardPreview[] = [];
  followPlatformWaits(progress, platform);
  for (const [i, id] of targets.entries()) {
    if (ctx.shutdown.aborted) break;
    progress.status(`dry run: reading and mapping ${i + 1}/${targets.length}: loan ${id}`);
    const r = await previewReboard({ store, platform, mapper, accountNumbers }, id, {
      force: opts.force,
      signal: ctx.shutdown,
    });
    results.push(r);
    if (!opts.json) out(ctx, formatPreview(r));
  }
  progress.done();
  if (opts.json) out(ctx, JSON.stringify(results));
  else {
    const n = (o: ReboardPreview['outcome']): number => results.filter((r) => r.outcome === o).length;
    out(
      ctx,
      targets.length === 0
        ? 'no acknowledged loans match: nothing would be re-boarded'
        : `dry run with mapping ${mapper.version}: ${n('would_rewrite')} would be re-written, ${n('unchanged')} unchanged, ${results.length - n('would_rewrite') - n('unchanged')} would not be re-boarded; nothing was written to the core, no state changed`,
    );
  }
  const unreadable = results.filter((r) => r.outcome === 'failed').length;
  if (unreadable > 0)
    throw new FatalError(`loans reboard --dry-run: ${unreadable} loan(s) could not be read`);
}
