import type { Entities, PlatformDocument, QueueItem } from '../contract/schemas.js';
import type { MappingIdentity } from '../mapping/types.js';
import { documentFileName } from '../core/safe-name.js';
import type { ImagingLayout } from './layout.js';
import { checkRecord, documentContext, evaluateRecord, ImagingRenderError, recordLines } from './render.js';

/**
 * `mappings preview`'s imaging part (issue 45): the index records a loan's documents would get in
 * the layout in use, as the export writes them (the batch and the sha256 are known only at the
 * export: placeholders here), with the document type each takes and whether it fell back to the
 * layout's default. A record the layout cannot hold is named, as it would quarantine the loan.
 * Tax ids are masked to their last 4 unless showPii.
 */
export interface IndexPreview {
  layout: string;
  records: Array<{
    documentId: string;
    documentType: string;
    fellBack: boolean;
    lines: string[];
    problem?: string;
  }>;
}

const BATCH = 'YYYY-MM-DD-NNNN';
const SHA = '<sha256 at export>';

function taxIds(entities: Entities): string[] {
  const out: string[] = [];
  for (const e of [...entities.businesses, ...entities.people] as Array<Record<string, unknown>>)
    for (const k of ['ein', 'ssn', 'tin', 'taxId']) {
      const v = e[k];
      if (typeof v === 'string' && v.replace(/\D/g, '').length >= 9) out.push(v);
    }
  return out;
}

function masker(entities: Entities, showPii: boolean): (line: string) => string {
  if (showPii) return (l) => l;
  const ids = taxIds(entities);
  return (line) => {
    let l = line;
    for (const id of ids) {
      const digits = id.replace(/\D/g, '');
      const masked = `*****${digits.slice(-4)}`;
      l = l.split(id).join(masked).split(digits).join(masked);
    }
    return l;
  };
}

export async function previewIndexRecords(
  layout: ImagingLayout,
  input: {
    loan: QueueItem;
    entities: Entities;
    documents: readonly PlatformDocument[];
    identity?: MappingIdentity | undefined;
  },
  timeZone: string,
  showPii: boolean,
): Promise<IndexPreview> {
  const mask = masker(input.entities, showPii);
  const records: IndexPreview['records'] = [];
  for (const doc of input.documents) {
    const { context, choice } = documentContext(layout, input, doc);
    const base = { documentId: doc.id, documentType: choice.documentType, fellBack: choice.fellBack };
    try {
      const values = await evaluateRecord(layout, context, timeZone);
      const fileName = documentFileName(doc.id, doc.name);
      checkRecord(layout, values, fileName);
      const lines = recordLines(layout, BATCH, { values, fileName, sha256: SHA, bytes: 0 });
      records.push({ ...base, lines: lines.map(mask) });
    } catch (err) {
      if (!(err instanceof ImagingRenderError)) throw err;
      records.push({ ...base, lines: [], problem: mask(err.message) });
    }
  }
  return { layout: layout.file, records };
}

/** The preview as text, below the mapping's records. */
export function indexPreviewText(p: IndexPreview): string {
  const head = `imaging index (${p.layout}): ${p.records.length} document(s)`;
  const fellBack = p.records.filter((r) => r.fellBack).length;
  const problems = p.records.filter((r) => r.problem !== undefined);
  const lines = [
    head +
      (fellBack > 0 ? `; ${fellBack} with the default document type (a review item each)` : '') +
      (problems.length > 0
        ? `; ${problems.length} the layout cannot hold: the loan would be quarantined`
        : ''),
  ];
  for (const r of p.records) {
    if (r.problem !== undefined) lines.push(`  ${r.documentId}: ${r.problem}`);
    else lines.push(...r.lines.map((l) => `  ${l}`));
  }
  return lines.join('\n');
}
