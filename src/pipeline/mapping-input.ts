import type { BoardingPackage, CanonicalLoanFields, DocumentFetcher } from '../core/port.js';
import type { PlatformApi } from '../platform/api.js';
import { queueItemSchema, type QueueItem } from '../contract/schemas.js';
import type { MappedRecord, MappingInput } from '../mapping/types.js';
import { maskRecordFields } from '../lib/redact.js';

/** Where the queue item a mapping saw came from (preview and dry run say so). */
export type InputSource = 'stored' | 'queue' | 'loan';

/** The queue item the pipeline stored when it took the loan from the queue; null when absent or unreadable. */
export function parseStoredItem(raw: string | null): QueueItem | null {
  if (raw === null) return null;
  try {
    const parsed = queueItemSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/**
 * What the pipeline maps for a queue item: the item itself (loan + boarding), the loan's entities
 * and its documents list. Two reads, made together.
 */
export async function fetchMappingInput(
  platform: Pick<PlatformApi, 'getEntities' | 'listDocuments'>,
  item: QueueItem,
  signal?: AbortSignal,
): Promise<MappingInput> {
  const opts = signal ? { signal } : {};
  const [entities, documents] = await Promise.all([
    platform.getEntities(item.id, opts),
    platform.listDocuments(item.id, opts),
  ]);
  return { loan: item, entities, documents };
}

/** Walks the live boarding queue for one loan (reads, inside the rate budget); null when it is not listed. */
export async function findInQueue(
  platform: Pick<PlatformApi, 'boardingQueue'>,
  loanId: string,
  signal?: AbortSignal,
): Promise<QueueItem | null> {
  for await (const page of platform.boardingQueue(signal ? { signal } : {})) {
    const hit = page.items.find((i) => i.id === loanId);
    if (hit) return hit;
  }
  return null;
}

/**
 * The queue item to map for one loan, as faithfully as the pipeline would: the stored one when the
 * connector knows the loan, else the one the live queue lists, else the bare loan (a loan that is
 * not released has no boarding object: `boarding.*` fields map empty, and the caller says so).
 */
/** The item a known loan is boarded from: the stored queue item, else the loan itself (one GET). */
export async function storedItemOrLoan(
  platform: Pick<PlatformApi, 'getLoan'>,
  loanId: string,
  stored: string | null,
  signal?: AbortSignal,
): Promise<QueueItem> {
  return (
    parseStoredItem(stored) ?? {
      ...(await platform.getLoan(loanId, signal ? { signal } : {})),
      boarding: null,
    }
  );
}

export async function queueItemFor(
  platform: Pick<PlatformApi, 'boardingQueue' | 'getLoan'>,
  loanId: string,
  stored: string | null,
  signal?: AbortSignal,
): Promise<{ item: QueueItem; source: InputSource }> {
  const fromStore = parseStoredItem(stored);
  if (fromStore) return { item: fromStore, source: 'stored' };
  const listed = await findInQueue(platform, loanId, signal);
  if (listed) return { item: listed, source: 'queue' };
  const loan = await platform.getLoan(loanId, signal ? { signal } : {});
  return { item: { ...loan, boarding: null }, source: 'loan' };
}

/** The full tax ids (digits) of a loan's entities: masked wherever they appear in its records. */
export function tinsOf(input: Pick<MappingInput, 'entities'> | null | undefined): string[] {
  const out: string[] = [];
  for (const b of input?.entities.businesses ?? [])
    if (typeof b.ein === 'string') out.push(b.ein.replace(/\D/g, ''));
  for (const p of input?.entities.people ?? [])
    if (typeof p.ssn === 'string') out.push(p.ssn.replace(/\D/g, ''));
  return out.filter((t) => t.length === 9);
}

/**
 * Records as the state database keeps them (tax id fields and the loan's tax ids masked, secrets
 * hidden; a 9-digit CIF stays readable), and as preview shows them without --show-pii.
 */
export function maskRecords(
  records: readonly MappedRecord[],
  input?: Pick<MappingInput, 'entities'> | null,
): MappedRecord[] {
  return maskRecordFields(records, tinsOf(input)) as MappedRecord[];
}

export function storableRecords(
  records: readonly MappedRecord[],
  input?: Pick<MappingInput, 'entities'> | null,
): string {
  return JSON.stringify(maskRecords(records, input));
}

/** The records last written to the core for this loan (masked), or null when none are kept. */
export function parseBoardedRecords(raw: string | null): MappedRecord[] | null {
  if (raw === null) return null;
  try {
    const v = JSON.parse(raw) as unknown;
    return Array.isArray(v) ? (v as MappedRecord[]) : null;
  } catch {
    return null;
  }
}

/** The loan's own fields the core keeps beside the mapped records (reconciliation compares them). */
export function canonicalFields(item: QueueItem): CanonicalLoanFields {
  return {
    centsAmount: item.centsAmount ?? null,
    bpsRate: item.bpsRate ?? null,
    maturityDate: item.maturityDate ?? null,
    firstPaymentDate: item.firstPaymentDate ?? null,
    paymentFrequency: item.paymentFrequency ?? null,
    productId: item.product?.id ?? null,
  };
}

/**
 * What a core write takes for a loan (the board's and a re-board's): its mapped records with the
 * loan's identity, the documents and the platform's values kept for reconciliation.
 */
export function boardingPackage(p: {
  loanId: string;
  item: QueueItem;
  accountNumber: string | null;
  outcome: { mappingVersion: string; records: MappedRecord[] };
  input: Pick<MappingInput, 'documents'>;
  connectorVersion: string;
  fetchDocument: DocumentFetcher;
}): BoardingPackage {
  return {
    loanId: p.loanId,
    loanNumber: p.item.loanNumber ?? null,
    accountNumber: p.accountNumber,
    mappingVersion: p.outcome.mappingVersion,
    connectorVersion: p.connectorVersion,
    records: p.outcome.records,
    documents: p.input.documents,
    fetchDocument: p.fetchDocument,
    source: canonicalFields(p.item),
  };
}
