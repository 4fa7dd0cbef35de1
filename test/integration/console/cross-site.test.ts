/**
 * Issue 43 F1: the console's JSON API approved cross-site. An empty-body `POST
 * /console/api/requests/{id}/approve` (and `withdraw`) with `Origin: http://evil.example` and a
 * form Content-Type answered 200 and the request executed, with Basic credentials the browser held
 * and in proxy mode (X-Forwarded-User). Here every such request is refused and the request stays
 * pending; a same-origin or Origin-less client sending JSON still acts. The whole console (API and
 * pages, mountConsole) over real HTTP, the real auth; the service is a small in-memory one holding
 * pending requests, so the outcome (still pending, or executed) is what is asserted.
 */
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import { createConsoleAuth } from '../../../src/console/auth.js';
import { mountConsole } from '../../../src/console/index.js';
import {
  ConsoleError,
  hasRole,
  type ActionRequest,
  type ConsoleService,
} from '../../../src/console/contract.js';
import { startHttpServer, type RunningServer } from '../../../src/http/server.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { FakeClock } from '../../support/fake-clock.js';
import { testHash } from '../../support/console-users.js';

const PW = 'pw-cross-site';
const EVIL = 'http://evil.example';

/** Pending requests made by olga; approve/withdraw change their status (the outcome under test). */
function requestsService(): ConsoleService & { made: Map<string, ActionRequest> } {
  const made = new Map<string, ActionRequest>();
  const get = (id: string): ActionRequest => {
    const r = made.get(id);
    if (!r) throw new ConsoleError(404, `no request ${id}`);
    if (r.status !== 'pending') throw new ConsoleError(409, `${id} is ${r.status}`);
    return r;
  };
  const impl: Partial<ConsoleService> & { made: typeof made } = {
    made,
    approve: (user, id) => {
      const r = get(id);
      if (!hasRole(user, 'approver') || r.maker === user.name)
        return Promise.reject(new ConsoleError(403, 'four eyes'));
      Object.assign(r, { status: 'executed', decidedBy: user.name });
      return Promise.resolve(r);
    },
    withdraw: (user, id) => {
      const r = get(id);
      if (r.maker !== user.name) return Promise.reject(new ConsoleError(403, 'only its maker withdraws it'));
      Object.assign(r, { status: 'withdrawn' });
      return Promise.resolve(r);
    },
    requests: () => Promise.resolve({ items: [...made.values()], next: null }),
    recordAuth: () => Promise.resolve(),
  };
  return new Proxy(impl, {
    get: (t, k) =>
      k in t
        ? (t as Record<string | symbol, unknown>)[k]
        : () => Promise.reject(new Error(`${String(k)}: not used by this test`)),
  }) as ConsoleService & { made: typeof made };
}

function pending(id: string): ActionRequest {
  return {
    id,
    action: 'retry',
    loans: ['L-1'],
    filter: null,
    batch: null,
    previewCount: 1,
    reason: 'mapping fixed',
    maker: 'olga',
    createdAt: '2026-11-25T12:00:00Z',
    status: 'pending',
    decidedBy: null,
    decidedAt: null,
    decisionNote: null,
    executedAt: null,
    result: null,
  };
}

let server: RunningServer;
let service: ReturnType<typeof requestsService>;
const basic = (name: string): string => `Basic ${Buffer.from(`${name}:${PW}`).toString('base64')}`;

beforeAll(async () => {
  const hash = await testHash(PW);
  const config = consoleSchema.parse({
    upgradeHashes: false,
    users: [
      { name: 'olga', passwordHash: hash, roles: ['operator'] },
      { name: 'ivan', passwordHash: hash, roles: ['approver'] },
    ],
    // The test's own address is the trusted proxy: X-Forwarded-User is believed (proxy mode).
    proxy: { userHeader: 'X-Forwarded-User', addresses: ['127.0.0.1', '::1'] },
  });
  const clock = new FakeClock({ start: Date.parse('2026-11-25T12:00:00Z') });
  service = requestsService();
  const auth = createConsoleAuth({ config, clock, logger: silentLogger() });
  const app = express();
  mountConsole(app, { config, service, auth, logger: silentLogger(), clock });
  server = await startHttpServer(app, '127.0.0.1', 0);
});
afterAll(async () => {
  await server.close(0);
});

async function post(
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers,
    redirect: 'manual',
    ...(body !== undefined ? { body } : {}),
  });
  return { status: res.status, text: await res.text() };
}

const FORM = 'application/x-www-form-urlencoded';

describe('console API: cross-site and non-JSON state changes are refused (issue 43 F1)', () => {
  it("the audit's reproduction: an empty form-typed approve from evil.example with Basic credentials, or in proxy mode, is refused and the request stays pending", async () => {
    service.made.set('R1', pending('R1'));
    for (const who of [{ authorization: basic('ivan') }, { 'x-forwarded-user': 'ivan' }]) {
      for (const action of ['approve', 'withdraw']) {
        const asWho = action === 'withdraw' ? { ...who, ...swapTo('olga', who) } : who;
        const r = await post(`/console/api/requests/R1/${action}`, {
          ...asWho,
          origin: EVIL,
          'content-type': FORM,
        });
        expect(r.status, `${action} ${JSON.stringify(asWho)}`).toBe(403);
        expect(r.text).toMatch(/another site/);
        // A Referer from another site (no Origin) is refused the same; so is an opaque Origin.
        const ref = await post(
          `/console/api/requests/R1/${action}`,
          { ...asWho, referer: `${EVIL}/page`, 'content-type': 'application/json' },
          '{}',
        );
        expect(ref.status).toBe(403);
        const opaque = await post(
          `/console/api/requests/R1/${action}`,
          { ...asWho, origin: 'null', 'content-type': 'application/json' },
          '{}',
        );
        expect(opaque.status).toBe(403);
        // Even a JSON body from another site's Origin (it would need a CORS preflight we never grant).
        const json = await post(
          `/console/api/requests/R1/${action}`,
          { ...asWho, origin: EVIL, 'content-type': 'application/json' },
          '{}',
        );
        expect(json.status).toBe(403);
      }
    }
    expect(service.made.get('R1')?.status).toBe('pending');
  });

  it('a POST without a JSON body is refused even from no Origin (an empty body, a form, text/plain), Basic or proxy', async () => {
    service.made.set('R2', pending('R2'));
    for (const who of [{ authorization: basic('ivan') }, { 'x-forwarded-user': 'ivan' }]) {
      const empty = await post('/console/api/requests/R2/approve', { ...who });
      expect(empty.status).toBe(400);
      expect(empty.text).toMatch(/body: expected a JSON object/);
      const emptyJson = await post('/console/api/requests/R2/approve', {
        ...who,
        'content-type': 'application/json',
      });
      expect(emptyJson.status).toBe(400);
      const emptyForm = await post('/console/api/requests/R2/approve', { ...who, 'content-type': FORM });
      expect(emptyForm.status).toBe(400);
      const form = await post('/console/api/requests/R2/approve', { ...who, 'content-type': FORM }, 'note=x');
      expect(form.status).toBe(415);
      expect(form.text).toMatch(/Content-Type: application\/json/);
      const plain = await post(
        '/console/api/requests/R2/approve',
        { ...who, 'content-type': 'text/plain' },
        '{}',
      );
      expect(plain.status).toBe(415);
    }
    expect(service.made.get('R2')?.status).toBe('pending');
  });

  it('automation (no Origin) and the console itself (its own Origin) still act with a JSON body', async () => {
    service.made.set('R3', pending('R3'));
    service.made.set('R4', pending('R4'));
    const ok = await post(
      '/console/api/requests/R3/approve',
      { authorization: basic('ivan'), 'content-type': 'application/json' },
      '{}',
    );
    expect(ok.status).toBe(200);
    expect(service.made.get('R3')?.status).toBe('executed');
    const own = await post(
      '/console/api/requests/R4/approve',
      { 'x-forwarded-user': 'ivan', origin: server.url, 'content-type': 'application/json' },
      '{"note":"checked"}',
    );
    expect(own.status).toBe(200);
    expect(service.made.get('R4')?.status).toBe('executed');
  });

  it('the pages in proxy mode: a form POST from another site is refused before its token is looked at', async () => {
    service.made.set('R5', pending('R5'));
    const r = await post(
      '/console/requests/R5/approve',
      { 'x-forwarded-user': 'ivan', origin: EVIL, 'content-type': FORM },
      'note=x',
    );
    expect(r.status).toBe(403);
    expect(r.text).toMatch(/Origin check/);
    expect(service.made.get('R5')?.status).toBe('pending');
  });
});

/** The same kind of credentials, for another user (the maker withdraws). */
function swapTo(name: string, who: Record<string, string>): Record<string, string> {
  return 'authorization' in who ? { authorization: basic(name) } : { 'x-forwarded-user': name };
}
