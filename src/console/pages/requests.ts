/** Requests: the list (pending first for approvers), one request with approve / reject. */
import {
  REQUEST_STATUSES,
  hasRole,
  type ActionRequest,
  type ConsoleUser,
  type Page,
  type RequestStatus,
} from '../contract.js';
import { pill, pretty, shortId, when } from './format.js';
import { consoleHref, html, joinHtml, seg, type Html } from './html.js';
import { csrfField } from './layout.js';
import type { BrowserSession } from './sessions.js';

function what(r: ActionRequest): Html {
  if (r.loans && r.loans.length === 1)
    return joinHtml([
      html`loan <a class="mono" href="`,
      consoleHref(`/console/loans/${seg(r.loans[0] as string)}`),
      html`">${r.loans[0]}</a>`,
    ]);
  if (r.filter) {
    const parts = Object.entries(r.filter).filter(([, v]) => v !== undefined && v !== '');
    return joinHtml([
      html`${r.previewCount} loan`,
      r.previewCount === 1 ? '' : 's',
      html` by filter <span class="small muted">`,
      parts.length === 0
        ? '(all exceptions)'
        : parts.map(([k, v]) => `${k}=${String(v as string)}`).join(' '),
      html`</span>`,
    ]);
  }
  if (r.loans) return html`${r.loans.length} loans`;
  if (r.batch) return html`batch <span class="mono">${r.batch}</span>`;
  return html``;
}

/** The requests table; with `decide`, pending rows another approver can decide carry an Approve button. */
export function requestRows(
  rows: readonly ActionRequest[],
  decide?: { session: BrowserSession; user: ConsoleUser },
): Html {
  const canDecide = (r: ActionRequest): boolean =>
    decide !== undefined &&
    r.status === 'pending' &&
    hasRole(decide.user, 'approver') &&
    r.maker !== decide.user.name;
  const withActions = decide !== undefined && rows.some(canDecide);
  return joinHtml([
    html`<table data-testid="requests"><thead><tr><th>Request</th><th>Action</th><th>Covers</th><th>`,
    html`Reason</th><th>Maker</th><th>Made</th><th>Status</th><th>Decided by</th>`,
    withActions ? html`<th></th>` : '',
    html`</tr></thead><tbody>
`,
    rows.map((r) =>
      joinHtml([
        html`<tr data-testid="request-row" data-status="${r.status}"><td class="mono date"><a href="`,
        consoleHref(`/console/requests/${seg(r.id)}`),
        html`">${r.id}</a></td><td>${r.action}</td><td>${what(r)}</td><td class="wrap">${r.reason}</td>`,
        html`<td>${r.maker}</td><td class="small date">${when(r.createdAt)}</td><td>${pill(r.status)}</td>`,
        html`<td>${r.decidedBy ?? ''}</td>`,
        withActions
          ? joinHtml([
              html`<td>`,
              decide && canDecide(r)
                ? joinHtml([
                    html`<form method="post" action="`,
                    consoleHref(`/console/requests/${seg(r.id)}/approve`),
                    html`" class="inline">`,
                    csrfField(decide.session),
                    html`<button type="submit">Approve</button></form> <a href="`,
                    consoleHref(`/console/requests/${seg(r.id)}`),
                    html`">Reject…</a>`,
                  ])
                : '',
              html`</td>`,
            ])
          : '',
        html`</tr>`,
      ]),
    ),
    html`
</tbody></table>`,
  ]);
}

function withdrawForm(session: BrowserSession, r: ActionRequest): Html {
  return joinHtml([
    html`<form method="post" action="`,
    consoleHref(`/console/requests/${seg(r.id)}/withdraw`),
    html`" class="action" data-testid="withdraw">${csrfField(session)}
<label class="grow">Why withdrawn (optional)<input name="note" class="wide" maxlength="500"></label>`,
    html`<button type="submit" class="secondary">Withdraw my request</button></form>`,
  ]);
}

export function decisionForms(session: BrowserSession, user: ConsoleUser, r: ActionRequest): Html {
  if (r.status !== 'pending') return html``;
  if (r.maker === user.name)
    return joinHtml([
      html`<p class="note" data-testid="own-request">You made this request: `,
      hasRole(user, 'approver')
        ? 'another approver must decide it (four eyes)'
        : 'it waits for a person with the approver role',
      html`. You can take it back while it waits.</p>${withdrawForm(session, r)}`,
    ]);
  if (!hasRole(user, 'approver'))
    return html`<p class="note">Waiting for a person with the approver role.</p>`;
  const path = `/console/requests/${seg(r.id)}`;
  return joinHtml([
    html`<div class="cards">
<form method="post" action="`,
    consoleHref(`${path}/approve`),
    html`" class="action" data-testid="approve">${csrfField(session)}
<label class="grow">Note (optional)<input name="note" class="wide" maxlength="500"></label><button type="submit">`,
    html`Approve and run</button></form>
<form method="post" action="${consoleHref(`${path}/reject`)}" class="action" data-testid="reject">${csrfField(session)}
<label class="grow">Why rejected (required)<input name="note" class="wide" required maxlength="500"></label>`,
    html`<button type="submit" class="danger">Reject</button></form>
</div>`,
  ]);
}

export function requestsPage(v: {
  session: BrowserSession;
  user: ConsoleUser;
  status: RequestStatus | undefined;
  page: Page<ActionRequest>;
  cursor: string | undefined;
}): Html {
  const tabs: Array<[RequestStatus | undefined, string]> = [
    [undefined, 'all'],
    ...REQUEST_STATUSES.map((s) => [s, s] as [RequestStatus, string]),
  ];
  return joinHtml([
    html`<h1>Requests</h1>
<p>`,
    tabs.map(([s, label]) =>
      joinHtml([
        html`<a href="`,
        consoleHref('/console/requests', { status: s }),
        html`"`,
        s === v.status ? html` class="pill warn"` : html` class="pill"`,
        html`>${label}</a> `,
      ]),
    ),
    html`</p>
`,
    v.page.items.length === 0
      ? html`<p class="muted">No requests${v.status ? ` ${v.status}` : ''}.</p>`
      : requestRows(v.page.items, { session: v.session, user: v.user }),
    html`
<div class="pager">`,
    v.cursor ? html`<a href="${consoleHref('/console/requests', { status: v.status })}">« Newest</a>` : '',
    v.page.next
      ? html`<a href="${consoleHref('/console/requests', { status: v.status, cursor: v.page.next })}">Older »</a>`
      : '',
    html`</div>`,
  ]);
}

function loanTable(r: ActionRequest): Html {
  const rows = r.loanDetails ?? (r.loans ?? []).map((id) => ({ id, loanNumber: null, borrowerName: null }));
  const more = (r.loans?.length ?? 0) - rows.length;
  return joinHtml([
    html`<table class="worklist narrow" data-testid="request-loans"><colgroup><col class="no"><col>`,
    html`<col class="id"></colgroup><thead><tr><th>Loan number</th><th>Borrower</th><th>Loan</th></tr></thead>`,
    html`<tbody>
`,
    rows.map((l) =>
      joinHtml([
        html`<tr><td>${l.loanNumber ?? ''}</td><td title="${l.borrowerName ?? ''}">${l.borrowerName ?? ''}</td>`,
        html`<td class="mono" title="${l.id}"><a href="`,
        consoleHref(`/console/loans/${seg(l.id)}`),
        html`">${shortId(l.id)}</a></td></tr>`,
      ]),
    ),
    html`
</tbody></table>${more > 0 ? html`<p class="muted small">… and ${more} more</p>` : ''}`,
  ]);
}

export function requestPage(v: { session: BrowserSession; user: ConsoleUser; request: ActionRequest }): Html {
  const r = v.request;
  return joinHtml([
    html`<h1>Request <span class="mono">${r.id}</span> ${pill(r.status)}</h1>
<dl class="kv" data-testid="request">
<dt>Action</dt><dd>${r.action}</dd>
<dt>Covers</dt><dd>${what(r)}</dd>
<dt>Reason</dt><dd>${r.reason}</dd>
<dt>Made by</dt><dd>${r.maker} at ${when(r.createdAt)}</dd>
<dt>Status</dt><dd data-testid="request-status">${r.status}</dd>
`,
    r.decidedBy
      ? joinHtml([
          html`<dt>Decided by</dt><dd>${r.decidedBy} at ${when(r.decidedAt)}`,
          r.decisionNote ? html` · ${r.decisionNote}` : '',
          html`</dd>`,
        ])
      : '',
    html`
${r.executedAt ? html`<dt>Executed</dt><dd>${when(r.executedAt)}</dd>` : ''}
`,
    r.result
      ? joinHtml([
          html`<dt>Result</dt><dd>${r.result.done} done`,
          r.result.failed.length > 0 ? html`, <strong>${r.result.failed.length} failed</strong>` : '',
          r.result.detail ? html` · ${r.result.detail}` : '',
          html`</dd>`,
        ])
      : '',
    html`
</dl>
`,
    r.result && r.result.failed.length > 0
      ? joinHtml([
          html`<table><thead><tr><th>Loan</th><th>Why not</th></tr></thead><tbody>`,
          r.result.failed.map((f) =>
            joinHtml([
              html`<tr><td class="mono">`,
              f.loanId
                ? html`<a href="${consoleHref(`/console/loans/${seg(f.loanId)}`)}">${f.loanId}</a>`
                : '',
              html`</td><td class="wrap">${f.message}</td></tr>`,
            ]),
          ),
          html`</tbody></table>`,
        ])
      : '',
    html`
${decisionForms(v.session, v.user, r)}
${r.loans && r.loans.length > 0 ? html`<h2>Loans it covers (${r.loans.length})</h2>${loanTable(r)}` : ''}
`,
    r.filter
      ? joinHtml([
          html`<h2>Filter</h2>`,
          Object.keys(r.filter).length === 0
            ? html`<p class="muted">No filter: every loan in the exception queue.</p>`
            : joinHtml([
                html`<dl class="kv" data-testid="request-filter">`,
                Object.entries(r.filter).map(([k, val]) =>
                  joinHtml([
                    html`<dt>${k === 'q' ? 'search' : k}</dt><dd>`,
                    typeof val === 'string' || typeof val === 'number' ? val : pretty(val),
                    html`</dd>`,
                  ]),
                ),
                html`</dl>`,
              ]),
        ])
      : '',
    html`
<p><a href="${consoleHref('/console/audit', { request: r.id })}">Audit lines of this request</a></p>`,
  ]);
}
