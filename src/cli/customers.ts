import type { Command } from 'commander';
import { openState } from '../app/session.js';
import { MATCHED_BY, customerView, listCustomers, showCustomer, type XrefRow } from '../ops/customers.js';
import { out, type CliContext } from './context.js';
import { shownTime, zonedJson } from './times.js';

function table(rows: readonly XrefRow[], zone: string): string {
  const cells = [
    ['ENTITY', 'CIF', 'MATCHED BY', 'FIRST LOAN', 'LAST LOAN', 'RESOLVED'],
    ...rows.map((r) => [
      r.entityId,
      r.cif ?? '(assigned by the core at create)',
      r.matchedBy,
      r.firstLoanId,
      r.lastLoanId,
      shownTime(r.resolvedAt, zone),
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
  const open = async () => (await openState(ctx)).store.customers;

  customers
    .command('show')
    .description(
      'one customer: by platform entity id, or every entity id on one CIF; with the loans that resolved it',
    )
    .argument('<key>', 'a platform business/person id, or a CIF')
    .option('--json', 'print JSON')
    .action(async (key: string, opts: { json?: boolean }) => {
      const { rows, loans } = await showCustomer(await open(), key);
      const zone = ctx.config().bank.timeZone;
      if (opts.json === true)
        return out(ctx, JSON.stringify(zonedJson({ customers: rows.map(customerView), loans }, zone)));
      const lines = [table(rows, zone), '', 'loans:'];
      for (const l of loans) {
        lines.push(
          `  ${l.loanId}  ${l.entityId}  CIF ${l.cif ?? '(new, core-assigned)'}  ${l.matchedBy}` +
            (l.existing
              ? ' (existing customer: no customer record written)'
              : ' (customer record written by this loan)') +
            (l.nameAgrees === false ? '  · name differs from the core (review item)' : '') +
            `  ${shownTime(l.resolvedAt, zone)}`,
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
      const rows = await listCustomers(await open(), opts);
      const zone = ctx.config().bank.timeZone;
      if (opts.json === true) {
        out(ctx, JSON.stringify(zonedJson(rows.map(customerView), zone)));
        return;
      }
      out(ctx, rows.length === 0 ? 'no customers resolved yet' : table(rows, zone));
    });
}
