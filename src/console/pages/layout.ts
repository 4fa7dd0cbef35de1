import { localDateTime } from '../../lib/calendar.js';
import { displayZone } from './format.js';
import { html, joinHtml, type Html, type HtmlValue } from './html.js';

/** "America/Chicago (CST)": the zone every time on the page is in. */
function zoneLabel(): string {
  const zone = displayZone.getStore() ?? 'UTC';
  const abbr = localDateTime(Date.now(), zone).split(' ').slice(2).join(' ');
  return abbr === '' || abbr === zone ? zone : `${zone} (${abbr})`;
}
import type { BrowserSession } from './sessions.js';

export type NavKey = 'queue' | 'requests' | 'audit' | 'reconciliation' | 'batches' | 'status' | 'none';

const NAV: ReadonlyArray<[NavKey, string, string]> = [
  ['queue', '/console/queue', 'Exception queue'],
  ['requests', '/console/requests', 'Requests'],
  ['audit', '/console/audit', 'Audit log'],
  ['reconciliation', '/console/reconciliation', 'Reconciliation'],
  ['batches', '/console/batches', 'Batches'],
  ['status', '/console/status', 'Status'],
];

/** The hidden CSRF field every form of a logged-in page carries. */
export function csrfField(session: BrowserSession): Html {
  return html`<input type="hidden" name="_csrf" value="${session.csrfToken}">`;
}

export function rolesOf(session: BrowserSession): string {
  return session.roles.length > 0 ? session.roles.join(', ') : 'no role';
}

export function layout(p: {
  title: string;
  session: BrowserSession | null;
  nav: NavKey;
  body: HtmlValue;
  flash?: BrowserSession['flash'];
  pending?: number;
}): Html {
  const s = p.session;
  return joinHtml([
    html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${p.title} · boarding-connector console</title>
<link rel="stylesheet" href="/console/static/console.css">
<link rel="icon" href="/console/static/favicon.svg" type="image/svg+xml"></head>
<body>
<header class="top"><span class="brand">boarding-connector</span>
`,
    s
      ? joinHtml([
          html`<nav>`,
          NAV.map(([k, href, label]) =>
            joinHtml([
              html`<a href="${href}"`,
              k === p.nav ? html` class="here" aria-current="page"` : '',
              html`>${label}`,
              k === 'requests' && p.pending !== undefined && p.pending > 0
                ? joinHtml([
                    html` <span class="badge" data-testid="pending-badge" title="requests waiting for your `,
                    html`approval">`,
                    p.pending > 99 ? '99+' : p.pending,
                    html`</span>`,
                  ])
                : '',
              html`</a>`,
            ]),
          ),
          html`</nav>
<span class="who" data-testid="who"><span>${s.user} <span class="muted">(${rolesOf(s)})</span></span>
<form method="post" action="/console/logout">${csrfField(s)}<button type="submit">Log out</button></form></span>`,
        ])
      : html`<nav></nav>`,
    html`
</header>
<main>
${s ? html`<p class="zone small muted" data-testid="zone">Times in ${zoneLabel()}</p>` : ''}
${p.flash ? html`<div class="flash ${p.flash.kind}" role="status" data-testid="flash">${p.flash.text}</div>` : ''}
${p.body}
</main></body></html>`,
  ]);
}
