import type { MappedRecord } from '../contract/records.js';
import type { Entities, PlatformDocument, QueueItem } from '../contract/schemas.js';

/**
 * The bank's numbers for a loan (issue 23): its core account number (`$accountNumber()`; null
 * when the core assigns it) and, per platform entity id, the customer's CIF (`$cif(entity)`).
 */
export interface MappingIdentity {
  accountNumber: string | null;
  /** By platform entity id (customer match). */
  customers: Record<string, MappedCustomer>;
}

/** One business or person as the core knows it (customer match, `$cif(entity)`). */
export interface MappedCustomer {
  /** The bank's customer number; null for a new customer whose number the core assigns (Fineract). */
  cif: string | null;
  matchedBy: 'crossref' | 'tin' | 'created';
  /** Already in the core: no customer record is written, records reference its CIF. */
  existing: boolean;
}

/** What a mapping sees: the queue item (loan + boarding), its entities and documents list, and the bank's numbers. */
export interface MappingInput {
  loan: QueueItem;
  entities: Entities;
  documents: PlatformDocument[];
  /** Absent in a fixture or preview that does not give one: `$accountNumber()` is then empty. */
  identity?: MappingIdentity;
}

/** One record for the core (defined in contract/: the core adapters and the file layouts read it too). */
export type { MappedRecord } from '../contract/records.js';

export type MappingIssueCode =
  | 'mapping' // expression failed / produced a value of the wrong shape
  | 'validation' // output schema violated (required field missing, bad enum…)
  | 'tin_incomplete' // a full tax id is required and only the last 4 digits are known
  | 'lookup_missing' // $lookup key absent and no default given
  | 'contradictory' // the data contradicts itself (no borrower, interest-only beyond the term…)
  // warnings (the loan boards; a person reviews):
  | 'approximated' // a schedule convention rounded (payments, interest-only periods, irregular payments)
  | 'defaulted' // a lookup fell back to its default (an unknown role or enum value)
  | 'optional_field'; // an optional field could not be mapped and was left out (or took its fallback)

export interface MappingIssue {
  code: MappingIssueCode;
  /** Mapping file (relative to the mapping dir), line and column of the expression. */
  file: string;
  line: number;
  column: number;
  /** Target record type and field, e.g. loan.principal */
  target: string;
  field: string;
  /** Input path the expression read, when known (e.g. loan.paymentFrequency). */
  inputPath?: string;
  message: string;
}

/**
 * Three outcomes (design.md, round 2): board (`ok`, no warnings), board with warnings (`ok`, each
 * warning a review item for a person: a convention approximated, a lookup fell back to its
 * default), quarantine (`ok: false`: contradictory data or a bank's explicit reject).
 */
export type MappingOutcome =
  | { ok: true; mappingVersion: string; records: MappedRecord[]; warnings?: MappingIssue[] }
  | { ok: false; mappingVersion: string; issues: MappingIssue[] };

/**
 * What the engine reads of a set's file layout (`layout.yaml`, compiled by core/file/layout and
 * loaded with the set by src/mapping-sets): the fixed-width columns and the record fields they
 * take, to tell where `$accountNumber()` lands in a place of fixed size. The engine never imports
 * the file core; its Layout satisfies this.
 */
export interface LayoutColumnsView {
  readonly files: ReadonlyArray<{
    name: string;
    record: string;
    format: string;
    columns: ReadonlyArray<{ name: string; field?: string; length: number }>;
  }>;
}

/**
 * A compiled mapping (the engine). Pure: no I/O after loading. The set's layout travels beside it
 * (src/mapping-sets).
 */
export interface Mapper {
  /** Hash of the mapping files: stamped on every core record and stored per loan. */
  readonly version: string;
  readonly name: string;
  /**
   * Where the set puts `$accountNumber()` into a place of fixed size (start-up checks the pool's width
   * against them).
   */
  readonly accountNumberSinks?: ReadonlyArray<{ where: string; size: number }>;
  map(input: MappingInput): Promise<MappingOutcome>;
}

export function formatIssue(i: MappingIssue): string {
  return (
    `${i.file}:${i.line}:${i.column} ${i.target}.${i.field}: ` +
    `${i.message}${i.inputPath ? ` (input ${i.inputPath})` : ''}`
  );
}
