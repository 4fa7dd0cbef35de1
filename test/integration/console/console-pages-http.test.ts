/**
 * The console pages over real HTTP (express on port 0, the real auth with scrypt hashes, the real
 * session store): login, the session cookie's attributes, CSRF and Origin on every POST, a viewer's
 * POST refused by the service's role check, hostile names escaped, search text never in a URL,
 * idle expiry. The service here is a small in-memory one with the interface's role rules (the
 * browser scenario in console-pages-browser.test.ts runs the daemon's real service).
 */
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import { createConsoleAuth } from '../../../src/console/auth.js';
import { testHash } from '../../support/console-users.js';
import { mountConsolePages } from '../../../src/console/pages/index.js';
import { createSessionStore } from '../../../src/console/pages/sessions.js';
import {
  ConsoleError,
  hasRole,
  type ActionRequest,
  type ConsoleService,
  type ExceptionItem,
  type ExceptionQuery,
  type NewRequest,
} from '../../../src/console/contract.js';
import { startHttpServer, type RunningServer } from '../../../src/http/server.js';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import { FakeClock } from '../../support/fake-clock.js';

const HOSTILE = `<script>alert(1)</script> "O'Brien" & Co`;

function item(id: string, borrowerName: string): ExceptionItem {
  return {
    id,
    loanNumber: `LN-${id}`,
    state: 'quarantined',
    reason: 'mapping',
    reviewItems: 0,
    borrowerName,
    productId: 'term',
    amountCents: 1_234_500,
    mappingVersion: 'generic@1',
    releasedAt: '2026-03-01T00:00:00Z',
    since: '2026-03-01T00:00:00Z',
    ageBusinessDays: 1,
    ageBucket: '0-1',
    lastErrorCode: 'E1',
    lastErrorMessage: HOSTILE,
    attempts: 1,
  };
}

/** In-memory service: the interface's rules for requests (operator makes, reason required). */
function memoryService(): ConsoleService & { made: ActionRequest[]; queries: ExceptionQuery[] } {
  const items = [item('L-1', HOSTILE), item('L-2', 'Jane Borrower')];
  const made: ActionRequest[] = [];
  const queries: ExceptionQuery[] = [];
  const match = (q: ExceptionQuery): ExceptionItem[] =>
    items.filter(
      (i) =>
        (q.q === undefined ||
          i.id === q.q ||
          (i.borrowerName ?? '').toLowerCase().includes(q.q.toLowerCase())) &&
        (q.reason === undefined || i.reason === q.reason),
    );
  const no = (): never => {
    throw new Error('not used by this test');
  };
  return {
    made,
    queries,
    exceptions: (q) => {
      queries.push(q);
      const all = match(q);
      const from = q.cursor === undefined ? 0 : Number(Buffer.from(q.cursor, 'base64url').toString());
      const limit = q.limit ?? 50;
      const next = from + limit < all.length ? Buffer.from(String(from + limit)).toString('base64url') : null;
      return Promise.resolve({ items: all.slice(from, from + limit), next });
    },
    exceptionCounts: (f = {}) => {
      const n = match(f).length;
      return Promise.resolve(
        n === 0 ? [] : [{ reason: 'mapping', total: n, byAge: { '0-1': n, '2-5': 0, '>5': 0 } }],
      );
    },
    loan: no,
    reboardDiff: no,
    previewRequest: (user, input) => {
      if (!hasRole(user, 'operator'))
        return Promise.reject(new ConsoleError(403, 'making a request needs the operator role'));
      return Promise.resolve({
        action: input.action,
        count: input.filter ? match(input.filter).length : (input.loans ?? []).length,
        sample: [],
        refused: [],
        exempt: false,
      });
    },
    createRequest: (user, input: NewRequest) => {
      if (!hasRole(user, 'operator'))
        return Promise.reject(
          new ConsoleError(403, `${user.name} cannot make requests: the operator role is needed`),
        );
      if (input.reason.trim() === '')
        return Promise.reject(new ConsoleError(400, 'reason: required', 'reason'));
      const r: ActionRequest = {
        id: `R${made.length + 1}`,
        action: input.action,
        loans: input.loans ?? null,
        filter: input.filter ?? null,
        batch: null,
        previewCount: input.filter ? match(input.filter).length : (input.loans ?? []).length,
        reason: input.reason,
        maker: user.name,
        createdAt: new Date().toISOString(),
        status: 'pending',
        decidedBy: null,
        decidedAt: null,
        decisionNote: null,
        executedAt: null,
        result: null,
      };
      made.push(r);
      return Promise.resolve(r);
    },
    approve: (user, id) => {
      const r = made.find((x) => x.id === id);
      if (!r) return Promise.reject(new ConsoleError(404, `no request ${id}`));
      if (!hasRole(user, 'approver') || r.maker === user.name)
        return Promise.reject(new ConsoleError(403, 'four eyes: an approver other than the maker decides'));
      Object.assign(r, {
        status: 'executed',
        decidedBy: user.name,
        result: { done: 1, failed: [], detail: null },
      });
      return Promise.resolve(r);
    },
    reject: (user, id, note) => {
      const r = made.find((x) => x.id === id);
      if (!r) return Promise.reject(new ConsoleError(404, `no request ${id}`));
      if (!hasRole(user, 'approver') || r.maker === user.name)
        return Promise.reject(new ConsoleError(403, 'four eyes: an approver other than the maker decides'));
      if (note.trim() === '')
        return Promise.reject(new ConsoleError(400, 'note: say why it is rejected', 'note'));
      Object.assign(r, { status: 'rejected', decidedBy: user.name, decisionNote: note });
      return Promise.resolve(r);
    },
    request: (id) => Promise.resolve(made.find((r) => r.id === id) ?? null),
    requests: () => Promise.resolve({ items: [...made].reverse(), next: null }),
    audit: () => Promise.resolve({ items: [], next: null }),
    // eslint-disable-next-line @typescript-eslint/require-await
    auditCsv: async function* () {
      yield 'seq,at,actor\n';
    },
    recordAuth: () => Promise.resolve(),
    recordUnlock: no,
    withdraw: no,
    reports: () => Promise.resolve([]),
    report: () => Promise.resolve(null),
    reportFile: () => Promise.resolve(null),
    signOff: no,
    batches: () => Promise.resolve([]),
    status: no,
    runReconciliation: no,
  };
}

let server: RunningServer;
let service: ReturnType<typeof memoryService>;
const clock = new FakeClock({ start: Date.parse('2026-11-25T12:00:00Z') });
const sessions = createSessionStore({ clock, idleMs: 30 * 60_000 });
const logLines: string[] = [];
const logger = createLogger({
  level: 'info',
  pretty: false,
  destination: { write: (line: string) => void logLines.push(line) },
});

beforeAll(async () => {
  const hash = await testHash('pw-operator');
  const config = consoleSchema.parse({
    users: [
      { name: 'olga', passwordHash: hash, roles: ['operator'] },
      { name: 'vera', passwordHash: hash, roles: ['viewer'] },
      { name: 'peter', passwordHash: hash, roles: ['approver'] },
    ],
  });
  service = memoryService();
  const auth = createConsoleAuth({ config, clock, logger: silentLogger() });
  const app = express();
  // The pages' own session store on the test's clock (idle expiry without waiting).
  app.use('/console/api', (_req, res) => res.status(404).end());
  const router = express.Router();
  mountConsolePages(router, { config, service, auth, logger, clock }, { sessions });
  app.use('/console', router);
  server = await startHttpServer(app, '127.0.0.1', 0);
});
afterAll(async () => {
  await server.close(0);
});

interface Resp {
  status: number;
  location: string | null;
  setCookie: string[];
  body: string;
}

async function request(
  method: 'GET' | 'POST',
  path: string,
  opts: { cookie?: string; form?: Record<string, string>; origin?: string | null; referer?: string } = {},
): Promise<Resp> {
  const headers: Record<string, string> = {};
  if (opts.cookie) headers['cookie'] = opts.cookie;
  if (method === 'POST') {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    if (opts.origin !== null) headers['origin'] = opts.origin ?? server.url;
  }
  if (opts.referer) headers['referer'] = opts.referer;
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers,
    redirect: 'manual',
    ...(opts.form ? { body: new URLSearchParams(opts.form).toString() } : {}),
  });
  return {
    status: res.status,
    location: res.headers.get('location'),
    setCookie: res.headers.getSetCookie(),
    body: await res.text(),
  };
}

async function login(name: string, password = 'pw-operator'): Promise<{ cookie: string; csrf: string }> {
  const res = await request('POST', '/console/login', { form: { name, password } });
  expect(res.status).toBe(303);
  const set = res.setCookie.find((c) => c.startsWith('bc_console_session='));
  if (!set) throw new Error('no session cookie');
  const cookie = set.split(';')[0] as string;
  const page = await request('GET', '/console/queue', { cookie });
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1];
  if (!csrf) throw new Error('no CSRF token on the page');
  return { cookie, csrf };
}

describe('console pages over HTTP', () => {
  it('sends a logged-out browser to the login form; the stylesheet is public', async () => {
    const res = await request('GET', '/console/queue');
    expect(res.status).toBe(303);
    expect(res.location).toBe('/console/login');
    const form = await request('GET', '/console/login');
    expect(form.status).toBe(200);
    expect(form.body).toContain('action="/console/login"');
    const css = await fetch(`${server.url}/console/static/console.css`);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
  });

  it('logs in with a session cookie that is HttpOnly, SameSite=Strict and scoped to /console/, and a strict CSP', async () => {
    const res = await request('POST', '/console/login', { form: { name: 'olga', password: 'pw-operator' } });
    expect(res.status).toBe(303);
    expect(res.location).toBe('/console/queue');
    const cookie = res.setCookie.find((c) => c.startsWith('bc_console_session=')) ?? '';
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/console\//);
    expect(cookie).not.toMatch(/Secure/); // plain HTTP here
    const page = await fetch(`${server.url}/console/queue`, {
      headers: { cookie: cookie.split(';')[0] as string },
    });
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    expect(page.headers.get('content-security-policy')).not.toMatch(/script-src/);
    expect(page.headers.get('cache-control')).toBe('no-store');
  });

  it('marks the cookie Secure when the request came over TLS (X-Forwarded-Proto: https from the proxy)', async () => {
    const res = await fetch(`${server.url}/console/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: server.url,
        'x-forwarded-proto': 'https',
      },
      body: 'name=olga&password=pw-operator',
    });
    expect(res.headers.getSetCookie().find((c) => c.startsWith('bc_console_session='))).toMatch(/; Secure/);
  });

  it('refuses a wrong password with 401 and a login POST from another site with 403', async () => {
    expect(
      (await request('POST', '/console/login', { form: { name: 'olga', password: 'nope' } })).status,
    ).toBe(401);
    expect(
      (
        await request('POST', '/console/login', {
          form: { name: 'olga', password: 'pw-operator' },
          origin: 'http://evil.example',
        })
      ).status,
    ).toBe(403);
  });

  it('a form POST without its CSRF token, or with another session’s, gets 403 and changes nothing', async () => {
    const olga = await login('olga');
    const other = await login('olga');
    const before = service.made.length;
    const form = { action: 'retry', loans: 'L-1', reason: 'core back' };
    expect((await request('POST', '/console/requests', { cookie: olga.cookie, form })).status).toBe(403);
    expect(
      (
        await request('POST', '/console/requests', {
          cookie: olga.cookie,
          form: { ...form, _csrf: other.csrf },
        })
      ).status,
    ).toBe(403);
    expect(
      (
        await request('POST', '/console/requests', {
          cookie: olga.cookie,
          form: { ...form, _csrf: `${olga.csrf}x` },
        })
      ).status,
    ).toBe(403);
    expect(service.made.length).toBe(before);
    const ok = await request('POST', '/console/requests', {
      cookie: olga.cookie,
      form: { ...form, _csrf: olga.csrf },
    });
    expect(ok.status).toBe(303);
    expect(ok.location).toBe(`/console/requests/R${before + 1}`);
    expect(service.made.at(-1)).toMatchObject({
      action: 'retry',
      loans: ['L-1'],
      reason: 'core back',
      maker: 'olga',
    });
  });

  it('a POST with the right token from another origin, or with no Origin and no Referer, gets 403', async () => {
    const olga = await login('olga');
    const form = { action: 'retry', loans: 'L-1', reason: 'x', _csrf: olga.csrf };
    expect(
      (
        await request('POST', '/console/requests', {
          cookie: olga.cookie,
          form,
          origin: 'http://evil.example',
        })
      ).status,
    ).toBe(403);
    expect(
      (await request('POST', '/console/requests', { cookie: olga.cookie, form, origin: null })).status,
    ).toBe(403);
    // A browser that sends no Origin but a same-site Referer passes.
    expect(
      (
        await request('POST', '/console/requests', {
          cookie: olga.cookie,
          form,
          origin: null,
          referer: `${server.url}/console/loans/L-1`,
        })
      ).status,
    ).toBe(303);
  });

  it("a viewer's POST sent by hand (valid session, token and origin) gets 403 from the server", async () => {
    const vera = await login('vera');
    const before = service.made.length;
    const res = await request('POST', '/console/requests', {
      cookie: vera.cookie,
      form: { action: 'retry', loans: 'L-1', reason: 'x', _csrf: vera.csrf },
    });
    expect(res.status).toBe(403);
    expect(res.body).toContain('operator role');
    expect(service.made.length).toBe(before);
    // The viewer's pages carry no action forms.
    const page = await request('GET', '/console/queue', { cookie: vera.cookie });
    expect(page.body).not.toContain('action="/console/requests"');
  });

  it('a loan id holding a comma or a space is one loan: the form posts ids as a list, never a joined string (ln_a,ln_b acted on ln_a and ln_b)', async () => {
    const olga = await login('olga');
    const body = new URLSearchParams([
      ['_csrf', olga.csrf],
      ['action', 'skip'],
      ['reason', 'withdrawn'],
      ['loans', 'ln_a,ln_b'],
      ['loans', 'ln c'],
    ]).toString();
    const res = await fetch(`${server.url}/console/requests`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: olga.cookie,
        origin: server.url,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body,
    });
    expect(res.status).toBe(303);
    expect(service.made.at(-1)?.loans).toEqual(['ln_a,ln_b', 'ln c']);
  });

  it('an approver lands on the requests waiting for them; an operator on the queue, one line per loan with the error as its sentence', async () => {
    const olga = await login('olga');
    const made = await request('POST', '/console/requests', {
      cookie: olga.cookie,
      form: { action: 'skip', loans: 'L-2', reason: 'duplicate', _csrf: olga.csrf },
    });
    expect(made.status).toBe(303);
    const peter = await request('POST', '/console/login', {
      form: { name: 'peter', password: 'pw-operator' },
    });
    expect(peter.location).toBe('/console/requests?status=pending');
    const again = await request('POST', '/console/login', {
      form: { name: 'olga', password: 'pw-operator' },
    });
    expect(again.location).toBe('/console/queue');
    const queue = await request('GET', '/console/queue', { cookie: olga.cookie });
    expect(queue.body).toContain('class="worklist"');
    expect(queue.body).toContain('data-testid="queue-error"');
  });

  it('a request without a reason gets 400 with the field named', async () => {
    const olga = await login('olga');
    const res = await request('POST', '/console/requests', {
      cookie: olga.cookie,
      form: { action: 'skip', loans: 'L-1', reason: '  ', _csrf: olga.csrf },
    });
    expect(res.status).toBe(400);
    expect(res.body).toContain('reason');
  });

  it('escapes hostile names and error messages (shown as text, no markup)', async () => {
    const olga = await login('olga');
    const page = await request('GET', '/console/queue', { cookie: olga.cookie });
    expect(page.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &quot;O&#39;Brien&quot; &amp; Co');
    expect(page.body).not.toContain('<script>');
  });

  it('search text goes by POST into the session, never into a URL; filters stay in the query string', async () => {
    const olga = await login('olga');
    const res = await request('POST', '/console/queue/search', {
      cookie: olga.cookie,
      form: { q: 'Jane Borrower', reason: 'mapping', _csrf: olga.csrf },
    });
    expect(res.status).toBe(303);
    expect(res.location).toBe('/console/queue?reason=mapping');
    const page = await request('GET', res.location as string, { cookie: olga.cookie });
    expect(service.queries.at(-1)).toMatchObject({ q: 'Jane Borrower', reason: 'mapping' });
    expect(page.body).toContain('LN-L-2');
    expect(page.body).not.toContain('LN-L-1');
    // No link or form action on the page carries the name.
    for (const m of page.body.matchAll(/(?:href|action)="([^"]*)"/g))
      expect(m[1]).not.toMatch(/Jane|Borrower/);
    // The bulk request by filter carries the search from the session, not from the page.
    const bulk = await request('POST', '/console/requests', {
      cookie: olga.cookie,
      form: {
        action: 'retry',
        by: 'filter',
        reason: 'mapping fixed',
        f_reason: 'mapping',
        f_sort: 'amount',
        _csrf: olga.csrf,
      },
    });
    expect(bulk.status).toBe(303);
    expect(service.made.at(-1)).toMatchObject({
      reason: 'mapping fixed',
      filter: { q: 'Jane Borrower', reason: 'mapping' },
      previewCount: 1,
    });
    expect(service.made.at(-1)?.filter).not.toHaveProperty('sort');
    const cleared = await request('POST', '/console/queue/search', {
      cookie: olga.cookie,
      form: { clear: '1', _csrf: olga.csrf },
    });
    expect(cleared.location).toBe('/console/queue');
    await request('GET', '/console/queue', { cookie: olga.cookie });
    expect(service.queries.at(-1)?.q).toBeUndefined();
  });

  it('logs every request with its user, the path only: no query string, no search text, no password', async () => {
    const olga = await login('olga');
    await request('POST', '/console/queue/search', {
      cookie: olga.cookie,
      form: { q: 'Zed Quixote', _csrf: olga.csrf },
    });
    await request('GET', '/console/queue?reason=mapping', { cookie: olga.cookie });
    const lines = logLines.map(
      (l) =>
        JSON.parse(l) as {
          msg: string;
          user?: string | null;
          path?: string;
          method?: string;
          status?: number;
        },
    );
    const pages = lines.filter((l) => l.msg === 'console page');
    expect(
      pages.some(
        (l) =>
          l.user === 'olga' && l.method === 'POST' && l.path === '/console/queue/search' && l.status === 303,
      ),
    ).toBe(true);
    expect(
      pages.some(
        (l) => l.user === 'olga' && l.method === 'GET' && l.path === '/console/queue' && l.status === 200,
      ),
    ).toBe(true);
    expect(pages.some((l) => l.user === null && l.path === '/console/login')).toBe(true);
    const all = logLines.join('\n');
    expect(all).not.toContain('Zed Quixote');
    expect(all).not.toContain('pw-operator');
    expect(all).not.toContain('reason=mapping');
  });

  it('pages by the service cursor: Next page carries it with the filters, First page drops it', async () => {
    const olga = await login('olga');
    const first = await request('GET', '/console/queue?limit=1&sort=id', { cookie: olga.cookie });
    expect(first.body).toContain('LN-L-1');
    const next = /href="([^"]+)" data-testid="next-page"/.exec(first.body)?.[1]?.replaceAll('&amp;', '&');
    expect(next).toMatch(/^\/console\/queue\?sort=id&limit=1&cursor=/);
    const second = await request('GET', next as string, { cookie: olga.cookie });
    expect(second.body).toContain('LN-L-2');
    expect(second.body).not.toContain('LN-L-1');
    expect(second.body).not.toContain('data-testid="next-page"');
    expect(second.body).toContain('href="/console/queue?sort=id&amp;limit=1">« First page');
  });

  it('approve and reject post to the request with the note; the maker cannot decide their own request', async () => {
    const olga = await login('olga');
    const peter = await login('peter');
    const made1 = await request('POST', '/console/requests', {
      cookie: olga.cookie,
      form: { action: 'skip', loans: 'L-2', reason: 'withdrawn', _csrf: olga.csrf },
    });
    const path = made1.location as string;
    const page = await request('GET', path, { cookie: peter.cookie });
    expect(page.body).toContain(`action="${path}/approve"`);
    expect(page.body).toContain(`action="${path}/reject"`);
    expect(
      (await request('POST', `${path}/approve`, { cookie: olga.cookie, form: { _csrf: olga.csrf } })).status,
    ).toBe(403);
    expect(
      (
        await request('POST', `${path}/reject`, {
          cookie: peter.cookie,
          form: { _csrf: peter.csrf, note: ' ' },
        })
      ).status,
    ).toBe(400);
    const rejected = await request('POST', `${path}/reject`, {
      cookie: peter.cookie,
      form: { _csrf: peter.csrf, note: 'borrower came back' },
    });
    expect(rejected.status).toBe(303);
    expect(service.made.find((r) => path.endsWith(`/${r.id}`))).toMatchObject({
      status: 'rejected',
      decidedBy: 'peter',
      decisionNote: 'borrower came back',
    });
    const after = await request('GET', path, { cookie: peter.cookie });
    expect(after.body).toContain('rejected');
    expect(after.body).not.toContain(`action="${path}/approve"`);
  });

  it('a bad filter value gets 400 naming the field', async () => {
    const olga = await login('olga');
    const res = await request('GET', '/console/queue?minAmount=lots', { cookie: olga.cookie });
    expect(res.status).toBe(400);
    expect(res.body).toContain('minAmount');
  });

  it('a session ends after the idle time, and on logout', async () => {
    const olga = await login('olga');
    clock.set(clock.now() + 31 * 60_000);
    expect((await request('GET', '/console/queue', { cookie: olga.cookie })).location).toBe('/console/login');
    const again = await login('olga');
    const out = await request('POST', '/console/logout', {
      cookie: again.cookie,
      form: { _csrf: again.csrf },
    });
    expect(out.status).toBe(303);
    expect(out.setCookie.join(';')).toMatch(/bc_console_session=;/);
    expect((await request('GET', '/console/queue', { cookie: again.cookie })).location).toBe(
      '/console/login',
    );
  });

  // Last in this block: it uses up the failures allowed from this address.
  it('throttles failed logins on the form (H5’s shared throttle): 429 with Retry-After, even for the right password', async () => {
    let status = 0;
    let attempts = 0;
    let retryAfter: string | null = null;
    while (status !== 429 && attempts < 10) {
      const res = await fetch(`${server.url}/console/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
        body: 'name=olga&password=wrong',
      });
      status = res.status;
      retryAfter = res.headers.get('retry-after');
      attempts += 1;
    }
    expect(status).toBe(429);
    expect(attempts).toBeLessThanOrEqual(6);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    const right = await request('POST', '/console/login', {
      form: { name: 'olga', password: 'pw-operator' },
    });
    expect(right.status).toBe(429);
    expect(right.body).toContain('Too many failed logins');
  });
});

describe('console pages behind the trusted proxy (console.proxy)', () => {
  let proxied: RunningServer;
  const made = memoryService();
  beforeAll(async () => {
    const config = consoleSchema.parse({
      users: [{ name: 'olga', roles: ['operator'] }],
      proxy: { userHeader: 'X-Forwarded-User', addresses: ['127.0.0.1'] },
    });
    const app = express();
    const router = express.Router();
    mountConsolePages(router, {
      config,
      service: made,
      auth: createConsoleAuth({ config, clock, logger: silentLogger() }),
      logger: silentLogger(),
      clock,
    });
    app.use('/console', router);
    proxied = await startHttpServer(app, '127.0.0.1', 0);
  });
  afterAll(async () => {
    await proxied.close(0);
  });

  it('logs the named user in without the form, and their POSTs still need the session’s CSRF token', async () => {
    const page = await fetch(`${proxied.url}/console/queue`, {
      headers: { 'x-forwarded-user': 'olga' },
      redirect: 'manual',
    });
    expect(page.status).toBe(200);
    const cookie = (page.headers.getSetCookie().find((c) => c.startsWith('bc_console_session=')) ?? '').split(
      ';',
    )[0] as string;
    const body = await page.text();
    expect(body).toContain('olga');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
    const post = (form: Record<string, string>): Promise<Response> =>
      fetch(`${proxied.url}/console/requests`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'x-forwarded-user': 'olga',
          cookie,
          origin: proxied.url,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams(form).toString(),
      });
    expect((await post({ action: 'retry', loans: 'L-1', reason: 'proxy user' })).status).toBe(403);
    expect((await post({ action: 'retry', loans: 'L-1', reason: 'proxy user', _csrf: csrf })).status).toBe(
      303,
    );
    expect(made.made.at(-1)).toMatchObject({ maker: 'olga', reason: 'proxy user' });
  });

  it('a user the proxy names who is not in console.users gets the login form', async () => {
    const res = await fetch(`${proxied.url}/console/queue`, {
      headers: { 'x-forwarded-user': 'mallory' },
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/login');
  });
});
