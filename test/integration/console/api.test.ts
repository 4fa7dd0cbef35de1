import { mkdirSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnectorDaemon, type ConnectorDaemon } from '../../../src/app/daemon.js';
import { buildRuntime, type BoardingRuntime } from '../../../src/app/runtime.js';
import { testHash } from '../../support/console-users.js';
import { runCli } from '../pipeline/harness.js';
import { loadConfig } from '../../../src/config/load.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';
import { FakeCore } from '../../support/fake-core.js';
import { FakeMapper, issue } from '../../support/fake-mapper.js';
import {
  createTestDatabase,
  pgEnv,
  pgStoreConfig,
  TEST_TIN_HASH_KEY,
  type TestDatabase,
} from '../../support/pg.js';
import { STORE_ENGINES, engineSkipped } from '../../support/store-engines.js';

/**
 * The console's JSON API on a real daemon (sandbox platform, fake core, the admin listener on
 * port 0): roles and four eyes enforced on the server, a bulk retry by filter that boards the
 * loans once approved, the audit log, report sign-off, Basic auth throttling and the proxy header;
 * a browser session's login, request and approval. All of it with the state in SQLite and in
 * PostgreSQL (store.engine: postgres on a fresh database of the test server).
 */
const LOANS = 5;
const PW = {
  olga: 'olga-operator-pw',
  ivan: 'ivan-approver-pw',
  vera: 'vera-viewer-pw',
  ana: 'ana-both-roles-pw',
};

/** The admin listener of the daemon of the engine under test (set by its beforeAll). */
let base: string;

const auth = (user: keyof typeof PW, pw = PW[user]): Record<string, string> => ({
  authorization: `Basic ${Buffer.from(`${user}:${pw}`).toString('base64')}`,
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's JSON, asserted field by field
type Json = any;

async function api(
  user: keyof typeof PW | null,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Json; text: string; headers: Headers }> {
  // Every POST sends a JSON body ({} for an action without fields): the API refuses any other.
  const sent = body ?? (method === 'POST' ? {} : undefined);
  const res = await fetch(`${base}/console/api${path}`, {
    method,
    headers: {
      ...(user ? auth(user) : {}),
      ...(sent !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(sent !== undefined ? { body: JSON.stringify(sent) } : {}),
  });
  const text = await res.text();
  let json: Json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, json, text, headers: res.headers };
}

describe.each(STORE_ENGINES)('on %s', (engine) => {
  let sb: RunningSandbox;
  let dir: string;
  let rt: BoardingRuntime;
  let daemon: ConnectorDaemon;
  let pg: TestDatabase | undefined;
  const mapper = new FakeMapper();
  const core = new FakeCore();

  beforeAll(async () => {
    if (engineSkipped(engine)) return;
    if (engine === 'postgres') pg = await createTestDatabase({ migrate: false });
    sb = await startSandbox({
      amounts: 'extreme',
      loans: LOANS,
      releaseRatio: 1,
      readsPerWindow: 10_000,
      writesPerWindow: 10_000,
      windowMs: 60_000,
    });
    dir = mkdtempSync(join(tmpdir(), 'console-api-'));
    const users = await Promise.all(
      (
        [
          ['olga', ['operator']],
          ['ivan', ['approver']],
          ['vera', ['viewer']],
          ['ana', ['operator', 'approver']],
        ] as const
      ).map(
        async ([name, roles]) =>
          `    - { name: ${name}, passwordHash: "${await testHash(PW[name])}", roles: [${roles.join(', ')}] }`,
      ),
    );
    const yaml = [
      'platform:',
      `  baseUrl: ${sb.baseUrl}`,
      `  apiKey: ${sb.apiKey}`,
      '  environment: development',
      engine === 'postgres'
        ? `store: { engine: postgres, path: ${join(dir, 'state.sqlite')}, postgres: ${JSON.stringify(pgStoreConfig(pg?.url ?? '', { poolSize: 4 }))} }\ncustomers: { tinHashKey: ${TEST_TIN_HASH_KEY} }`
        : `store: { path: ${join(dir, 'state.sqlite')} }`,
      'webhooks: { host: 127.0.0.1, port: 0 }',
      'admin: { host: 127.0.0.1, port: 0 }',
      "schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *', reconcile: '0 0 1 1 *' }",
      `reports: { dir: ${join(dir, 'reports')} }`,
      'boarding: { retryBaseMs: 200, retryMaxMs: 2000 }',
      'console:',
      '  upgradeHashes: false',
      '  users:',
      ...users,
      '  proxy: { userHeader: X-Forwarded-User, addresses: [10.9.9.9] }',
      '  loginThrottle: { maxFailures: 3, windowSeconds: 600 }',
      '',
    ].join('\n');
    writeFileSync(join(dir, 'config.yaml'), yaml);
    // Every loan fails to map at first: the startup cycle quarantines them all (reason mapping).
    mapper.fail = () => [issue('mapping', 'paymentFrequency "irregular" has no core code')];
    const config = loadConfig({ env: engine === 'postgres' ? pgEnv() : {}, fileText: yaml });
    rt = await buildRuntime(config, silentLogger(), { clock: systemClock, mapper, core });
    daemon = createConnectorDaemon(rt);
    await daemon.start();
    await daemon.idle();
    base = daemon.adminUrl() as string;
  });

  afterAll(async () => {
    await daemon?.stop();
    await rt?.close();
    await sb?.close();
    await pg?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe.skipIf(engineSkipped(engine))('ops console JSON API', () => {
    it('a hand-made paging cursor is a 400 naming the cursor (regression: a 500 on PostgreSQL, 22P02, and a 200 on SQLite)', async () => {
      const cursor = (v: object): string =>
        encodeURIComponent(Buffer.from(JSON.stringify(v)).toString('base64url'));
      for (const path of [
        `/exceptions?cursor=${cursor({ s: 'age', d: 'asc', v: 'not-a-time', id: 'x' })}`,
        `/exceptions?sort=amount&cursor=${cursor({ s: 'amount', d: 'asc', v: 1.5, id: 'x' })}`,
        `/exceptions?sort=id&cursor=${cursor({ s: 'id', d: 'asc', v: 'a', id: 'nul\u0000byte' })}`,
        `/requests?cursor=${cursor({ at: 'yesterday', id: 'R1' })}`,
        `/requests?cursor=${cursor({ at: 1.25, id: 'R1' })}`,
        `/audit?cursor=${cursor({ seq: '7' })}`,
        '/exceptions?cursor=%25%25not-base64',
      ]) {
        const r = await api('vera', 'GET', path);
        expect({ path, status: r.status }).toEqual({ path, status: 400 });
        expect(r.text).toContain('cursor');
      }
    });

    it('lists the exception queue with filters, search and keyset paging', async () => {
      const first = await api('vera', 'GET', '/exceptions?reason=mapping&limit=2');
      expect(first.status).toBe(200);
      expect(first.json.items).toHaveLength(2);
      expect(first.json.items[0]).toMatchObject({ state: 'quarantined', reason: 'mapping' });
      expect(typeof first.json.next).toBe('string');
      const seen: string[] = first.json.items.map((i: { id: string }) => i.id);
      let next: string | null = first.json.next;
      while (next) {
        const page = await api(
          'vera',
          'GET',
          `/exceptions?reason=mapping&limit=2&cursor=${encodeURIComponent(next)}`,
        );
        expect(page.status).toBe(200);
        seen.push(...page.json.items.map((i: { id: string }) => i.id));
        next = page.json.next;
      }
      expect(new Set(seen).size).toBe(LOANS);
      expect(seen).toHaveLength(LOANS);

      const one = first.json.items[0];
      const byNumber = await api(
        'vera',
        'GET',
        `/exceptions?q=${encodeURIComponent(one.loanNumber ?? one.id)}`,
      );
      expect(byNumber.json.items.map((i: { id: string }) => i.id)).toEqual([one.id]);
      expect((await api('vera', 'GET', '/exceptions?reason=review')).json.items).toEqual([]);
      // The borrower's name is kept at fetch: part of it, in any case, finds the loan.
      const name = one.borrowerName as string;
      expect(name).toEqual(expect.any(String));
      const part = name.slice(1, Math.min(name.length, 8)).toUpperCase();
      const byName = await api('vera', 'GET', `/exceptions?q=${encodeURIComponent(part)}&limit=500`);
      expect(byName.json.items.map((i: { id: string }) => i.id)).toContain(one.id);

      // The issue's URL with every parameter empty: empty means absent.
      const empty = await api('vera', 'GET', '/exceptions?reason=&state=&q=&limit=&cursor=');
      expect(empty.status).toBe(200);
      expect(empty.json.items).toHaveLength(LOANS);

      const counts = await api('vera', 'GET', '/exceptions/counts');
      expect(counts.json.counts).toEqual([
        { reason: 'mapping', total: LOANS, byAge: { '0-1': LOANS, '2-5': 0, '>5': 0 } },
      ]);

      // A bad filter names the parameter.
      const bad = await api('vera', 'GET', '/exceptions?reason=nonsense');
      expect(bad.status).toBe(400);
      expect(bad.json.field).toBe('reason');
    });

    it("shows a loan's history", async () => {
      const id = (await api('vera', 'GET', '/exceptions?limit=1')).json.items[0].id as string;
      const h = await api('vera', 'GET', `/loans/${encodeURIComponent(id)}`);
      expect(h.status).toBe(200);
      expect(h.json.loan).toMatchObject({ id, state: 'quarantined', quarantineReason: 'mapping' });
      expect(h.json.events.some((e: { toState: string | null }) => e.toState === 'quarantined')).toBe(true);
      expect((await api('vera', 'GET', '/loans/no-such-loan')).status).toBe(404);
    });

    it('refuses a viewer POST (403) and a request without a reason (400)', async () => {
      const viewer = await api('vera', 'POST', '/requests', {
        action: 'retry',
        filter: { reason: 'mapping' },
        reason: 'try again',
      });
      expect(viewer.status).toBe(403);
      const noReason = await api('olga', 'POST', '/requests', {
        action: 'retry',
        filter: { reason: 'mapping' },
      });
      expect(noReason.status).toBe(400);
      expect(noReason.json.field).toBe('reason');
      const blank = await api('olga', 'POST', '/requests', { action: 'skip', loans: ['x'], reason: '   ' });
      expect(blank.status).toBe(400);
      const notJson = await fetch(`${base}/console/api/requests`, {
        method: 'POST',
        headers: { ...auth('olga'), 'content-type': 'application/x-www-form-urlencoded' },
        body: 'action=retry&reason=x',
      });
      expect(notJson.status).toBe(415);
      // Nothing was requested.
      expect((await api('vera', 'GET', '/requests')).json.items).toEqual([]);
    });

    it('bulk retry by filter: preview count, maker cannot approve, approver approves → executed and the loans board', async () => {
      const preview = await api('olga', 'POST', '/requests/preview', {
        action: 'retry',
        filter: { reason: 'mapping' },
        reason: 'mapping fixed',
      });
      expect(preview.status).toBe(200);
      expect(preview.json).toMatchObject({ action: 'retry', count: LOANS, exempt: false });

      const made = await api('ana', 'POST', '/requests', {
        action: 'retry',
        filter: { reason: 'mapping' },
        reason: 'payment frequency mapping fixed in v2',
      });
      expect(made.status).toBe(202);
      expect(made.json).toMatchObject({
        status: 'pending',
        previewCount: LOANS,
        maker: 'ana',
        action: 'retry',
      });
      const id = made.json.id as string;

      // Four eyes: the maker (who is also an approver) cannot approve; a viewer or an operator neither.
      expect((await api('ana', 'POST', `/requests/${id}/approve`)).status).toBe(403);
      expect((await api('vera', 'POST', `/requests/${id}/approve`)).status).toBe(403);
      expect((await api('olga', 'POST', `/requests/${id}/approve`)).status).toBe(403);
      // A Basic viewer naming an approver in the proxy header from a non-proxy address is still the viewer.
      expect(
        (await api('vera', 'POST', `/requests/${id}/approve`, undefined, { 'x-forwarded-user': 'ivan' }))
          .status,
      ).toBe(403);
      expect((await rt.store.loans.countByState()).quarantined).toBe(LOANS);

      mapper.fail = () => null;
      // The note carries terminal control sequences (ESC, BEL): kept in JSON, neutralised in the CSV export.
      const approved = await api('ivan', 'POST', `/requests/${id}/approve`, {
        note: 'checked the v2 diff\u001b[2J\u0007',
      });
      expect(approved.status).toBe(200);
      expect(approved.json.status).toBe('executed');
      expect(approved.json.result).toMatchObject({ done: LOANS, failed: [] });
      // Approving twice: no longer pending.
      expect((await api('ivan', 'POST', `/requests/${id}/approve`)).status).toBe(409);

      // The executor asked the daemon for a cycle: every loan boards into the core and is acknowledged.
      await expect
        .poll(async () => (await rt.store.loans.countByState()).acknowledged, { timeout: 20_000 })
        .toBe(LOANS);
      expect(core.loans.size).toBe(LOANS);
      expect((await api('vera', 'GET', '/exceptions')).json.items).toEqual([]);

      // The loan's audit: request, approval, execution, with who and why.
      const loanId = (approved.json.loans as string[])[0] as string;
      const audit = await api('vera', 'GET', `/audit?loan=${encodeURIComponent(loanId)}`);
      expect(audit.status).toBe(200);
      expect(audit.json.items.map((e: { kind: string }) => e.kind)).toEqual([
        'execute',
        'approve',
        'request',
      ]);
      expect(audit.json.items[1]).toMatchObject({
        actor: 'ivan',
        requestId: id,
        reason: 'checked the v2 diff\u001b[2J\u0007',
      });
      expect(audit.json.items[2]).toMatchObject({
        actor: 'ana',
        reason: 'payment frequency mapping fixed in v2',
      });
      // The loan's own history names the request and its approver.
      const history = await api('vera', 'GET', `/loans/${encodeURIComponent(loanId)}`);
      const retryEvent = history.json.events.find(
        (e: { kind: string; toState: string | null }) => e.kind === 'ops' && e.toState === 'queued',
      );
      expect(retryEvent).toMatchObject({ actor: 'ana (console, approved by ivan)' });
      expect(retryEvent.detail.request).toMatchObject({ id, approvedBy: 'ivan' });
      expect(history.json.requests.map((r: { id: string }) => r.id)).toEqual([id]);

      const csv = await fetch(`${base}/console/api/audit.csv`, { headers: auth('vera') });
      expect(csv.status).toBe(200);
      expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
      const csvText = await csv.text();
      // Regression: raw ESC/BEL reached the audit CSV (a terminal that cats it runs them).
      // eslint-disable-next-line no-control-regex
      expect(csvText).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/);
      expect(csvText).toContain('checked the v2 diff\u241b[2J\u2407');
      const lines = csvText.trim().split('\r\n');
      expect(lines[0]).toBe('seq,at,actor,kind,action,request_id,loan_id,reason,detail');
      expect(lines.slice(1).map((l) => l.split(',')[3])).toEqual(['request', 'approve', 'execute']);
    });

    it('re-board by ids and strike clear run through the executor once approved', async () => {
      const acked = (await rt.store.loans.list({ state: 'acknowledged' }))[0]?.id as string;
      const writesBefore = core.loans.get(acked)?.writes ?? 0;
      mapper.version = 'v2';
      expect((await api('vera', 'GET', `/loans/${encodeURIComponent(acked)}/reboard-diff`)).status).toBe(403); // a viewer spends no platform reads
      const diff = await api('olga', 'GET', `/loans/${encodeURIComponent(acked)}/reboard-diff`);
      expect(diff.status).toBe(200);
      expect(diff.json).toMatchObject({
        loanId: acked,
        outcome: 'would_rewrite',
        mappingVersion: 'v2',
        previousVersion: 'v1',
      });
      const reboard = await api('olga', 'POST', '/requests', {
        action: 'reboard',
        loans: [acked],
        reason: 'v2 maps the payment frequency',
      });
      expect(reboard.status).toBe(202);
      const done = await api('ivan', 'POST', `/requests/${reboard.json.id as string}/approve`);
      expect(done.json).toMatchObject({
        status: 'executed',
        result: { done: 1, failed: [], detail: 'rewritten 1' },
      });
      expect(core.loans.get(acked)?.writes).toBe(writesBefore + 1);

      const clear = await api('olga', 'POST', '/requests', {
        action: 'strike_clear',
        reason: 'platform confirmed the key is in good standing',
      });
      expect(clear.status).toBe(202);
      const cleared = await api('ivan', 'POST', `/requests/${clear.json.id as string}/approve`);
      expect(cleared.json).toMatchObject({ status: 'executed', result: { detail: 'cleared 0 strike(s)' } });
      // No batches with this core: a seal is refused when asked for, not when approved.
      expect(
        (await api('olga', 'POST', '/requests', { action: 'seal', reason: 'early cut-off' })).status,
      ).toBe(400);
      // A rejected request never runs.
      const skip = await api('olga', 'POST', '/requests', {
        action: 'reboard',
        loans: [acked],
        reason: 'again',
      });
      expect((await api('ivan', 'POST', `/requests/${skip.json.id as string}/reject`, {})).status).toBe(400);
      const rejected = await api('ivan', 'POST', `/requests/${skip.json.id as string}/reject`, {
        note: 'not needed',
      });
      expect(rejected.json).toMatchObject({
        status: 'rejected',
        decidedBy: 'ivan',
        decisionNote: 'not needed',
      });
      expect(core.loans.get(acked)?.writes).toBe(writesBefore + 1);
    });

    it('refuses a request naming a loan the action cannot take, and the audit table is append-only', async () => {
      const acked = (await rt.store.loans.list({ state: 'acknowledged' }))[0]?.id as string;
      const r = await api('olga', 'POST', '/requests', {
        action: 'skip',
        loans: [acked],
        reason: 'no longer wanted',
      });
      expect(r.status).toBe(409);
      expect(r.json.error).toContain(acked);
      await expect(rt.db.run('UPDATE console_audit SET actor = ?', ['mallory'])).rejects.toThrow(
        /append-only/,
      );
      await expect(rt.db.run('DELETE FROM console_audit')).rejects.toThrow(/append-only/);
    });

    it('signs off a reconciliation run: prepared and reviewed by different people, never overwritten', async () => {
      const runDir = join(dir, 'reports', '2026-11-25', 'run-023000');
      mkdirSync(runDir, { recursive: true });
      writeFileSync(
        join(runDir, 'report.json'),
        JSON.stringify({ asOf: '2026-11-25T08:30:00Z', exceptions: [] }),
      );
      const runs = await api('vera', 'GET', '/reports');
      expect(runs.json.runs).toMatchObject([
        {
          day: '2026-11-25',
          run: 'run-023000',
          latestOfDay: true,
          signOff: { preparedBy: null, reviewedBy: null },
        },
      ]);
      const sign = (
        who: keyof typeof PW,
        as: string,
        extra: Record<string, unknown> = { note: `${who} signs` },
      ) => api(who, 'POST', '/reports/2026-11-25/run-023000/signoff', { as, ...extra });
      expect((await sign('vera', 'prepared')).status).toBe(403);
      expect((await sign('olga', 'reviewed')).status).toBe(409);
      expect((await sign('olga', 'prepared', {})).status).toBe(400); // a comment is required
      expect((await sign('olga', 'prepared')).status).toBe(200);
      expect((await sign('ana', 'prepared')).status).toBe(409);
      expect((await sign('olga', 'reviewed')).status).toBe(403);
      const reviewed = await sign('ivan', 'reviewed');
      expect(reviewed.status).toBe(200);
      expect(reviewed.json.signOff).toMatchObject({
        preparedBy: 'olga',
        reviewedBy: 'ivan',
        preparedNote: 'olga signs',
        reviewedNote: 'ivan signs',
      });
      // Beside the run's files: who, when and the comments (this hand-made report.json has no summary to re-render report.html from).
      expect(JSON.parse(readFileSync(join(runDir, 'signoff.json'), 'utf8'))).toMatchObject({
        preparedBy: 'olga',
        preparedComment: 'olga signs',
        reviewedBy: 'ivan',
        reviewedComment: 'ivan signs',
        dispositions: [],
      });

      // A second run the same day is a new folder: the signed one keeps its sign-off.
      const second = join(dir, 'reports', '2026-11-25', 'run-101500');
      mkdirSync(second, { recursive: true });
      writeFileSync(
        join(second, 'report.json'),
        JSON.stringify({ asOf: '2026-11-25T16:15:00Z', exceptions: [] }),
      );
      const after = (await api('vera', 'GET', '/reports')).json.runs;
      expect(after).toMatchObject([
        { run: 'run-101500', latestOfDay: true, signOff: { preparedBy: null } },
        { run: 'run-023000', latestOfDay: false, signOff: { preparedBy: 'olga', reviewedBy: 'ivan' } },
      ]);
      expect((await api('vera', 'GET', '/reports/2026-11-25/run-023000')).json.report).toMatchObject({
        asOf: '2026-11-25T08:30:00Z',
      });
    });

    it('"Run reconciliation now" (issue 42 item 8): an operator runs the reconcile the CLI runs, from the API and the Reconciliation page; audited; a viewer may not', async () => {
      expect((await api('vera', 'POST', '/reports/run')).status).toBe(403);
      const before = (await api('vera', 'GET', '/reports')).json.runs.length as number;
      const ran = await api('olga', 'POST', '/reports/run');
      expect(ran.status).toBe(201);
      const { day, run } = ran.json as { day: string; run: string };
      // The run's files, written as `reconcile` writes them, with this daemon's loans in them.
      const report = JSON.parse(readFileSync(join(dir, 'reports', day, run, 'report.json'), 'utf8'));
      expect(report.totals.released.count).toBe(LOANS);
      expect((await api('vera', 'GET', '/reports')).json.runs.length).toBe(before + 1);
      const audit = await api('vera', 'GET', '/audit?limit=5');
      expect(audit.json.items[0]).toMatchObject({
        actor: 'olga',
        kind: 'reconcile',
        reason: `run now: ${day}/${run}`,
      });

      // The page: an operator sees the button (no shell command), posts it, lands on the new run.
      const login = await fetch(`${base}/console/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
        body: new URLSearchParams({ name: 'olga', password: PW.olga }).toString(),
      });
      const cookie = (
        login.headers.getSetCookie().find((c) => c.startsWith('bc_console_session=')) ?? ''
      ).split(';')[0] as string;
      const page = await (await fetch(`${base}/console/reconciliation`, { headers: { cookie } })).text();
      expect(page).toContain('Run reconciliation now');
      expect(page).not.toContain('boarding-connector reconcile');
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] as string;
      const posted = await fetch(`${base}/console/reconciliation/run`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base, cookie },
        body: new URLSearchParams({ _csrf: csrf }).toString(),
      });
      expect(posted.status).toBe(303);
      const location = posted.headers.get('location') as string;
      expect(location).toMatch(/^\/console\/reconciliation\/\d{4}-\d{2}-\d{2}\/run-/);
      const shown = await (await fetch(`${base}${location}`, { headers: { cookie } })).text();
      expect(shown).toContain('written.');
      expect(shown).toContain('Control totals');
      expect((await api('vera', 'GET', '/reports')).json.runs.length).toBe(before + 2);
      // Another site's form cannot start one.
      const evil = await fetch(`${base}/console/reconciliation/run`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: 'http://evil.example',
          cookie,
        },
        body: new URLSearchParams({ _csrf: csrf }).toString(),
      });
      expect(evil.status).toBe(403);
      expect((await api('vera', 'GET', '/reports')).json.runs.length).toBe(before + 2);
    });

    it('shows status and batches', async () => {
      const status = await api('vera', 'GET', '/status');
      expect(status.status).toBe(200);
      expect(status.json).toMatchObject({
        role: 'leader',
        loansByState: { acknowledged: LOANS },
        pendingRequests: 0,
      });
      expect(status.json.lastCycleAt).toEqual(expect.any(String));
      expect(status.json.platform).toMatchObject({ trafficStopped: false });
      expect(status.json.core).toEqual({ ok: true, detail: null });
      expect((await api('vera', 'GET', '/batches')).json).toEqual({ batches: [] });
    });

    it('ignores the proxy user header from an address not in console.proxy.addresses', async () => {
      const r = await api(null, 'GET', '/exceptions', undefined, { 'x-forwarded-user': 'ivan' });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Basic /);
    });

    it('a browser session: the operator logs in and asks for a strike clear, the approver logs in and approves it (four eyes)', async () => {
      const form = async (path: string, body: Record<string, string>, cookie?: string) =>
        fetch(`${base}/console${path}`, {
          method: 'POST',
          redirect: 'manual',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            origin: base,
            ...(cookie ? { cookie } : {}),
          },
          body: new URLSearchParams(body).toString(),
        });
      const login = async (name: keyof typeof PW): Promise<{ cookie: string; csrf: string }> => {
        const res = await form('/login', { name, password: PW[name] });
        expect(res.status).toBe(303);
        const cookie = (
          res.headers.getSetCookie().find((c) => c.startsWith('bc_console_session=')) ?? ''
        ).split(';')[0] as string;
        const page = await (await fetch(`${base}/console/queue`, { headers: { cookie } })).text();
        return { cookie, csrf: /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? '' };
      };
      const olga = await login('olga');
      const made = await form(
        '/requests',
        {
          _csrf: olga.csrf,
          action: 'strike_clear',
          reason: 'platform support ticket 4711: key in good standing',
        },
        olga.cookie,
      );
      expect(made.status).toBe(303);
      const id = decodeURIComponent((made.headers.get('location') ?? '').split('/').pop() ?? '');
      expect((await api('vera', 'GET', `/requests/${encodeURIComponent(id)}`)).json).toMatchObject({
        status: 'pending',
        maker: 'olga',
        action: 'strike_clear',
      });
      // The maker cannot approve her own request, in a browser either.
      expect(
        (await form(`/requests/${encodeURIComponent(id)}/approve`, { _csrf: olga.csrf }, olga.cookie)).status,
      ).toBe(403);
      const ivan = await login('ivan');
      const approved = await form(
        `/requests/${encodeURIComponent(id)}/approve`,
        { _csrf: ivan.csrf, note: 'ticket checked' },
        ivan.cookie,
      );
      expect(approved.status).toBe(303);
      expect((await api('vera', 'GET', `/requests/${encodeURIComponent(id)}`)).json).toMatchObject({
        status: 'executed',
        decidedBy: 'ivan',
        decisionNote: 'ticket checked',
      });
      const audit = await rt.db.all<{ kind: string; actor: string }>(
        'SELECT kind, actor FROM console_audit WHERE request_id = ? ORDER BY seq',
        [id],
      );
      expect(audit.map((a) => [a.kind, a.actor])).toEqual([
        ['request', 'olga'],
        ['approve', 'ivan'],
        ['execute', 'connector'],
      ]);
    });

    // Last: the throttle holds this client address for the rest of the window.
    it('Basic auth: a wrong password gets 401, and after console.loginThrottle.maxFailures attempts 429', async () => {
      for (let i = 0; i < 3; i++)
        expect((await api(null, 'GET', '/status', undefined, auth('olga', 'wrong'))).status).toBe(401);
      const throttled = await api(null, 'GET', '/status', undefined, auth('olga', 'wrong'));
      expect(throttled.status).toBe(429);
      expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0);
      // Throttled means the password is not even checked: the right one waits too.
      expect((await api('olga', 'GET', '/status')).status).toBe(429);
      // The audit lines are written beside the answer (not awaited by it): wait for them.
      const loginLines = () =>
        rt.db.all<{ kind: string; actor: string }>(
          "SELECT kind, actor FROM console_audit WHERE kind LIKE 'login%' ORDER BY seq",
        );
      await expect.poll(async () => (await loginLines()).length, { timeout: 5_000 }).toBe(4);
      const audit = await loginLines();
      expect(audit.filter((a) => a.kind === 'login_failed')).toHaveLength(3);
      // Throttled attempts are audited once per client and user in the window, not once each.
      expect(audit.filter((a) => a.kind === 'login_throttled').map((a) => a.actor)).toEqual(['olga']);
      // Another user from the same address is not locked out by olga's typos.
      expect((await api('vera', 'GET', '/status')).status).toBe(200);
      // An approver sees the lock and lifts it (audited); olga gets in again.
      expect((await api('ivan', 'GET', '/logins/locks')).json.locks).toEqual([
        expect.objectContaining({ user: 'olga', client: expect.any(String) }),
      ]);
      expect(
        (await api('olga', 'POST', '/logins/unlock', { name: 'olga' }, auth('vera', PW.vera))).status,
      ).toBe(403); // a viewer cannot
      const lifted = await api('ivan', 'POST', '/logins/unlock', { name: 'olga' });
      expect(lifted.json).toMatchObject({ locksLifted: 1 });
      expect((await api('olga', 'GET', '/status')).status).toBe(200);
      const unlockLines = await rt.db.all<{ actor: string; reason: string }>(
        "SELECT actor, reason FROM console_audit WHERE kind = 'unlock'",
      );
      expect(unlockLines).toEqual([{ actor: 'ivan', reason: 'olga' }]);
    });

    it('`console unlock NAME` writes an audit line the daemon lifts the lock by; an unknown name is refused', async () => {
      // As ops run it beside the daemon: on PostgreSQL the store's password from the environment.
      const cliEnv = engine === 'postgres' ? pgEnv() : {};
      const r = await runCli(['--config', join(dir, 'config.yaml'), 'console', 'unlock', 'Vera'], cliEnv);
      expect(r.code, r.error ?? '').toBe(0);
      expect(r.stdout).toContain('vera');
      expect(
        await rt.db.all<{ reason: string }>(
          "SELECT reason FROM console_audit WHERE kind = 'unlock' AND actor LIKE 'cli%'",
        ),
      ).toEqual([{ reason: 'vera' }]);
      expect(
        (await runCli(['--config', join(dir, 'config.yaml'), 'console', 'unlock', 'mallory'], cliEnv)).code,
      ).toBe(2);
    });
  });
});
