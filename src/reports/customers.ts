import { localDate } from '../lib/calendar.js';
import type { ReportReads } from '../store/index.js';

/** New and matched customers per bank day, from the loans written to the core (customer match). */
export interface CustomerDay {
  date: string;
  /** New customers: a customer record written by the loan. */
  created: number;
  /** Existing customers found by tax id (the core's, or created by an earlier loan under another entity id). */
  matchedByTin: number;
  /** Existing customers found in the connector's cross-reference (entity id → CIF). */
  matchedByCrossref: number;
  /** Matched customers whose name in the core differs (review items). */
  nameReviews: number;
}

export interface CustomerSection {
  since: string;
  days: CustomerDay[];
  totals: Omit<CustomerDay, 'date'>;
}

/** Days in the report's window (since, else the last 30 days), in the bank's time zone. */
export async function computeCustomerDays(
  reads: Pick<ReportReads, 'customerResolutions'>,
  sinceMs: number,
  asOfMs: number,
  timeZone: string,
): Promise<CustomerSection> {
  const days = new Map<string, CustomerDay>();
  const totals = { created: 0, matchedByTin: 0, matchedByCrossref: 0, nameReviews: 0 };
  for await (const r of reads.customerResolutions(sinceMs, asOfMs + 1)) {
    const date = localDate(r.resolvedAt, timeZone);
    let d = days.get(date);
    if (d === undefined)
      days.set(date, (d = { date, created: 0, matchedByTin: 0, matchedByCrossref: 0, nameReviews: 0 }));
    const key = !r.existing ? 'created' : r.matchedBy === 'crossref' ? 'matchedByCrossref' : 'matchedByTin';
    d[key] += 1;
    totals[key] += 1;
    if (r.nameAgrees === false) {
      d.nameReviews += 1;
      totals.nameReviews += 1;
    }
  }
  return {
    since: new Date(sinceMs).toISOString(),
    days: [...days.values()].sort((a, b) => a.date.localeCompare(b.date)),
    totals,
  };
}
