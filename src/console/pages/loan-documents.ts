import type { LoanDocuments } from '../contract.js';
import { pill } from './format.js';
import { html, joinHtml, type Html } from './html.js';
import { csrfField } from './layout.js';
import type { BrowserSession } from './sessions.js';

/**
 * The loan page's "Documents" section (issue 45): how many documents the core write took, and for
 * each document exported to imaging its batch folder, file, document type and re-exports; with
 * the operator's re-export form (a four-eyes request, like a re-board). Kept apart from loan.ts so
 * the page's other sections change independently.
 */
export function documentsSection(v: {
  session: BrowserSession;
  loanId: string;
  state: string;
  documents: LoanDocuments | undefined;
  canAct: boolean;
}): Html {
  const d = v.documents;
  if (d === undefined || (!d.imagingEnabled && d.imaging.length === 0)) return html``;
  const first = d.imaging.filter((x) => x.reexport === 0).length;
  const tie =
    d.listed === null
      ? joinHtml([
          html`<p class="muted" data-testid="documents-tie">Not exported to imaging `,
          html`(boarded before it was on, or not yet).</p>`,
        ])
      : joinHtml([
          html`<p data-testid="documents-tie">Listed by the platform: ${String(d.listed)} · written to the core: `,
          html`${d.writtenToCore === null ? 'not recorded' : String(d.writtenToCore)} · exported to imaging: `,
          html`${String(first)} `,
          d.listed === first && (d.writtenToCore === null || d.writtenToCore === first)
            ? pill('ties', 'ok')
            : pill('gap', 'bad'),
          html`</p>`,
        ]);
  const table =
    d.imaging.length === 0
      ? html``
      : joinHtml([
          html`<table data-testid="documents-imaging"><thead><tr><th>Document</th><th>Imaging batch</th>`,
          html`<th>Status</th><th>File</th><th>Document type</th><th>Export</th></tr></thead><tbody>`,
          d.imaging.map((x) =>
            joinHtml([
              html`<tr><td class="mono">${x.documentId}</td><td class="mono">${x.batchId}</td><td>`,
              html`${pill(x.batchStatus, x.batchStatus === 'sealed' ? 'ok' : 'warn')}</td><td class="mono wrap">`,
              html`${x.fileName}</td><td>${x.documentType}${x.defaultType ? ' (default)' : ''}</td><td>`,
              html`${x.reexport === 0 ? 'first' : `re-export ${x.reexport} by ${x.reexportBy ?? '?'}`}</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ]);
  const form =
    v.canAct && d.imagingEnabled && v.state === 'acknowledged'
      ? joinHtml([
          html`<form method="post" action="/console/requests" class="action" data-testid="imaging-reexport">`,
          html`${csrfField(v.session)}<input type="hidden" name="loans" value="${v.loanId}">`,
          html`<input type="hidden" name="action" value="imaging_reexport"><label class="grow">`,
          html`Reason (kept in the audit log)<input name="reason" class="wide" required maxlength="500" `,
          html`placeholder="e.g. DIP lost batch 2026-12-02-0003, ticket OPS-77"></label>`,
          html`<button type="submit">Request a re-export to imaging</button></form>`,
          html`<p class="small muted">Every document again, into a new batch folder; it runs once an approver `,
          html`(not you) approves it.</p>`,
        ])
      : html``;
  return joinHtml([html`<h2 id="documents">Documents</h2>`, tie, table, form]);
}
