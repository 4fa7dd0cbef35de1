import type { Command } from 'commander';
import { UsageError } from '../lib/errors.js';
import { openState } from '../app/session.js';
import { MATCHED_BY, type CustomerStore, type MatchedBy, type XrefRow } from '../store/identity/customers.js';
import { out, type CliContext } from './context.js';

const iso = (ms: number): string => new Date(ms).toISOString();

function view(r: XrefRow): Record<string, unknown> {
  return {
    entityId: r.entityId,
    cif: r.cif,
    matchedBy: r.matchedBy,
    firstLoanId: r.firstLoanId,
    lastLoanId: r.lastLoanId,
    resolvedAt: iso(r.resolvedAt),
    updatedAt: iso(r.updatedAt),
  };
}

function table(rows: readonly XrefRow[]): string {
  const cells = [
    ['ENTITY', 'CIF', 'MATCHED BY', 'FIRST LOAN', 'LAST LOAN', 'RESOLVED'],
    ...rows.map((r) => [
      r.entityId,
      r.cif ?? '(assigned by the core at create)',
      r.matchedBy,
      r.firstLoanId,
      r.lastLoanId,
      iso(r.resolvedAt),
    ]),
  ];
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((c) => (c[i] ?? '').length)));
  return cells
    .map((c) =>
      c
        .map((v, i) => v.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/**
 * `customers show ENTITY_ID|CIF` and `customers list`: the cross-reference the connector keeps
 * (platform entity id ↔ the bank's CIF, and how each was resolved). Read-only; tax ids are never
 * stored, so never shown.
 */
export function registerCustomersCommands(program: Command, ctx: CliContext): void {
  const customers = program
    .command('customers')
    .description(
      'the customer cross-reference: platform entity id ↔ CIF, and how each was resolved (crossref, tin, created)',
    );
  const open = async (): Promise<CustomerStore> => (await openState(ctx)).store.customers;

  customers
    .command('show')
    .description(
      'one customer: by platform entity id, or every entity id on one CIF; with the loans that resolved it',
    )
    .argument('<key>', 'a platform business/person id, or a CIF')
    .option('--json', 'print JSON')
    .action(async (key: string, opts: { json?: boolean }) => {
      const store = await open();
      const rows = await store.find(key);
      if (rows.length === 0)
        throw new UsageError(
          `no customer with entity id or CIF ${JSON.stringify(key)} in the cross-reference (see \`customers list\`)`,
        );
      const loans = [];
      for (const r of rows) loans.push(...(await store.forEntity(r.entityId)));
      if (opts.json === true) {
        out(
          ctx,
          JSON.stringify({
            customers: rows.map(view),
            loans: loans.map((l) => ({
              loanId: l.loanId,
              entityId: l.entityId,
              cif: l.cif,
              matchedBy: l.matchedBy,
              existing: l.existing,
              nameAgrees: l.nameAgrees,
              resolvedAt: iso(l.resolvedAt),
            })),
          }),
        );
        return;
      }
      const lines = [table(rows), '', 'loans:'];
      for (const l of loans) {
        lines.push(
          `  ${l.loanId}  ${l.entityId}  CIF ${l.cif ?? '(new, core-assigned)'}  ${l.matchedBy}${l.existing ? ' (existing customer: no customer record written)' : ' (customer record written by this loan)'}${l.nameAgrees === false ? '  · name differs from the core (review item)' : ''}  ${iso(l.resolvedAt)}`,
        );
      }
      out(ctx, lines.join('\n'));
    });

  customers
    .command('list')
    .description('the cross-reference, oldest first')
    .option('--matched-by <how>', `only entities first resolved this way (${MATCHED_BY.join(', ')})`)
    .option('--limit <n>', 'at most this many rows (default 1000)')
    .option('--json', 'print JSON')
    .action(async (opts: { matchedBy?: string; limit?: string; json?: boolean }) => {
      if (opts.matchedBy !== undefined && !(MATCHED_BY as readonly string[]).includes(opts.matchedBy)) {
        throw new UsageError(
          `--matched-by: expected one of ${MATCHED_BY.join(', ')}, got ${JSON.stringify(opts.matchedBy)}`,
        );
      }
      const limit = opts.limit === undefined ? 1000 : Number(opts.limit);
      if (!Number.isSafeInteger(limit) || limit < 1)
        throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(opts.limit)}`);
      const rows = await (
        await open()
      ).list({ ...(opts.matchedBy !== undefined ? { matchedBy: opts.matchedBy as MatchedBy } : {}), limit });
      if (opts.json === true) {
        out(ctx, JSON.stringify(rows.map(view)));
        return;
      }
      out(ctx, rows.length === 0 ? 'no customers resolved yet' : table(rows));
    });
}
