/**
 * The exception queue page: filters in the query string (none of them PII), the search text kept
 * in the session (a borrower's name must not reach access logs), counts per reason by age, one
 * page of loans (keyset paging from the service), and for operators the bulk request by filter
 * with its preview count.
 */
import { QUARANTINE_REASONS } from '../../store/loan-states.js';
import {
  AGE_BUCKETS,
  EXCEPTION_SORTS,
  type ExceptionFilter,
  type ExceptionItem,
  type ExceptionPage,
  type ExceptionQuery,
  type ExceptionSort,
  type ReasonAgeCount,
  type RequestPreview,
} from '../contract.js';
import { amountInput, errorSentence, money, parseAmount, pill, shortId, when } from './format.js';
import { consoleHref, html, joinHtml, seg, type Html } from './html.js';
import { csrfField } from './layout.js';
import type { BrowserSession } from './sessions.js';

export const FILTER_KEYS = [
  'state',
  'reason',
  'product',
  'minAmount',
  'maxAmount',
  'mappingVersion',
  'releasedFrom',
  'releasedTo',
  'minAge',
  'maxAge',
] as const;
export const QUEUE_KEYS = [...FILTER_KEYS, 'sort', 'dir', 'limit'] as const;
export type QueueParams = Partial<Record<(typeof QUEUE_KEYS)[number] | 'cursor', string>>;

const REASONS = [...QUARANTINE_REASONS, 'review'] as const;

export class QueueParamError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** The page's query (strings) → the service's filter (typed); a value that cannot be read names its field. */
export function filterOf(p: QueueParams, search: string): ExceptionFilter {
  const f: ExceptionFilter = {};
  if (p.state) {
    if (p.state !== 'quarantined' && p.state !== 'review')
      throw new QueueParamError('state', 'state: expected quarantined or review');
    f.state = p.state;
  }
  if (p.reason) {
    if (!(REASONS as readonly string[]).includes(p.reason))
      throw new QueueParamError('reason', `reason: expected one of ${REASONS.join(', ')}`);
    f.reason = p.reason as ExceptionFilter['reason'] & string;
  }
  if (p.product) f.product = p.product;
  if (p.mappingVersion) f.mappingVersion = p.mappingVersion;
  for (const [key, target] of [
    ['minAmount', 'minAmountCents'],
    ['maxAmount', 'maxAmountCents'],
  ] as const) {
    const cents = parseAmount(p[key]);
    if (cents !== null) {
      if (Number.isNaN(cents))
        throw new QueueParamError(key, `${key}: expected an amount such as 2500 or 2500.50`);
      f[target] = cents;
    }
  }
  for (const [key, target] of [
    ['releasedFrom', 'releasedFrom'],
    ['releasedTo', 'releasedTo'],
  ] as const) {
    const v = p[key];
    if (v) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(v))
        throw new QueueParamError(key, `${key}: expected a date YYYY-MM-DD`);
      f[target] = v;
    }
  }
  for (const [key, target] of [
    ['minAge', 'minAgeDays'],
    ['maxAge', 'maxAgeDays'],
  ] as const) {
    const v = p[key];
    if (v) {
      if (!/^\d{1,5}$/.test(v))
        throw new QueueParamError(key, `${key}: expected a whole number of business days`);
      f[target] = Number(v);
    }
  }
  const q = search.trim();
  if (q !== '') f.q = q;
  return f;
}

export function queryOf(p: QueueParams, search: string): ExceptionQuery {
  const query: ExceptionQuery = { ...filterOf(p, search) };
  if (p.sort) {
    if (!(EXCEPTION_SORTS as readonly string[]).includes(p.sort))
      throw new QueueParamError('sort', `sort: expected one of ${EXCEPTION_SORTS.join(', ')}`);
    query.sort = p.sort as ExceptionSort;
  }
  if (p.dir) {
    if (p.dir !== 'asc' && p.dir !== 'desc') throw new QueueParamError('dir', 'dir: expected asc or desc');
    query.dir = p.dir;
  }
  if (p.limit) {
    if (!/^\d{1,3}$/.test(p.limit) || Number(p.limit) < 1 || Number(p.limit) > 500)
      throw new QueueParamError('limit', 'limit: expected 1–500');
    query.limit = Number(p.limit);
  }
  if (p.cursor) query.cursor = p.cursor;
  return query;
}

/** The query string of the queue with some keys changed (paging, sorting); search never in it. */
export function queueHref(
  p: QueueParams,
  change: Partial<Record<keyof QueueParams, string | undefined>> = {},
): string {
  const merged: Record<string, string | undefined> = {};
  for (const k of QUEUE_KEYS) merged[k] = p[k];
  const out = { ...merged, ...change };
  return consoleHref('/console/queue', out);
}

function select(
  name: string,
  value: string | undefined,
  options: ReadonlyArray<readonly [string, string]>,
  label: string,
): Html {
  return joinHtml([
    html`<label>${label}<select name="${name}">`,
    options.map(
      ([v, text]) => html`<option value="${v}"${v === (value ?? '') ? html` selected` : ''}>${text}</option>`,
    ),
    html`</select></label>`,
  ]);
}

function input(
  name: string,
  value: string | undefined,
  label: string,
  attrs: { type?: string; placeholder?: string; cls?: string } = {},
): Html {
  return joinHtml([
    html`<label>${label}<input name="${name}" type="${attrs.type ?? 'text'}" value="${value ?? ''}"`,
    attrs.placeholder ? html` placeholder="${attrs.placeholder}"` : '',
    attrs.cls ? html` class="${attrs.cls}"` : '',
    html`></label>`,
  ]);
}

/** The current filter as hidden inputs (the bulk request form and the search form carry it). */
export function filterHiddenFields(p: QueueParams, prefix = ''): Html {
  return joinHtml([
    QUEUE_KEYS.filter((k) => p[k]).map(
      (k) => html`<input type="hidden" name="${prefix}${k}" value="${p[k] ?? ''}">`,
    ),
  ]);
}

/**
 * The bulk request form's filter fields are prefixed: the queue's `reason` filter (why a loan is in
 * the queue) must never be read as the request's `reason` (why the operator acts).
 */
export const BULK_FILTER_PREFIX = 'f_';

function sortLink(p: QueueParams, key: ExceptionSort, label: string): Html {
  const active = (p.sort ?? 'age') === key;
  const dir = active && (p.dir ?? 'asc') === 'asc' ? 'desc' : 'asc';
  return joinHtml([
    html`<a href="`,
    queueHref(p, { sort: key, dir, cursor: undefined }),
    html`"`,
    active ? html` class="sorted"` : '',
    html`>${label}</a>`,
  ]);
}

function countsTable(counts: readonly ReasonAgeCount[], p: QueueParams): Html {
  if (counts.length === 0) return html`<p class="muted" data-testid="counts">No exceptions match.</p>`;
  const total = counts.reduce((n, c) => n + c.total, 0);
  return joinHtml([
    html`<table data-testid="counts" class="narrow"><thead><tr><th>Reason</th>`,
    AGE_BUCKETS.map((b) => html`<th class="num">${b} business days</th>`),
    html`<th class="num">Total</th></tr></thead><tbody>
`,
    counts.map((c) =>
      joinHtml([
        html`<tr><td><a href="`,
        queueHref(p, { reason: c.reason, cursor: undefined }),
        html`">${c.reason}</a></td>`,
        AGE_BUCKETS.map((b) => html`<td class="num">${c.byAge[b]}</td>`),
        html`<td class="num">${c.total}</td></tr>`,
      ]),
    ),
    html`
<tr><th>All</th>`,
    AGE_BUCKETS.map((b) => html`<th class="num">${counts.reduce((n, c) => n + c.byAge[b], 0)}</th>`),
    html`<th class="num">${total}</th></tr>
</tbody></table>`,
  ]);
}

function itemRow(i: ExceptionItem): Html {
  const sentence = errorSentence(i.lastErrorCode, i.lastErrorMessage);
  const reason =
    i.reason === 'review'
      ? `${i.reviewItems} review item${i.reviewItems === 1 ? '' : 's'}`
      : i.reason.replaceAll('_', ' ');
  return html`<tr data-testid="queue-row">
<td class="mono" title="${i.id}"><a href="${consoleHref(`/console/loans/${seg(i.id)}`)}">${shortId(i.id)}</a></td>
<td title="${i.loanNumber ?? ''}">${i.loanNumber ?? ''}</td>
<td title="${i.borrowerName ?? ''}">${i.borrowerName ?? ''}</td>
<td title="${i.state}">${pill(reason, i.state === 'quarantined' ? 'bad' : 'warn')}</td>
<td class="num">${money(i.amountCents)}</td>
<td class="small date" title="${when(i.releasedAt)}">${when(i.releasedAt).slice(0, 10)}</td>
<td class="num" title="in this state since ${when(i.since)} (${i.ageBucket} business days)">${i.ageBusinessDays}</td>
<td class="small" title="${i.lastErrorMessage ?? ''}" data-testid="queue-error">${sentence}</td>
</tr>`;
}

export function queuePage(v: {
  session: BrowserSession;
  params: QueueParams;
  page: ExceptionPage;
  counts: readonly ReasonAgeCount[];
  preview: { retry: RequestPreview | null; skip: RequestPreview | null } | null;
  canAct: boolean;
  products: readonly string[];
  versions: readonly string[];
}): Html {
  const p = v.params;
  const f = (() => {
    try {
      return filterOf(p, '');
    } catch {
      return {} as ExceptionFilter;
    }
  })();
  const search = v.session.search;
  const hasFilter = FILTER_KEYS.some((k) => p[k]) || search !== '';
  const bulk = (action: 'retry' | 'skip', preview: RequestPreview | null): Html => {
    if (!preview) return html``;
    return joinHtml([
      html`<form method="post" action="/console/requests" class="action" data-testid="bulk-${action}">
${csrfField(v.session)}<input type="hidden" name="action" value="${action}">`,
      html`<input type="hidden" name="by" value="filter">`,
      filterHiddenFields(p, BULK_FILTER_PREFIX),
      html`
<label class="grow">`,
      html`Reason for bulk ${action} (kept in the audit log)<input name="reason" class="wide" required `,
      html`maxlength="500" placeholder="`,
      action === 'retry' ? 'e.g. core outage over, ticket OPS-123' : 'e.g. duplicate application, withdrawn',
      html`"></label>
<button type="submit"`,
      preview.count === 0 ? html` disabled` : '',
      action === 'skip' ? html` class="danger"` : '',
      html`>Request ${action} of all ${preview.count} matching loan`,
      preview.count === 1 ? '' : 's',
      html`</button>
`,
      preview.refused.length > 0
        ? joinHtml([
            html`<span class="small muted">${preview.refused.length} cannot be `,
            action === 'retry' ? 'retried' : 'skipped',
            html` now</span>`,
          ])
        : '',
      html`
`,
      preview.exempt
        ? html`<span class="small muted">(exempt from four eyes: runs at once)</span>`
        : html`<span class="small muted">(waits for an approver)</span>`,
      html`
</form>`,
    ]);
  };
  return joinHtml([
    html`<h1>Exception queue</h1>
<form method="get" action="/console/queue" class="filters" data-testid="filters">
${select(
  'state',
  p.state,
  [
    ['', 'any'],
    ['quarantined', 'quarantined'],
    ['review', 'boarded with review items'],
  ],
  'State',
)}
${select('reason', p.reason, [['', 'any'], ...REASONS.map((r) => [r, r] as const)], 'Exception reason')}
`,
    v.products.length > 0
      ? select('product', p.product, [['', 'any'], ...v.products.map((x) => [x, x] as const)], 'Product')
      : input('product', p.product, 'Product', { cls: 'short' }),
    html`
`,
    input('minAmount', p.minAmount ?? amountInput(f.minAmountCents), 'Amount from', {
      cls: 'short',
      placeholder: '0.00',
    }),
    html`
${input('maxAmount', p.maxAmount ?? amountInput(f.maxAmountCents), 'Amount to', { cls: 'short', placeholder: 'any' })}
`,
    v.versions.length > 0
      ? select(
          'mappingVersion',
          p.mappingVersion,
          [['', 'any'], ...v.versions.map((x) => [x, x] as const)],
          'Mapping version',
        )
      : input('mappingVersion', p.mappingVersion, 'Mapping version', { cls: 'short' }),
    html`
${input('releasedFrom', p.releasedFrom, 'Released from', { type: 'date' })}
${input('releasedTo', p.releasedTo, 'Released to', { type: 'date' })}
${input('minAge', p.minAge, 'Min age (bus. days)', { type: 'number' })}
${input('maxAge', p.maxAge, 'Max age', { type: 'number' })}
`,
    p.sort ? html`<input type="hidden" name="sort" value="${p.sort}">` : '',
    p.dir ? html`<input type="hidden" name="dir" value="${p.dir}">` : '',
    html`
<button type="submit">Filter</button> <a href="/console/queue">Clear</a>
</form>
<form method="post" action="/console/queue/search" class="filters" data-testid="search">
${csrfField(v.session)}${filterHiddenFields(p)}
<label class="grow">`,
    html`Search: loan id, loan number or borrower name<input name="q" class="wide" value="${search}" maxlength="200" `,
    html`autocomplete="off"></label>
<button type="submit">Search</button>`,
    search !== ''
      ? html` <button type="submit" name="clear" value="1" class="secondary">Clear search</button>`
      : '',
    html`
</form>
<h2>Counts per reason by age${hasFilter ? ' (this filter)' : ''}</h2>
${countsTable(v.counts, p)}
<h2>Loans</h2>
`,
    v.canAct && v.preview
      ? html`<div data-testid="bulk">${bulk('retry', v.preview.retry)}${bulk('skip', v.preview.skip)}</div>`
      : '',
    html`
<table data-testid="queue" class="worklist"><colgroup><col class="id"><col class="no"><col class="who">`,
    html`<col class="why"><col class="amt"><col class="rel"><col class="age"><col></colgroup><thead><tr>
<th>`,
    sortLink(p, 'id', 'Loan'),
    html`</th><th>Loan number</th><th>Borrower</th><th>Why here</th><th class="num">`,
    sortLink(p, 'amount', 'Amount'),
    html`</th><th>`,
    sortLink(p, 'released', 'Released'),
    html`</th><th class="num" title="business days in this state">`,
    sortLink(p, 'age', 'Age'),
    html`</th><th>What to do</th>
</tr></thead><tbody>
`,
    v.page.items.length === 0
      ? html`<tr><td colspan="8" class="muted">No loans match.</td></tr>`
      : v.page.items.map(itemRow),
    html`
</tbody></table>
<div class="pager">`,
    p.cursor ? html`<a href="${queueHref(p, { cursor: undefined })}">« First page</a>` : '',
    v.page.next
      ? html`<a href="${queueHref(p, { cursor: v.page.next })}" data-testid="next-page">Next page »</a>`
      : '',
    html`<span class="muted small">${v.page.items.length} on this page</span></div>`,
  ]);
}
