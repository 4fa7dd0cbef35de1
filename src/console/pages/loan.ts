/**
 * One loan: its row, identity, review items, the records last written (tax ids masked by the
 * service), core references, idempotency keys, batches, the whole event history, the console
 * requests naming it, its audit lines, what a re-board would change now (on demand: it reads the
 * platform within the rate budget), and the action forms.
 */
import type { AuditEntry, LoanHistory, ReboardDiff } from '../contract.js';
import { keyValueLines, money, pill, pretty, when } from './format.js';
import { Html, consoleHref, html, joinHtml, seg } from './html.js';
import { csrfField } from './layout.js';
import type { BrowserSession } from './sessions.js';
import { requestRows } from './requests.js';
import { documentsSection } from './loan-documents.js';

const str = (v: unknown): string =>
  v === null || v === undefined
    ? ''
    : typeof v === 'string'
      ? v
      : typeof v === 'number' || typeof v === 'boolean'
        ? String(v)
        : JSON.stringify(v);

/** Label/value pairs; pairs without a value are left out. */
function kv(pairs: ReadonlyArray<readonly [string, unknown]>): Html {
  const shown = pairs.filter(([, v]) => v instanceof Html || str(v) !== '');
  return joinHtml([
    html`<dl class="kv">`,
    shown.map(([k, v]) => html`<dt>${k}</dt><dd>${v instanceof Html ? v : str(v)}</dd>`),
    html`</dl>`,
  ]);
}

interface IssueLike {
  code?: unknown;
  file?: unknown;
  line?: unknown;
  column?: unknown;
  target?: unknown;
  field?: unknown;
  message?: unknown;
}

/** An event's detail: mapping issues and warnings as "file:line:col target.field: message (code)", the rest as JSON. */
function detailCell(detail: unknown): Html {
  if (detail === null || detail === undefined) return html``;
  const d = detail as { issues?: unknown; warnings?: unknown };
  const list = [
    ...(Array.isArray(d.issues) ? (d.issues as IssueLike[]) : []),
    ...(Array.isArray(d.warnings) ? (d.warnings as IssueLike[]) : []),
  ];
  const rest = Object.fromEntries(
    Object.entries(detail as Record<string, unknown>).filter(([k]) => k !== 'issues' && k !== 'warnings'),
  );
  const entries = Object.entries(rest);
  const flat = entries.every(([, v]) => v === null || typeof v !== 'object');
  const restHtml =
    entries.length === 0
      ? html``
      : flat
        ? joinHtml([
            html`<div class="small">`,
            entries.map(
              ([k, v], n) =>
                html`${n > 0 ? html`<br>` : ''}<span class="muted">${k}:</span> <span class="mono">${str(v)}</span>`,
            ),
            html`</div>`,
          ])
        : joinHtml([
            html`<div class="small">`,
            keyValueLines(rest).map((l, n) => html`${n > 0 ? html`<br>` : ''}${l}`),
            html`</div>`,
          ]);
  return joinHtml([
    list.length > 0
      ? joinHtml([
          html`<ul class="issues">`,
          list.map((i) =>
            joinHtml([
              html`<li><span class="mono">${str(i.file)}`,
              i.line !== undefined ? `:${str(i.line)}` : '',
              i.column !== undefined ? `:${str(i.column)}` : '',
              html`</span> `,
              i.target ? `${str(i.target)}.` : '',
              html`${str(i.field)}: ${str(i.message)} <span class="muted">(${str(i.code)})</span></li>`,
            ]),
          ),
          html`</ul>`,
        ])
      : '',
    html`${restHtml}`,
  ]);
}

const ACTIONS_BY_STATE: Record<string, ReadonlyArray<readonly ['retry' | 'skip' | 'reboard', string]>> = {
  quarantined: [
    ['retry', 'Retry (board again)'],
    ['skip', 'Skip (never board unless retried)'],
  ],
  retry_wait: [
    ['retry', 'Retry now'],
    ['skip', 'Skip (never board unless retried)'],
  ],
  skipped: [['retry', 'Retry (board again)']],
  acknowledged: [['reboard', 'Re-board with the mapping on disk']],
};

function actionForm(session: BrowserSession, loanId: string, state: string): Html {
  const actions = ACTIONS_BY_STATE[state] ?? [];
  if (actions.length === 0)
    return html`<p class="muted">No action applies to a loan in state ${state}: the daemon is working on it.</p>`;
  return joinHtml([
    html`<form method="post" action="/console/requests" class="action" data-testid="loan-action">
${csrfField(session)}<input type="hidden" name="loans" value="${loanId}">
<label>Action<select name="action">`,
    actions.map(([a, label]) => html`<option value="${a}">${label}</option>`),
    html`</select></label>
<label class="grow">`,
    html`Reason (kept in the audit log)<input name="reason" class="wide" required maxlength="500" placeholder="e.g. `,
    html`mapping fixed in release 42, ticket OPS-123"></label>
<button type="submit">Request</button>
</form><p class="small muted">Each action is a request: it runs once an approver (not you) approves it.</p>`,
  ]);
}

function diffSection(loanId: string, state: string, diff: ReboardDiff | null, canAct: boolean): Html {
  const boarded = state === 'acknowledged';
  if (!diff) {
    if (!canAct)
      return html`<p class="muted">An operator can check this (it reads the loan from the platform).</p>`;
    return joinHtml([
      html`<p class="muted">`,
      html`Reads the loan from the platform (within the rate budget) and maps it with the mapping on disk; `,
      html`writes nothing.</p>
<p><a href="`,
      consoleHref(`/console/loans/${seg(loanId)}`, { diff: 1 }),
      html`#reboard" data-testid="reboard-diff-link">`,
      boarded ? 'Show what a re-board would change now' : 'Check whether it would board now',
      html`</a></p>`,
    ]);
  }
  const kind =
    diff.outcome === 'would_rewrite'
      ? 'warn'
      : diff.outcome === 'unchanged' || diff.outcome === 'would_board'
        ? 'ok'
        : 'bad';
  return joinHtml([
    html`<div data-testid="reboard-diff"><p>${pill(diff.outcome.replaceAll('_', ' '), kind)}
`,
    diff.outcome !== 'would_board' && (diff.previousVersion || diff.mappingVersion)
      ? html` mapping ${diff.previousVersion ?? '?'} → ${diff.mappingVersion ?? '?'}`
      : '',
    diff.message ? html` · ${diff.message}` : '',
    html`</p>
`,
    diff.changes.length > 0
      ? joinHtml([
          html`<table class="diff"><thead><tr><th>`,
          diff.outcome === 'would_board'
            ? 'Review item it would board with'
            : 'Field change a re-board would write',
          html`</th></tr></thead><tbody>`,
          diff.changes.map((c) => html`<tr><td class="mono wrap">${c}</td></tr>`),
          html`</tbody></table>`,
        ])
      : diff.outcome === 'would_rewrite'
        ? html`<p class="muted">No field changes.</p>`
        : '',
    html`</div>`,
  ]);
}

/**
 * The trace of the loan's last board (OpenTelemetry, when traces are on): the newest event whose
 * detail carries one. Looked up by this id in the trace backend (Jaeger, Tempo…).
 */
export function lastTraceId(events: LoanHistory['events']): string | null {
  let best: { seq: number; id: string } | null = null;
  for (const e of events) {
    const id = (e.detail as { traceId?: unknown } | null)?.traceId;
    if (typeof id === 'string' && /^[0-9a-f]{32}$/.test(id) && (best === null || e.seq > best.seq))
      best = { seq: e.seq, id };
  }
  return best?.id ?? null;
}

/** The heading (borrower, loan id and number, state), the summary cards and the last error. */
function loanSummary(l: LoanHistory['loan'], id: string, state: string): Html {
  return joinHtml([
    html`<h1>`,
    l['borrowerName'] ? html`<span data-testid="borrower">${str(l['borrowerName'])}</span> · ` : '',
    html`Loan <span class="mono">${id}</span>`,
    l['loanNumber'] ? html` <span class="muted">(${str(l['loanNumber'])})</span>` : '',
    html` ${pill(state)}</h1>
<div class="cards" data-testid="loan-summary">
<div class="card"><div class="label">State</div><div class="value">${state}`,
    l['quarantineReason'] ? html` <span class="small muted">${str(l['quarantineReason'])}</span>` : '',
    html`</div></div>
<div class="card"><div class="label">Attempts</div><div class="value">${str(l['attempts'])}</div></div>
<div class="card"><div class="label">Core reference</div><div class="value mono">`,
    str(l['coreReference']) || '—',
    html`</div></div>
<div class="card"><div class="label">Acknowledged</div><div class="value">`,
    l['acknowledgedAt'] ? when(str(l['acknowledgedAt'])) : 'no',
    html`</div></div>
</div>
`,
    l['lastErrorCode'] || l['lastErrorMessage']
      ? joinHtml([
          html`<div class="flash error" data-testid="last-error">Last error <span class="mono">`,
          html`${str(l['lastErrorCode'])}</span>: `,
          str(l['lastErrorMessage']),
          html`</div>`,
        ])
      : '',
  ]);
}

/** The loan's account number, the daemon's mapping and the customers matched or created. */
function identitySection(h: LoanHistory): Html {
  return joinHtml([
    kv([
      [
        'Account number',
        h.identity.accountNumber === null
          ? '(none yet)'
          : `${h.identity.accountNumber} ` +
            `(${h.identity.accountNumberSource === 'pool' ? 'from the pool' : "the core's own"})`,
      ],
      [
        'Daemon mapping',
        h.daemon
          ? `${h.daemon.mappingVersion} (pid ${h.daemon.pid} on ` +
            `${h.daemon.host})${h.daemon.reloadError ? ' · last reload refused' : ''}`
          : '(no daemon running)',
      ],
    ]),
    html`
`,
    h.identity.customers.length > 0
      ? joinHtml([
          html`<table><thead><tr><th>Entity</th><th>CIF</th><th>Matched by</th><th>Customer</th><th>`,
          html`Name agrees</th></tr></thead><tbody>`,
          h.identity.customers.map((c) =>
            joinHtml([
              html`<tr><td class="mono">${c.entityId}</td><td class="mono">`,
              c.cif ?? '(assigned by the core)',
              html`</td><td>${c.matchedBy}</td><td>`,
              c.existing ? 'existing' : 'new',
              html`</td><td>`,
              c.nameAgrees === null ? '' : c.nameAgrees ? 'yes' : 'no (review item)',
              html`</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ])
      : '',
  ]);
}

/** The idempotency keys the loan's writes used. */
function idempotencyKeysSection(keys: LoanHistory['idempotencyKeys']): Html {
  return keys.length === 0
    ? html`<p class="muted">None.</p>`
    : joinHtml([
        html`<table><thead><tr><th>Key</th><th>Operation</th><th>Created</th><th>Completed</th><th>Status</th>`,
        html`</tr></thead><tbody>`,
        keys.map((k) =>
          joinHtml([
            html`<tr><td class="mono small">${k.key}</td><td>${k.operation}</td><td class="small">`,
            html`${when(k.createdAt)}</td><td class="small">${when(k.completedAt)}</td><td>`,
            html`${k.status ?? ''}</td></tr>`,
          ]),
        ),
        html`</tbody></table>`,
      ]);
}

export function loanPage(v: {
  session: BrowserSession;
  history: LoanHistory;
  diff: ReboardDiff | null;
  audit: readonly AuditEntry[];
  canAct: boolean;
}): Html {
  const h = v.history;
  const l = h.loan;
  const id = str(l['id']);
  const state = str(l['state']);
  const trace = lastTraceId(h.events);
  return joinHtml([
    loanSummary(l, id, state),
    html`
${v.canAct ? html`<h2>Actions</h2>${actionForm(v.session, id, state)}` : ''}
<h2>Loan</h2>
${kv([
  ['Borrower', l['borrowerName']],
  ['Release marker', l['releaseMarker']],
  ['Released at', when(str(l['releasedAtIso']))],
  ['Funded at', when(str(l['fundedAtIso']))],
  ['Amount', money(l['centsAmount'] as number | null)],
  ['Product', l['productId']],
  ['Mapping version', l['mappingVersion']],
  ['Last trace', trace === null ? null : html`<span class="mono" data-testid="trace-id">${trace}</span>`],
  ['Written to core', when(str(l['writtenAt']))],
  ['Next attempt', when(str(l['nextAttemptAt']))],
  ['Payload hash', l['payloadHash']],
  ['Created', when(str(l['createdAt']))],
  ['Updated', when(str(l['updatedAt']))],
])}
<h2>Identity</h2>
`,
    identitySection(h),
    html`
<h2>Review items</h2>
`,
    h.reviewItems.length === 0
      ? html`<p class="muted">None.</p>`
      : joinHtml([
          html`<table data-testid="review-items"><thead><tr><th>Code</th><th>Field</th><th>Message</th><th>`,
          html`Mapping file:line</th></tr></thead><tbody>`,
          h.reviewItems.map((r) =>
            joinHtml([
              html`<tr><td class="mono">${r.code}</td><td class="mono">${r.field}</td><td class="wrap">`,
              html`${r.message}</td><td class="mono">${r.at}</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ]),
    html`
<h2 id="reboard">${state === 'acknowledged' ? 'What a re-board would change now' : 'Would it board now?'}</h2>
${diffSection(id, state, v.diff, v.canAct)}
`,
    documentsSection({ session: v.session, loanId: id, state, documents: h.documents, canAct: v.canAct }),
    html`
<h2>Records written to the core <span class="small muted">(tax ids masked)</span></h2>
`,
    h.records === null || h.records === undefined
      ? html`<p class="muted">Never written.</p>`
      : html`<pre data-testid="records">${pretty(h.records)}</pre>`,
    html`
`,
    h.batches.length > 0
      ? joinHtml([
          html`<h2>Batches</h2><table><thead><tr><th>Batch</th><th>Kind</th><th>Status</th></tr></thead><tbody>`,
          h.batches.map((b) =>
            joinHtml([
              html`<tr><td class="mono"><a href="/console/batches">${b.batchId}</a></td><td>${b.kind}</td><td>`,
              html`${pill(b.status)}</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ])
      : '',
    html`
<h2>History</h2>
<table data-testid="history"><thead><tr><th>When</th><th>Event</th><th>Transition</th><th>By</th><th>Reason</th>`,
    html`<th>Detail</th></tr></thead><tbody>
`,
    h.events.map((e) =>
      joinHtml([
        html`<tr><td class="small">${when(e.at)}</td><td>${e.kind}</td><td>`,
        e.toState ? `${e.fromState ?? '(new)'} → ${e.toState}` : e.fromState ? `(${e.fromState})` : '',
        html`</td><td>${e.actor}</td><td class="wrap">${e.reason ?? ''}</td><td class="wrap">`,
        html`${detailCell(e.detail)}</td></tr>`,
      ]),
    ),
    html`
</tbody></table>
<h2>Console requests</h2>
${h.requests.length === 0 ? html`<p class="muted">None.</p>` : requestRows(h.requests)}
<h2>Audit</h2>
${auditTable(v.audit)}
<p><a href="`,
    consoleHref('/console/audit', { loan: id }),
    html`">Audit log of this loan</a> · <a href="`,
    consoleHref('/console/audit.csv', { loan: id }),
    html`">CSV</a></p>
<h2>Idempotency keys</h2>
`,
    idempotencyKeysSection(h.idempotencyKeys),
  ]);
}

export function auditTable(rows: readonly AuditEntry[]): Html {
  if (rows.length === 0) return html`<p class="muted">No audit lines.</p>`;
  return joinHtml([
    html`<table data-testid="audit"><thead><tr><th>When</th><th>Who</th><th>What</th><th>Action</th><th>`,
    html`Request</th><th>Loan</th><th>Reason</th><th>Detail</th></tr></thead><tbody>
`,
    rows.map((a) =>
      joinHtml([
        html`<tr><td class="small">${when(a.at)}</td><td>${a.actor}</td><td>${a.kind}</td><td>`,
        html`${a.action ?? ''}</td><td class="mono">`,
        a.requestId
          ? html`<a href="${consoleHref(`/console/requests/${seg(a.requestId)}`)}">${a.requestId}</a>`
          : '',
        html`</td><td class="mono">`,
        a.loanId ? html`<a href="${consoleHref(`/console/loans/${seg(a.loanId)}`)}">${a.loanId}</a>` : '',
        html`</td><td class="wrap">${a.reason ?? ''}</td><td class="wrap small">`,
        joinHtml(keyValueLines(a.detail).map((l, n) => html`${n > 0 ? html`<br>` : ''}${l}`)),
        html`</td></tr>`,
      ]),
    ),
    html`
</tbody></table>`,
  ]);
}
