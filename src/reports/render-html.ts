/**
 * report.html: one self-contained page (inline CSS, inline SVG chart, no scripts, no external
 * assets) so it can be mailed, archived or opened offline. Every value is escaped.
 */
import type { CustomerDay } from './customers.js';
import { formatCentsGrouped } from './money.js';
import {
  AGE_BUCKETS,
  reviewItemsOf,
  type AgeBucket,
  type ExceptionReason,
  type ReconciliationSummary,
  type ReportException,
  type ReviewItemsLookup,
} from './types.js';
import { REASON_LABELS } from './reasons.js';
import { localDateTime } from '../lib/calendar.js';
import { escapeHtml } from '../lib/html.js';
import { DISPOSITION_LABELS, type SignOffRecord } from './dispositions.js';
import { commandHint } from '../lib/shell.js';

/**
 * An ISO instant as people read it in the report: the bank's wall time with the zone's abbreviation (a date
 * stays a date).
 */
function inZone(iso: string, timeZone: string): string {
  if (!iso.includes('T')) return iso;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : localDateTime(t, timeZone);
}

/**
 * The policy report.html is served under (/reports/latest, the console): inline styles and images, no
 * script, no framing.
 */
export const REPORT_HTML_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const REASON_COLORS: Record<ExceptionReason, string> = {
  acknowledged_missing_in_core: '#c0392b',
  in_core_not_acknowledged: '#e67e22',
  quarantined: '#8e44ad',
  funded_not_released: '#2980b9',
  field_mismatch: '#d35400',
  acknowledged_unknown_to_connector: '#7f8c8d',
  in_core_unknown_to_connector: '#34495e',
  state_mismatch: '#16a085',
  stuck_pending: '#f1c40f',
  written_missing_in_core: '#a93226',
  boarded_with_review_items: '#5d8aa8',
};

const CSS =
  `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;color:#1d2330;` +
  `margin:24px auto;max-width:1200px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d5d9e0;padding-bottom:4px}
table{border-collapse:collapse;width:100%;margin:6px 0}` +
  `th,td{border:1px solid #d5d9e0;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f7;font-weight:600}` +
  `td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.status{display:inline-block;padding:6px 12px;border-radius:4px;font-weight:600;margin:8px 0}
.ok{background:#e3f4e8;color:#1e6b36}.bad{background:#fbe3e1;color:#8a1f14}.warn{background:#fff4d6;color:#7a5a00}
.meta td:first-child{width:220px;color:#55607a}.small{color:#55607a;font-size:12px}
.signoff td{height:34px}.signoff td:first-child{width:220px}
code{background:#f2f4f7;padding:0 3px;border-radius:3px}
ul.review{margin:4px 0 0;padding-left:18px}
@media print{body{margin:0;max-width:none}h2{page-break-after:avoid}tr{page-break-inside:avoid}}
`;

function row(cells: string[], header = false): string {
  const tag = header ? 'th' : 'td';
  return `<tr>${cells.map((c) => (c.startsWith('<t') ? c : `<${tag}>${c}</${tag}>`)).join('')}</tr>`;
}

const num = (v: number | string): string => `<td class="num">${escapeHtml(v)}</td>`;
const money = (cents: number): string => num(formatCentsGrouped(cents));

function agingChart(s: ReconciliationSummary): string {
  const width = 640;
  const height = 260;
  const left = 48;
  const bottom = 36;
  const top = 16;
  const plotH = height - top - bottom;
  const reasons = Object.keys(s.aging.byReason) as ExceptionReason[];
  const max = Math.max(1, ...AGE_BUCKETS.map((b) => s.aging.totals[b]));
  const barW = 110;
  const gap = (width - left - 200 - AGE_BUCKETS.length * barW) / (AGE_BUCKETS.length + 1);
  const parts: string[] = [];
  parts.push(
    `<line x1="${left}" y1="${top + plotH}" ` +
      `x2="${left + AGE_BUCKETS.length * (barW + gap) + gap}" y2="${top + plotH}" stroke="#55607a"/>`,
  );
  for (let i = 0; i <= 4; i++) {
    const v = Math.round((max * i) / 4);
    const y = top + plotH - (plotH * v) / max;
    parts.push(
      `<text x="${left - 6}" y="${y + 4}" text-anchor="end" font-size="11" fill="#55607a">${v}</text>`,
    );
    parts.push(
      `<line x1="${left}" y1="${y}" ` +
        `x2="${left + AGE_BUCKETS.length * (barW + gap) + gap}" y2="${y}" stroke="#eef0f4"/>`,
    );
  }
  AGE_BUCKETS.forEach((bucket: AgeBucket, i) => {
    const x = left + gap + i * (barW + gap);
    let y = top + plotH;
    for (const reason of reasons) {
      const count = s.aging.byReason[reason]?.[bucket] ?? 0;
      if (count === 0) continue;
      const h = (plotH * count) / max;
      y -= h;
      parts.push(
        `<rect x="${x}" y="${y.toFixed(1)}" width="${barW}" height="${h.toFixed(1)}" fill="${REASON_COLORS[reason]}">` +
          `<title>${escapeHtml(REASON_LABELS[reason])}: ${count}</title></rect>`,
      );
    }
    parts.push(
      `<text x="${x + barW / 2}" y="${(y - 4).toFixed(1)}" ` +
        `text-anchor="middle" font-size="12" font-weight="600">${s.aging.totals[bucket]}</text>`,
    );
    parts.push(
      `<text x="${x + barW / 2}" y="${top + plotH + 18}" text-anchor="middle" font-size="12">` +
        `${escapeHtml(bucket)} business days</text>`,
    );
  });
  reasons.forEach((reason, i) => {
    const y = top + 6 + i * 18;
    const x = width - 190;
    parts.push(`<rect x="${x}" y="${y}" width="12" height="12" fill="${REASON_COLORS[reason]}"/>`);
    parts.push(
      `<text x="${x + 18}" y="${y + 10}" font-size="11">${escapeHtml(REASON_LABELS[reason])}</text>`,
    );
  });
  if (reasons.length === 0) {
    parts.push(
      `<text x="${width / 2}" y="${top + plotH / 2}" text-anchor="middle" font-size="13" fill="#55607a">` +
        `No exceptions</text>`,
    );
  }
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="Exceptions by age" ` +
    `width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" data-testid="aging-chart">` +
    `${parts.join('')}</svg>`
  );
}

export interface HtmlOptions {
  /** Exceptions shown in the table; the CSV always has all of them. */
  maxRows?: number;
  /** Review items of exceptions kept without them (compute.ts). */
  reviewItems?: ReviewItemsLookup;
  /** How many exceptions there are when `exceptions` holds only the first ones (default: its length). */
  exceptionCount?: number;
  /** The run's sign-off (signoff.ts): signatures, comments and dispositions instead of blank lines. */
  signOff?: SignOffRecord;
}

/** Exceptions report.html lists by default (the CSV and the JSON have every one). */
export const HTML_MAX_ROWS = 5000;

/** The heading rows of the report's tables. */
const TIE_OUT_HEAD = row(
  [
    'Check',
    'Equation',
    '<th class="num">Left count</th>',
    '<th class="num">Left amount</th>',
    '<th class="num">Right count</th>',
    '<th class="num">Right amount</th>',
    '<th class="num">Difference</th>',
    'Result',
  ],
  true,
);
const TOTALS_HEAD = row(
  [
    'Line',
    'Source',
    '<th class="num">Count</th>',
    '<th class="num">Principal</th>',
    '<th class="num">Amount unknown</th>',
  ],
  true,
);
const AGING_HEAD = row(
  [
    'Reason',
    ...AGE_BUCKETS.map((b) => `<th class="num">${escapeHtml(b)} days</th>`),
    '<th class="num">Total</th>',
  ],
  true,
);
const EXCEPTIONS_HEAD = row(
  [
    'Reason',
    'Loan',
    'Field',
    'Platform',
    'Core',
    'Connector state',
    '<th class="num">Amount</th>',
    '<th class="num">Age</th>',
    'Detail',
  ],
  true,
);

export function renderHtml(
  s: ReconciliationSummary,
  exceptions: readonly ReportException[],
  opts: HtmlOptions = {},
): string {
  const h = s.header;
  const maxRows = opts.maxRows ?? HTML_MAX_ROWS;
  const allTie = s.tieOut.every((c) => c.ties);
  const t = s.totals;
  const totalsRows: Array<[string, string, { count: number; cents: number; unknownAmount: number }]> = [
    ['Released (taken from the boarding queue)', 'connector', t.released],
    ['Pending (queued, fetching, mapping, retry wait)', 'connector', t.pending],
    ['Written to core, acknowledgement outstanding', 'connector', t.writtenAwaitingAck],
    ['Acknowledged', 'connector', t.acknowledged],
    ['Quarantined', 'connector', t.quarantined],
    ['Skipped by operations', 'connector', t.skipped],
    ...(t.otherState.count > 0
      ? [['Other (unknown state)', 'connector', t.otherState] as [string, string, typeof t.otherState]]
      : []),
    ['Written to core (by the connector)', 'connector', t.connectorWritten],
    ['Written to core', 'core', t.writtenToCore],
    ['Acknowledged (boarded)', 'platform', t.acknowledgedOnPlatform],
  ];
  const shown = exceptions.slice(0, maxRows);
  const all = opts.exceptionCount ?? exceptions.length;
  const footer =
    `<p class="small">boarding-connector ${escapeHtml(h.connectorVersion)} · ` +
    'report.json and report.csv in the same folder.</p>';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>Boarding reconciliation ${escapeHtml(h.asOfLocal)}</title>
<style>${CSS}</style></head>
<body>
<h1>Boarding reconciliation</h1>
<div class="small">Run ${escapeHtml(h.runId)} · as of ${escapeHtml(h.asOfLocal)} (${escapeHtml(h.timeZone)})</div>
<div class="status ${allTie ? (s.exceptionCount === 0 ? 'ok' : 'warn') : 'bad'}" data-testid="status">${
    allTie ? 'Control totals tie' : 'Control totals DO NOT tie'
  } · ${s.exceptionCount} exception${s.exceptionCount === 1 ? '' : 's'}</div>

<h2>Header</h2>
<table class="meta" data-testid="header">
${row(['Run id', escapeHtml(h.runId)])}
${row(['As of', `${escapeHtml(h.asOfLocal)} <span class="small">(${escapeHtml(h.asOf)})</span>`])}
${row(['Time zone', escapeHtml(h.timeZone)])}
${row(['Environment', escapeHtml(h.environment)])}
${row(['Platform', escapeHtml(h.platformOrigin ?? '')])}
${row(['Core adapter', escapeHtml(h.coreAdapter)])}
${row(['Connector version', escapeHtml(h.connectorVersion)])}
${row([
  'Mapping version(s)',
  h.mappingVersions.length === 0
    ? '(none recorded)'
    : h.mappingVersions.map((v) => `${escapeHtml(v.version)} (${v.loans})`).join(', '),
])}
${row([
  'Scope',
  h.since
    ? `loans open, or boarded/acknowledged since ${escapeHtml(inZone(h.since, h.timeZone))}`
    : 'all loans (full reconciliation)',
])}
${row(['Ages', escapeHtml(h.ageBasis)])}
</table>

<h2>Tie-out</h2>
<table data-testid="tie-out">
${TIE_OUT_HEAD}
${s.tieOut
  .map((c) =>
    row([
      escapeHtml(c.title),
      escapeHtml(c.equation),
      num(c.left.count),
      money(c.left.cents),
      num(c.right.count),
      money(c.right.cents),
      num(`${c.differenceCount} / ${formatCentsGrouped(c.differenceCents)}`),
      c.ties
        ? '<td class="ok">ties</td>'
        : `<td class="bad">does not tie${
            c.explainedBy.length > 0
              ? ` — see ${c.explainedBy.map((r) => escapeHtml(REASON_LABELS[r])).join('; ')}`
              : ''
          }</td>`,
    ]),
  )
  .join('\n')}
</table>

<h2>Control totals</h2>
<table data-testid="totals">
${TOTALS_HEAD}
${totalsRows
  .map(([label, source, a]) =>
    row([escapeHtml(label), escapeHtml(source), num(a.count), money(a.cents), num(a.unknownAmount)]),
  )
  .join('\n')}
</table>

<h2>Exceptions by age</h2>
${agingChart(s)}
<table data-testid="aging">
${AGING_HEAD}
${(Object.entries(s.aging.byReason) as Array<[ExceptionReason, Record<AgeBucket, number>]>)
  .map(([reason, b]) =>
    row([
      escapeHtml(REASON_LABELS[reason]),
      ...AGE_BUCKETS.map((k) => num(b[k])),
      num(AGE_BUCKETS.reduce((acc, k) => acc + b[k], 0)),
    ]),
  )
  .join('\n')}
${row(['<th>Total</th>', ...AGE_BUCKETS.map((k) => num(s.aging.totals[k])), num(s.exceptionCount)])}
</table>

<h2>Exceptions (${s.exceptionCount})</h2>
${
  all > shown.length
    ? `<p class="small">Showing the first ${shown.length} of ${all}; report.csv has every row.</p>`
    : ''
}
<table data-testid="exceptions">
${EXCEPTIONS_HEAD}
${shown
  .map((e) =>
    row([
      escapeHtml(REASON_LABELS[e.reason]),
      `<a href="/console/loans/${escapeHtml(encodeURIComponent(e.loanId))}">${escapeHtml(e.loanId)}</a>` +
        (e.loanNumber ? `<br><span class="small">${escapeHtml(e.loanNumber)}</span>` : ''),
      escapeHtml(e.field ?? ''),
      escapeHtml(e.platformValue ?? ''),
      escapeHtml(e.coreValue ?? ''),
      escapeHtml(e.connectorState ?? '(unknown)'),
      e.centsAmount === null ? num('') : money(e.centsAmount),
      num(`${e.ageBusinessDays} (${e.ageBucket})`),
      `${escapeHtml(e.detail)}${reviewItemsHtml(e, reviewItemsOf(e, opts.reviewItems))}`,
    ]),
  )
  .join('\n')}
</table>
${s.batches ? renderBatchTieHtml(s.batches, h.timeZone) : ''}
${s.imaging ? renderImagingTieHtml(s.imaging) : ''}
${s.customers ? renderCustomersHtml(s.customers, h.timeZone) : ''}
${s.notes.length > 0 ? `<h2>Notes</h2><ul>${s.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>` : ''}

${renderSignOffHtml(opts.signOff, h.timeZone)}
${footer}
</body></html>
`;
}

function renderSignOffHtml(so: SignOffRecord | undefined, tz: string): string {
  const at = (iso: string | null): string => (iso ? escapeHtml(inZone(iso, tz)) : '');
  const dispositions =
    so && so.dispositions.length > 0
      ? '<h3>Dispositions</h3><table data-testid="dispositions">' +
        row(['Loan', 'Reason', 'Disposition'], true) +
        so.dispositions
          .map((d) =>
            row([
              escapeHtml(d.loanId),
              escapeHtml(REASON_LABELS[d.reason as ExceptionReason] ?? d.reason),
              escapeHtml(DISPOSITION_LABELS[d.disposition] ?? d.disposition),
            ]),
          )
          .join('') +
        '</table>'
      : '';
  const intro =
    '<p class="small">Reviewed by someone who did not originate the entries. ' +
    'Record the disposition of every exception above.' +
    (so ? ' Signed in the ops console; signoff.json in the same folder.' : '') +
    '</p>';
  return `<h2>Sign-off</h2>
${intro}
<table class="signoff" data-testid="signoff">
${row(['Prepared by (name)', escapeHtml(so?.preparedBy ?? ''), 'Date', at(so?.preparedAt ?? null)])}
${row(["Preparer's comments", `<td colspan="3">${escapeHtml(so?.preparedComment ?? '')}</td>`])}
${row(['Reviewed by (name)', escapeHtml(so?.reviewedBy ?? ''), 'Date', at(so?.reviewedAt ?? null)])}
${row(["Reviewer's comments", `<td colspan="3">${escapeHtml(so?.reviewedComment ?? '')}</td>`])}
</table>
${dispositions}`;
}

function renderCustomersHtml(c: NonNullable<ReconciliationSummary['customers']>, tz: string): string {
  const line = (label: string, d: Omit<CustomerDay, 'date'>): string =>
    row([label, num(d.created), num(d.matchedByTin), num(d.matchedByCrossref), num(d.nameReviews)]);
  const intro =
    '<p class="small">Businesses and people on the loans written to the core since ' +
    `${escapeHtml(inZone(c.since, tz))}: ` +
    "new customers (a customer record written), existing ones found by tax id or by the connector's " +
    'cross-reference (no second record). <code>customers list</code> lists them.</p>';
  return `<h2>Customers: new and matched</h2>
${intro}
<table data-testid="customers">
${row(
  [
    'Day',
    '<th class="num">New</th>',
    '<th class="num">Matched by tax id</th>',
    '<th class="num">Matched by cross-reference</th>',
    '<th class="num">Name differs (review)</th>',
  ],
  true,
)}
${c.days.map((d) => line(escapeHtml(d.date), d)).join('\n')}
${line('Total', c.totals)}
</table>`;
}

/** The review items of a loan boarded with review items, under its detail. */
function reviewItemsHtml(e: ReportException, reviewItems: ReportException['reviewItems']): string {
  if (reviewItems === undefined || (reviewItems.length === 0 && (e.reviewItemsMore ?? 0) === 0)) return '';
  const items = reviewItems.map(
    (r) =>
      `<li><code>${escapeHtml(r.code)}</code> ${escapeHtml(r.field)}: ${escapeHtml(r.message)}` +
      (r.at ? ` <span class="small">(${escapeHtml(r.at)})</span>` : '') +
      '</li>',
  );
  if ((e.reviewItemsMore ?? 0) > 0)
    items.push(
      `<li class="small">+${e.reviewItemsMore} more (the loan's console page; ` +
        `<code>${escapeHtml(commandHint('loans show', [e.loanId]))}</code> on the host)</li>`,
    );
  return `<ul class="review" data-testid="review-items">${items.join('')}</ul>`;
}

function renderBatchTieHtml(b: NonNullable<ReconciliationSummary['batches']>, tz: string): string {
  const notSealed = b.notSealedPastCutoff.map((m) => escapeHtml(m.loanId)).join(', ');
  return `<h2>File core batches</h2>
<table data-testid="batches">
${row(['', '<th class="num">Loans</th>', '<th class="num">Principal</th>'], true)}
${row([
  `Sealed (${b.sealedBatches} batch(es), ${b.corrections} correction(s))`,
  num(b.sealed.count),
  bigMoney(b.sealed.cents),
])}
${row([
  `Open batch ${escapeHtml(b.open.batchId ?? '-')} ` +
    `(cut-off ${escapeHtml(b.open.cutoffAt ? inZone(b.open.cutoffAt, tz) : '-')})`,
  num(b.open.count),
  bigMoney(b.open.cents),
])}
${row(['Acknowledged', num(b.acknowledged.count), bigMoney(b.acknowledged.cents)])}
${row(['Result', b.ties ? '<td class="ok" colspan="2">ties</td>' : '<td class="bad" colspan="2">does not tie</td>'])}
</table>
${b.notSealedPastCutoff.length > 0 ? `<p class="bad">In no sealed batch past the cut-off: ${notSealed}</p>` : ''}`;
}

function renderImagingTieHtml(t: NonNullable<ReconciliationSummary['imaging']>): string {
  const gaps = t.gaps
    .slice(0, 50)
    .map((g) =>
      escapeHtml(
        `${g.loanId} (listed ${g.listed ?? '-'}, core ${g.writtenToCore ?? '-'}, imaging ${g.exported})`,
      ),
    )
    .join(', ');
  return `<h2>Documents to imaging</h2>
<table data-testid="imaging">
${row(['', '<th class="num">Documents</th>'], true)}
${row([`Listed by the platform (${t.loans} loan(s))`, num(t.listed)])}
${row(['Written to the core', num(t.writtenToCore)])}
${row([`Exported to imaging (${t.published} in published folders)`, num(t.exported)])}
${row(['Result', t.ties ? '<td class="ok">ties</td>' : '<td class="bad">does not tie</td>'])}
</table>
${t.gaps.length > 0 ? `<p class="bad">Loans whose documents differ: ${gaps}</p>` : ''}`;
}

/** Integer cents held as text (BigInt-safe: a batch total can pass 2^53) → 1,234.56. */
function bigMoney(cents: string): string {
  const v = BigInt(cents);
  const neg = v < 0n;
  const digits = (neg ? -v : v).toString().padStart(3, '0');
  const whole = digits.slice(0, -2).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return num(`${neg ? '-' : ''}${whole}.${digits.slice(-2)}`);
}
