/** The audit log, reconciliation, batches, status, login and error pages. */
import {
  hasRole,
  type AuditEntry,
  type BatchView,
  type ConsoleUser,
  type Page,
  type ReportRun,
  type ReportView,
  type StatusView,
} from '../contract.js';
import { money, pill, pretty, shortId, when, whenMs } from './format.js';
import { DISPOSITIONS, DISPOSITION_LABELS, type Disposition } from '../../reports/dispositions.js';
import { REASON_LABELS } from '../../reports/reasons.js';
import type { ExceptionReason } from '../../reports/types.js';
import { consoleHref, html, joinHtml, seg, type Html } from './html.js';
import { csrfField } from './layout.js';
import { auditTable } from './loan.js';
import type { BrowserSession } from './sessions.js';
import type { LoginLockView } from '../auth.js';

export function auditPage(v: {
  page: Page<AuditEntry>;
  loan: string | undefined;
  request: string | undefined;
  cursor: string | undefined;
}): Html {
  const scope = { loan: v.loan, request: v.request };
  return joinHtml([
    html`<h1>Audit log`,
    v.loan ? html` of loan <span class="mono">${v.loan}</span>` : '',
    v.request ? html` of request <span class="mono">${v.request}</span>` : '',
    html`</h1>
<p class="muted">`,
    html`Append-only: every request, approval, rejection, execution, sign-off and refused login, newest first.
<a href="`,
    consoleHref('/console/audit.csv', { loan: v.loan }),
    html`" data-testid="audit-csv">Export as CSV</a>`,
    v.loan || v.request ? html` · <a href="/console/audit">whole log</a>` : '',
    html`</p>
<form method="get" action="/console/audit" class="filters"><label>`,
    html`Loan id<input name="loan" value="${v.loan ?? ''}" class="short"></label><button type="submit">`,
    html`Show</button></form>
${auditTable(v.page.items)}
<div class="pager">`,
    v.cursor ? html`<a href="${consoleHref('/console/audit', scope)}">« Newest</a>` : '',
    v.page.next
      ? html`<a href="${consoleHref('/console/audit', { ...scope, cursor: v.page.next })}">Older »</a>`
      : '',
    html`</div>`,
  ]);
}

function signOffCell(by: string | null, at: string | null): Html {
  return by
    ? html`${by} <span class="muted small">${when(at)}</span>`
    : html`<span class="muted">not signed</span>`;
}

/** "Run reconciliation now" (operators): the same run as the nightly one, read-only, audited. */
function runNowForm(session: BrowserSession): Html {
  return joinHtml([
    html`<form method="post" action="/console/reconciliation/run" class="action" data-testid="reconcile-now">`,
    html`${csrfField(session)}<button type="submit">Run reconciliation now</button> <span class="muted small">`,
    html`Reads the platform (within the rate budget), the state database and the core; changes nothing; `,
    html`the new run opens when it is done.</span></form>`,
  ]);
}

export function reportsPage(v: {
  runs: readonly ReportRun[];
  session: BrowserSession;
  user: ConsoleUser;
}): Html {
  const canRun = hasRole(v.user, 'operator');
  return joinHtml([
    html`<h1>Reconciliation</h1>
<p class="muted">`,
    html`One row per run of the daily reconciliation (a day's second run is a new row; a signed run is never `,
    html`overwritten).</p>
`,
    canRun ? runNowForm(v.session) : '',
    v.runs.length === 0
      ? joinHtml([
          html`<p class="muted" data-testid="no-reports">`,
          html`No report yet: the daemon writes one on its schedule (schedule.reconcile)`,
          canRun
            ? html`, or run one now with the button above.</p>`
            : html`; an operator can run one now.</p>`,
        ])
      : joinHtml([
          html`<table data-testid="reports"><thead><tr><th>Day</th><th>Run</th><th>Generated</th><th>`,
          html`Prepared by</th><th>Reviewed by</th></tr></thead><tbody>
`,
          v.runs.map((r) =>
            joinHtml([
              html`<tr><td><a href="`,
              consoleHref(`/console/reconciliation/${seg(r.day)}/${seg(r.run)}`),
              html`">${r.day}</a>`,
              r.latestOfDay ? '' : html` <span class="muted small">(earlier run)</span>`,
              html`</td><td class="mono small">${r.run}</td><td class="small">`,
              html`${when(r.generatedAt)}</td><td>`,
              signOffCell(r.signOff.preparedBy, r.signOff.preparedAt),
              html`</td><td>`,
              signOffCell(r.signOff.reviewedBy, r.signOff.reviewedAt),
              html`</td></tr>`,
            ]),
          ),
          html`
</tbody></table>`,
        ]),
  ]);
}

type Rec = Record<string, unknown>;

const TOTAL_LABELS: Record<string, string> = {
  released: 'Released to the core (connector ledger)',
  pending: 'Pending',
  writtenAwaitingAck: 'Written, awaiting acknowledgement',
  acknowledged: 'Acknowledged',
  quarantined: 'Quarantined',
  skipped: 'Skipped',
  otherState: 'Other state',
  connectorWritten: 'Written by the connector',
  writtenToCore: 'Held by the core',
  acknowledgedOnPlatform: 'Boarded on the platform',
};
const rec = (v: unknown): Rec => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Rec) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const s = (v: unknown): string =>
  v === null || v === undefined
    ? ''
    : typeof v === 'string'
      ? v
      : typeof v === 'number' || typeof v === 'boolean'
        ? String(v)
        : JSON.stringify(v);

function reviewItemsList(e: Rec): Html {
  const items = arr(e['reviewItems']).map(rec);
  if (items.length === 0) return html``;
  const more = Number(e['reviewItemsMore'] ?? 0);
  return joinHtml([
    html`<ul class="issues" data-testid="exception-review-items">`,
    items.map((i) =>
      joinHtml([
        html`<li><span class="mono">${s(i['code'])}</span> ${s(i['field'])}: ${s(i['message'])}`,
        i['at'] ? html` <span class="muted">(${s(i['at'])})</span>` : '',
        html`</li>`,
      ]),
    ),
    more > 0 ? html`<li class="muted">+${more} more on the loan's page</li>` : '',
    html`</ul>`,
  ]);
}

function signatureCell(by: string | null, at: string | null, note: string | null | undefined): Html {
  return by
    ? joinHtml([
        html`${by} <span class="muted small">${when(at)}</span>`,
        note ? html`<div class="small wrap" data-testid="signoff-note">“${note}”</div>` : '',
      ])
    : html`<span class="muted">not signed</span>`;
}

/**
 * The run's headline: real exceptions in red; loans boarded with review items (boarded, with a
 * convention to check, listed among report.json's exceptions for their disposition) apart, in
 * amber. A red "2 exceptions" on a run whose totals tie was two loans boarded with review items.
 */
export function exceptionPills(exceptions: readonly Rec[]): Html {
  const review = exceptions.filter((e) => e['reason'] === 'boarded_with_review_items').length;
  const real = exceptions.length - review;
  const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;
  return joinHtml([
    real === 0 ? pill('no exceptions', 'ok') : pill(plural(real, 'exception', 'exceptions'), 'bad'),
    review > 0
      ? joinHtml([
          ' ',
          pill(plural(review, 'loan boarded with review items', 'loans boarded with review items'), 'warn'),
        ])
      : '',
  ]);
}

export function reportPage(v: { session: BrowserSession; user: ConsoleUser; view: ReportView }): Html {
  const r = rec(v.view.report);
  const header = rec(r['header']);
  const totals = rec(r['totals']);
  const tie = arr(r['tieOut']).map(rec);
  const exceptions = arr(r['exceptions']).map(rec);
  const base = `/console/reconciliation/${seg(v.view.day)}/${seg(v.view.run)}`;
  const so = v.view.signOff;
  const canSign = hasRole(v.user, 'operator') || hasRole(v.user, 'approver');
  const prepare = !so.preparedBy && canSign;
  const review = so.preparedBy && !so.reviewedBy && canSign && so.preparedBy !== v.user.name;
  const given = new Map((so.dispositions ?? []).map((d) => [d.index, d.disposition]));
  const formId = 'signoff-form';
  const dispositionCell = (i: number): Html =>
    prepare
      ? joinHtml([
          html`<select name="disposition_${i}" form="${formId}" required data-testid="disposition">`,
          html`<option value="">choose…</option>`,
          DISPOSITIONS.map((d) => html`<option value="${d}">${DISPOSITION_LABELS[d]}</option>`),
          html`</select>`,
        ])
      : html`${given.has(i) ? (DISPOSITION_LABELS[given.get(i) as Disposition] ?? given.get(i)) : ''}`;
  const signForm = (as: 'prepared' | 'reviewed', label: string): Html =>
    joinHtml([
      html`<form method="post" action="`,
      consoleHref(`${base}/signoff`),
      html`" class="action" id="`,
      as === 'prepared' ? formId : 'review-form',
      html`" data-testid="signoff-${as}">`,
      html`${csrfField(v.session)}<input type="hidden" name="as" value="${as}">
<label class="grow">`,
      html`Comment (kept in signoff.json and report.html)<input name="note" class="wide" required maxlength="1000" `,
      html`placeholder="`,
      as === 'prepared'
        ? 'e.g. all quarantines retried after the mapping fix; review items checked in the core'
        : 'e.g. checked the dispositions against the core',
      html`"></label><button type="submit">${label}</button></form>`,
    ]);
  return joinHtml([
    html`<h1>Reconciliation ${v.view.day} <span class="muted small mono">${v.view.run}</span></h1>
<p>`,
    exceptionPills(exceptions),
    html`
<span class="muted small">generated ${when(v.view.generatedAt)}`,
    header['connectorVersion'] ? ` · connector ${s(header['connectorVersion'])}` : '',
    html`</span>
· <a href="`,
    consoleHref(`${base}/report.html`),
    html`">report.html</a> · <a href="`,
    consoleHref(`${base}/report.csv`),
    html`">CSV</a> · <a href="`,
    consoleHref(`${base}/report.json`),
    html`">JSON</a></p>
<h2>Sign-off</h2>
<table data-testid="signoff" class="narrow"><tbody>
<tr><th>Prepared by</th><td>${signatureCell(so.preparedBy, so.preparedAt, so.preparedNote)}</td></tr>
<tr><th>Reviewed by</th><td>${signatureCell(so.reviewedBy, so.reviewedAt, so.reviewedNote)}</td></tr>
</tbody></table>
`,
    prepare
      ? joinHtml([
          exceptions.length > 0
            ? html`<p class="small muted">Give each exception below a disposition, then sign as preparer.</p>`
            : '',
          signForm('prepared', `Sign as preparer (${v.user.name})`),
        ])
      : '',
    html`
`,
    review
      ? signForm('reviewed', `Sign as reviewer (${v.user.name})`)
      : so.preparedBy && !so.reviewedBy && canSign
        ? html`<p class="muted small">You prepared this run: a different person reviews it.</p>`
        : '',
    html`
`,
    Object.keys(totals).length > 0
      ? joinHtml([
          html`<h2>Control totals</h2><table data-testid="totals" class="narrow"><thead><tr><th>Total</th>`,
          html`<th class="num">Loans</th><th class="num">Amount</th></tr></thead><tbody>`,
          Object.entries(totals).map(([k, a]) =>
            joinHtml([
              html`<tr><td>${TOTAL_LABELS[k] ?? k}</td><td class="num">${s(rec(a)['count'])}</td><td class="num">`,
              money(rec(a)['cents'] as number),
              html`</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ])
      : '',
    html`
`,
    tie.length > 0
      ? joinHtml([
          html`<h2>Tie-out</h2><table data-testid="tie-out"><thead><tr><th>Check</th><th>Equation</th>`,
          html`<th class="num">Difference (loans)</th></tr></thead><tbody>`,
          tie.map((t) =>
            joinHtml([
              html`<tr><td>${s(t['title'])}</td><td class="small">${s(t['equation'])}</td><td class="num">`,
              html`${s(t['differenceCount'])}</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ])
      : '',
    html`
<h2>Exceptions</h2>
`,
    exceptions.length === 0
      ? html`<p class="muted">None.</p>`
      : joinHtml([
          html`<table data-testid="report-exceptions"><thead><tr><th>Reason</th><th>Loan</th><th>State</th>`,
          html`<th class="num">Amount</th><th class="num">Age</th><th>Detail and review items</th><th>`,
          html`Disposition</th></tr></thead><tbody>
`,
          exceptions.map((e, i) =>
            joinHtml([
              html`<tr><td>`,
              REASON_LABELS[s(e['reason']) as ExceptionReason] ?? s(e['reason']),
              html`</td><td class="mono"><a href="`,
              consoleHref(`/console/loans/${seg(s(e['loanId']))}`),
              html`" title="${s(e['loanId'])}">${shortId(s(e['loanId']))}</a>`,
              e['loanNumber'] ? html`<br><span class="small">${s(e['loanNumber'])}</span>` : '',
              html`</td><td>${s(e['connectorState'])}</td><td class="num">`,
              money(e['centsAmount'] as number | null),
              html`</td><td class="num">${s(e['ageBusinessDays'])} <span class="muted small">`,
              html`(${s(e['ageBucket'])})</span></td><td class="wrap small">`,
              html`${s(e['detail'])}${reviewItemsList(e)}</td><td>${dispositionCell(i)}</td></tr>`,
            ]),
          ),
          html`
</tbody></table>`,
        ]),
  ]);
}

export function batchesPage(v: {
  session: BrowserSession;
  batches: readonly BatchView[];
  canAct: boolean;
}): Html {
  return joinHtml([
    html`<h1>Batches <span class="muted small">(file core)</span></h1>
`,
    v.batches.length === 0
      ? html`<p class="muted">No batches (the file core writes them; other cores have none).</p>`
      : joinHtml([
          html`<table data-testid="batches"><thead><tr><th>Batch</th><th>Status</th><th>Opened</th><th>Cut-off</th>`,
          html`<th>Sealed</th><th class="num">Loans</th><th class="num">Records</th><th class="num">`,
          html`Principal</th><th>Files</th><th></th></tr></thead><tbody>
`,
          v.batches.map((b) =>
            joinHtml([
              html`<tr><td class="mono">${b.id}</td><td>${pill(b.status)}</td><td class="small">`,
              html`${when(b.openedAt)}</td><td class="small">${when(b.cutoffAt)}</td>`,
              html`<td class="small">${when(b.sealedAt)}`,
              b.sealedBy ? html`<br>by ${b.sealedBy}` : '',
              b.sealReason ? html`<br><span class="muted">${b.sealReason}</span>` : '',
              html`</td><td class="num">${b.loanCount}</td><td class="num">${b.recordCount}</td>`,
              html`<td class="num">${money(b.principalCents)}</td><td class="small mono">`,
              b.files.map((f) => html`${f.name} <span class="muted">(${f.bytes} B)</span><br>`),
              html`</td>
<td>`,
              b.status === 'open' && v.canAct
                ? joinHtml([
                    html`<form method="post" action="/console/requests" class="inline" data-testid="seal">`,
                    html`${csrfField(v.session)}<input type="hidden" name="action" value="seal">`,
                    html`<input type="hidden" name="batch" value="${b.id}">`,
                    html`<input name="reason" required maxlength="500" placeholder="reason" class="short">`,
                    html`<button type="submit">Request seal</button></form>`,
                  ])
                : '',
              html`</td></tr>`,
            ]),
          ),
          html`
</tbody></table>`,
        ]),
  ]);
}

function locksSection(v: {
  session: BrowserSession;
  locks: readonly LoginLockView[];
  canUnlock: boolean;
}): Html {
  if (v.locks.length === 0)
    return html`<p class="muted" data-testid="login-locks">No user is locked out.</p>`;
  return joinHtml([
    html`<table data-testid="login-locks" class="narrow"><thead><tr><th>User</th><th>Locked from</th><th>`,
    html`Since</th><th>Until</th>`,
    v.canUnlock ? html`<th></th>` : '',
    html`</tr></thead><tbody>
`,
    v.locks.map((l) =>
      joinHtml([
        html`<tr><td>${l.user}</td><td class="mono">`,
        l.client ?? 'every address: slowed, not locked (per-user ceiling)',
        html`</td><td class="small">${whenMs(l.since)}</td><td class="small">${whenMs(l.until)}</td>`,
        v.canUnlock
          ? joinHtml([
              html`<td><form method="post" action="/console/logins/unlock" class="inline">`,
              html`${csrfField(v.session)}<input type="hidden" name="name" value="${l.user}">`,
              html`<button type="submit">Unlock</button></form></td>`,
            ])
          : '',
        html`</tr>`,
      ]),
    ),
    html`
</tbody></table>`,
  ]);
}

export function statusPage(v: {
  session: BrowserSession;
  status: StatusView;
  canAct: boolean;
  locks: readonly LoginLockView[];
  canUnlock: boolean;
}): Html {
  const st = v.status;
  const pf = st.platform;
  return joinHtml([
    html`<h1>Status</h1>
<div class="cards" data-testid="status">
<div class="card"><div class="label">Role</div><div class="value">${pill(st.role)}</div></div>
<div class="card"><div class="label">Last cycle</div><div class="value small">`,
    when(st.lastCycleAt) || 'none yet',
    html`</div></div>
<div class="card"><div class="label">Mapping version</div><div class="value small mono">`,
    st.daemon?.mappingVersion ?? '(no daemon)',
    html`</div></div>
<div class="card"><div class="label">Platform traffic</div><div class="value">`,
    pf === null ? pill('unknown') : pf.trafficStopped ? pill('stopped', 'bad') : pill('flowing', 'ok'),
    html`</div></div>
<div class="card"><div class="label">Core</div><div class="value">`,
    st.core === null ? pill('unknown') : st.core.ok ? pill('reachable', 'ok') : pill('unreachable', 'bad'),
    html`</div></div>
<div class="card"><div class="label">429 strikes (24 h)</div><div class="value">`,
    pf === null ? '' : pf.strikes24h,
    html`</div></div>
<div class="card"><div class="label">Pending requests</div><div class="value">`,
    html`<a href="/console/requests?status=pending">${st.pendingRequests}</a></div></div>
</div>
`,
    st.core && !st.core.ok
      ? joinHtml([
          html`<div class="flash error" data-testid="core-error">Core not answering`,
          st.core.detail ? html`: ${st.core.detail}` : '',
          html`</div>`,
        ])
      : '',
    html`
`,
    st.daemon?.reloadError
      ? html`<div class="flash error" data-testid="reload-error">Mapping reload refused: ${st.daemon.reloadError}</div>`
      : '',
    html`
<h2>Daemon</h2>
`,
    st.daemon
      ? joinHtml([
          html`<dl class="kv"><dt>Process</dt><dd>pid ${st.daemon.pid} on ${st.daemon.host}</dd><dt>Started</dt>`,
          html`<dd>`,
          when(st.daemon.startedAt),
          html`</dd><dt>Mapping</dt><dd class="mono">${st.daemon.mappingVersion}</dd></dl>`,
        ])
      : html`<p class="muted">No daemon running.</p>`,
    html`
<h2>Platform rate budget</h2>
`,
    pf === null
      ? html`<p class="muted">Only the daemon knows its budget.</p>`
      : joinHtml([
          html`<table data-testid="budget" class="narrow"><thead><tr><th>Bucket</th><th class="num">Limit</th>`,
          html`<th class="num">Allowed (after headroom)</th><th class="num">Spent in window</th><th class="num">`,
          html`Remaining</th><th>Paused until</th></tr></thead><tbody>
`,
          pf.budgets.map((b) =>
            joinHtml([
              html`<tr><td>${b.bucket}</td><td class="num">${b.limit}</td><td class="num">${b.allowed}</td>`,
              html`<td class="num">${b.spentInWindow}</td><td class="num">${b.remaining}</td><td>`,
              b.pausedUntil === null
                ? html`<span class="muted">not paused</span>`
                : pill(whenMs(b.pausedUntil), 'bad'),
              html`</td></tr>`,
            ]),
          ),
          html`
</tbody></table>
<p class="muted">`,
          html`This process's view: spent and remaining count its own calls (with the state in PostgreSQL the budget, `,
          html`pauses and strikes are shared by every replica).</p>
<dl class="kv"><dt>Last success</dt><dd>`,
          whenMs(pf.lastSuccessAt) || 'none yet',
          html`</dd><dt>Last failure</dt><dd>`,
          pf.lastFailure
            ? joinHtml([
                whenMs(pf.lastFailure.at),
                html` <span class="mono">${pf.lastFailure.code}</span> ${pf.lastFailure.detail}`,
              ])
            : 'none',
          html`</dd></dl>`,
        ]),
    html`
`,
    v.canAct && pf !== null && (pf.strikes24h > 0 || pf.trafficStopped)
      ? joinHtml([
          html`<form method="post" action="/console/requests" class="action" data-testid="strike-clear">`,
          html`${csrfField(v.session)}<input type="hidden" name="action" value="strike_clear">`,
          html`<label class="grow">`,
          html`Reason (kept in the audit log)<input name="reason" class="wide" required maxlength="500"></label>`,
          html`<button type="submit" class="danger">Request strike clear</button></form>`,
        ])
      : '',
    html`
<h2>Login locks</h2>
${locksSection(v)}
<p class="small muted">`,
    html`A lock ends after console.loginThrottle.windowSeconds; an approver lifts it here, or on the host: `,
    html`<span class="mono">boarding-connector console unlock NAME</span>.</p>
<h2>Loans by state</h2>
<table data-testid="states" class="narrow"><tbody>`,
    Object.entries(st.loansByState).map(([k, n]) => html`<tr><td>${k}</td><td class="num">${n}</td></tr>`),
    html`</tbody></table>
<h2>Platform and core reachability</h2>
${readinessTable(st.readiness)}`,
  ]);
}

function readinessTable(r: unknown): Html {
  const checks = rec(rec(r)['checks']);
  const entries = Object.entries(checks);
  if (entries.length === 0) return html`<pre data-testid="readiness">${pretty(r)}</pre>`;
  return joinHtml([
    html`<table data-testid="readiness"><thead><tr><th>Check</th><th>OK</th><th>Detail</th></tr></thead>`,
    html`<tbody>`,
    entries.map(([k, c]) =>
      joinHtml([
        html`<tr><td>${k}</td><td>`,
        rec(c)['ok'] === true ? pill('ok', 'ok') : pill('failing', 'bad'),
        html`</td><td class="wrap small">${s(rec(c)['detail'])}</td></tr>`,
      ]),
    ),
    html`</tbody></table>`,
  ]);
}

export function loginPage(v: { error: string | null; name: string }): Html {
  return html`<div class="login"><h1>Ops console</h1>
${v.error ? html`<div class="flash error" role="alert" data-testid="login-error">${v.error}</div>` : ''}
<form method="post" action="/console/login" class="stack" data-testid="login">
<label>User<input name="name" autocomplete="username" required maxlength="64" value="${v.name}" autofocus></label>
<label>Password<input name="password" type="password" autocomplete="current-password" required maxlength="1024"></label>
<button type="submit">Log in</button>
</form></div>`;
}

export function errorBody(status: number, message: string, link?: string): Html {
  const title =
    status === 403
      ? 'Not allowed'
      : status === 404
        ? 'Not found'
        : status === 409
          ? 'Conflict'
          : status === 400
            ? 'Cannot do that'
            : status === 429
              ? 'Not so fast'
              : 'Something went wrong';
  const to =
    link !== undefined && link.startsWith('/console/requests/')
      ? joinHtml([
          html`<p><a href="${consoleHref(link)}" data-testid="error-link">Open request `,
          decodeURIComponent(link.slice('/console/requests/'.length)),
          html`</a></p>`,
        ])
      : '';
  return joinHtml([
    html`<h1>${title}</h1><div class="flash error" data-testid="error">${message}</div>${to}<p>`,
    html`<a href="/console/queue">Back to the exception queue</a></p>`,
  ]);
}
