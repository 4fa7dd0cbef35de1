/**
 * `customers show|list`: the cross-reference the connector keeps (platform entity id ↔ the bank's
 * CIF, and how each was resolved). Read-only; tax ids are never stored, so never shown.
 */
import { UsageError } from '../lib/errors.js';
import { MATCHED_BY, type CustomerStore, type MatchedBy, type XrefRow } from '../store/identity/customers.js';

export { MATCHED_BY, type XrefRow };

const iso = (ms: number): string => new Date(ms).toISOString();

export function customerView(r: XrefRow): Record<string, unknown> {
  const { entityId, cif, matchedBy, firstLoanId, lastLoanId } = r;
  return {
    entityId,
    cif,
    matchedBy,
    firstLoanId,
    lastLoanId,
    resolvedAt: iso(r.resolvedAt),
    updatedAt: iso(r.updatedAt),
  };
}

/** One customer by entity id, or every entity id on one CIF, with the loans that resolved them. */
export async function showCustomer(store: CustomerStore, key: string) {
  const rows = await store.find(key);
  if (rows.length === 0)
    throw new UsageError(
      `no customer with entity id or CIF ${JSON.stringify(key)} in the cross-reference (see \`customers list\`)`,
    );
  const loans = [];
  for (const r of rows) loans.push(...(await store.forEntity(r.entityId)));
  return {
    rows,
    loans: loans.map((l) => {
      const { loanId, entityId, cif, matchedBy, existing, nameAgrees } = l;
      return { loanId, entityId, cif, matchedBy, existing, nameAgrees, resolvedAt: iso(l.resolvedAt) };
    }),
  };
}

export async function listCustomers(
  store: CustomerStore,
  input: { matchedBy?: string | undefined; limit?: string | undefined },
): Promise<XrefRow[]> {
  if (input.matchedBy !== undefined && !(MATCHED_BY as readonly string[]).includes(input.matchedBy))
    throw new UsageError(
      `--matched-by: expected one of ${MATCHED_BY.join(', ')}, got ${JSON.stringify(input.matchedBy)}`,
    );
  const limit = input.limit === undefined ? 1000 : Number(input.limit);
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(input.limit)}`);
  const matchedBy = input.matchedBy as MatchedBy | undefined;
  return store.list({ ...(matchedBy !== undefined ? { matchedBy } : {}), limit });
}
