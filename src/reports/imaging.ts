import type { ImagingLoanTie } from '../store/imaging.js';

/**
 * Documents in the reconciliation report (issue 45): per acknowledged loan, the documents the
 * platform listed = the documents written to the core = the documents exported to imaging, and the
 * loans where they differ (a gap a person looks at: a document the core refused, a loan boarded
 * before imaging was on, a batch not yet published).
 */
export interface ImagingTieSection {
  loans: number;
  listed: number;
  writtenToCore: number;
  exported: number;
  /** Of the exported: in a folder the importer can take (the rest wait in an open or unfinished batch). */
  published: number;
  ties: boolean;
  gaps: Array<{ loanId: string; listed: number | null; writtenToCore: number | null; exported: number }>;
}

export function computeImagingTie(rows: readonly ImagingLoanTie[] | null): ImagingTieSection | null {
  if (rows === null) return null;
  const gaps: ImagingTieSection['gaps'] = [];
  let listed = 0;
  let written = 0;
  let exported = 0;
  let published = 0;
  for (const r of rows) {
    const l = r.listed < 0 ? null : r.listed;
    listed += l ?? 0;
    written += r.writtenToCore ?? 0;
    exported += r.exported;
    published += r.published;
    if (l === null || l !== r.exported || (r.writtenToCore !== null && r.writtenToCore !== r.exported))
      gaps.push({ loanId: r.loanId, listed: l, writtenToCore: r.writtenToCore, exported: r.exported });
  }
  return {
    loans: rows.length,
    listed,
    writtenToCore: written,
    exported,
    published,
    ties: gaps.length === 0,
    gaps,
  };
}

export function imagingTieNotes(s: ImagingTieSection | null): string[] {
  if (s === null || s.ties) return [];
  const shown = s.gaps
    .slice(0, 10)
    .map(
      (g) =>
        `${g.loanId} (listed ${g.listed ?? 'not exported'}, core ${g.writtenToCore ?? '?'}, imaging ${g.exported})`,
    )
    .join(', ');
  return [
    `documents do not tie for ${s.gaps.length} loan(s): listed ${s.listed}, written to the core ` +
      `${s.writtenToCore}, exported to imaging ${s.exported}: ${shown}${s.gaps.length > 10 ? ', …' : ''}`,
  ];
}
