import { formatWallTime, toWallTime } from '../lib/calendar.js';
import type { Business, Entities, Person, PlatformDocument, QueueItem } from '../contract/schemas.js';
import type { MappingIdentity } from '../mapping/types.js';
import type { FilePart, ImagingField, ImagingLayout } from './layout.js';

/**
 * Index records: each document's field values (evaluated once, when its loan is boarded) and the
 * index file a batch's records render to (when the batch is written). The values are stored with
 * the document's row; the file parts (name, path, sha256) are filled in at the batch's write, so a
 * batch's index is a pure function of its rows and is written again identically after a crash.
 */

/** A value that cannot be put in the index as it is: the loan's export stops and a person looks. */
export class ImagingRenderError extends Error {
  override readonly name = 'ImagingRenderError';
}

/** What the field expressions read: `loan`, `owner`, `document`, `identity`, `documentType`. */
export interface DocumentContext {
  loan: QueueItem;
  owner: Record<string, unknown> | null;
  document: PlatformDocument;
  identity: { accountNumber: string | null; cif: string | null; customers: Record<string, unknown> };
  documentType: string;
}

export interface DocumentTypeChoice {
  documentType: string;
  /** The layout's default was used: a review item on the loan. */
  fellBack: boolean;
}

/** Platform category and requirement name → the bank's document type: exact, then category, then requirement. */
export function documentTypeOf(layout: ImagingLayout, doc: PlatformDocument): DocumentTypeChoice {
  const t = layout.documentTypes;
  if (t === undefined) return { documentType: doc.category ?? doc.type ?? '', fellBack: false };
  const category = doc.category ?? '';
  const requirement = doc.requirement?.name ?? '';
  const any = (v: string): boolean => v === '' || v === '*';
  const hit =
    t.rules.find((r) => r.category === category && r.requirement === requirement && requirement !== '') ??
    t.rules.find((r) => r.category === category && any(r.requirement)) ??
    t.rules.find((r) => any(r.category) && r.requirement === requirement && requirement !== '');
  return hit
    ? { documentType: hit.documentType, fellBack: false }
    : { documentType: t.fallback, fellBack: true };
}

function entityName(e: Business | Person, kind: 'business' | 'person'): string | null {
  if (kind === 'business') return (e as Business).name ?? null;
  const p = e as Person;
  const n = [p.firstName, p.lastName].filter(Boolean).join(' ').trim();
  return n === '' ? null : n;
}

/**
 * The business or person a document belongs to: its requirement's entity, else the borrower (the
 * borrowing business, else the first person). Its CIF comes from the customer match when the loan has one.
 */
export function ownerOf(
  doc: PlatformDocument,
  entities: Entities,
  identity: MappingIdentity | undefined,
): Record<string, unknown> | null {
  const withKind = [
    ...entities.businesses.map((e) => ({ e, kind: 'business' as const })),
    ...entities.people.map((e) => ({ e, kind: 'person' as const })),
  ];
  const id = doc.requirement?.entityID;
  const found =
    (id ? withKind.find((x) => x.e.id === id) : undefined) ??
    withKind.find((x) => x.kind === 'business' && x.e.role?.toLowerCase() === 'borrower') ??
    withKind.find((x) => x.e.role?.toLowerCase() === 'borrower') ??
    withKind[0];
  if (found === undefined) return null;
  const customer = identity?.customers[found.e.id];
  return { ...found.e, kind: found.kind, name: entityName(found.e, found.kind), cif: customer?.cif ?? null };
}

/** The context of one document of a loan. */
export function documentContext(
  layout: ImagingLayout,
  input: { loan: QueueItem; entities: Entities; identity?: MappingIdentity | undefined },
  doc: PlatformDocument,
): { context: DocumentContext; choice: DocumentTypeChoice } {
  const owner = ownerOf(doc, input.entities, input.identity);
  const borrower = ownerOf({ id: '', requirement: null }, input.entities, input.identity);
  const choice = documentTypeOf(layout, doc);
  return {
    choice,
    context: {
      loan: input.loan,
      owner,
      document: doc,
      identity: {
        accountNumber: input.identity?.accountNumber ?? null,
        cif: (borrower?.cif as string | null | undefined) ?? null,
        customers: { ...(input.identity?.customers ?? {}) },
      },
      documentType: choice.documentType,
    },
  };
}

function text(v: unknown, f: ImagingField): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw new ImagingRenderError(
    `${f.at}: field ${f.label}: expected text, got ${Array.isArray(v) ? 'a list' : 'an object'}`,
  );
}

/**
 * The field values of one document's index record, in field order (file fields are null: filled in
 * at the batch's write). Dates are written in the bank's zone.
 */
export async function evaluateRecord(
  layout: ImagingLayout,
  context: DocumentContext,
  timeZone: string,
): Promise<Array<string | null>> {
  const out: Array<string | null> = [];
  for (const f of layout.fields) {
    if (f.expr === undefined) {
      out.push(null);
      continue;
    }
    let v: string;
    try {
      v = text(await f.expr.evaluate(context), f);
    } catch (err) {
      if (err instanceof ImagingRenderError) throw err;
      throw new ImagingRenderError(
        `${f.at}: field ${f.label}: ${(err as { message?: string }).message ?? String(err)}`,
      );
    }
    if (f.date !== undefined && v !== '') {
      const wall = toWallTime(v, timeZone);
      if (wall === null)
        throw new ImagingRenderError(`${f.at}: field ${f.label}: ${JSON.stringify(v)} is not an ISO date`);
      v = formatWallTime(wall, f.date);
    }
    if (f.required && v.trim() === '')
      throw new ImagingRenderError(`${f.at}: field ${f.label} is required and came out empty`);
    out.push(v);
  }
  return out;
}

export interface IndexDocument {
  values: ReadonlyArray<string | null>;
  fileName: string;
  sha256: string;
  bytes: number;
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/gu;

function filePart(layout: ImagingLayout, part: FilePart, batchId: string, d: IndexDocument): string {
  switch (part) {
    case 'name':
      return d.fileName;
    case 'path':
      return `${layout.filePathPrefix}${batchId}${layout.pathSeparator}${d.fileName}`;
    case 'sha256':
      return d.sha256;
    case 'bytes':
      return String(d.bytes);
    case 'batch':
      return batchId;
  }
}

function cell(layout: ImagingLayout, f: ImagingField, raw: string): string {
  // A line break would start a new record for every line-based importer: never written as it is.
  let v = raw.replace(CONTROL, ' ');
  if (f.maxLength !== undefined && v.length > f.maxLength)
    throw new ImagingRenderError(`${f.at}: field ${f.label}: ${v.length} characters, at most ${f.maxLength}`);
  if (layout.format === 'fixed') {
    const w = f.width ?? 0;
    if (v.length > w)
      throw new ImagingRenderError(`${f.at}: field ${f.label}: ${JSON.stringify(v)} is wider than ${w}`);
    v = f.align === 'right' ? v.padStart(w, f.pad) : v.padEnd(w, f.pad);
  } else if (layout.format === 'delimited') {
    if (v.includes(layout.delimiter) || v.includes('"')) v = `"${v.replace(/"/g, '""')}"`;
  }
  return v;
}

/** One document's lines in the index (tagged: several; delimited and fixed: one). */
export function recordLines(layout: ImagingLayout, batchId: string, d: IndexDocument): string[] {
  const values = layout.fields.map((f, i) =>
    f.file !== undefined ? filePart(layout, f.file, batchId, d) : (d.values[i] ?? ''),
  );
  if (layout.format === 'tagged') {
    const lines = [layout.begin ?? ''];
    layout.fields.forEach((f, i) => {
      const v = cell(layout, f, values[i] ?? '');
      if (v === '' && layout.skipEmpty) return;
      lines.push(`${f.tag ?? ''}${v}`);
    });
    return lines;
  }
  const cells = layout.fields.map((f, i) => cell(layout, f, values[i] ?? ''));
  return [layout.format === 'delimited' ? cells.join(layout.delimiter) : cells.join('')];
}

/** The index file of a batch, in the layout's encoding; throws ImagingRenderError for a character it lacks. */
export function renderIndex(layout: ImagingLayout, batchId: string, docs: readonly IndexDocument[]): Buffer {
  const lines: string[] = [];
  if (layout.format === 'tagged') lines.push(...layout.header);
  if (layout.format === 'delimited' && layout.headerRow)
    lines.push(layout.fields.map((f) => f.label).join(layout.delimiter));
  for (const d of docs) lines.push(...recordLines(layout, batchId, d));
  const textOut = lines.map((l) => `${l}${layout.lineEnding}`).join('');
  return encode(textOut, layout.encoding);
}

export function encode(s: string, encoding: ImagingLayout['encoding']): Buffer {
  if (encoding === 'utf-8') return Buffer.from(s, 'utf8');
  const max = encoding === 'ascii' ? 0x7f : 0xff;
  for (const ch of s) {
    if ((ch.codePointAt(0) ?? 0) > max)
      throw new ImagingRenderError(`the index is ${encoding} and cannot hold ${JSON.stringify(ch)}`);
  }
  return Buffer.from(s, 'latin1');
}

/** Checks a record's values render (width, length, encoding) before the document is exported. */
export function checkRecord(
  layout: ImagingLayout,
  values: ReadonlyArray<string | null>,
  fileName: string,
): void {
  const probe: IndexDocument = { values, fileName, sha256: '0'.repeat(64), bytes: 0 };
  encode(recordLines(layout, '0000-00-00-000', probe).join('\n'), layout.encoding);
}
