/**
 * Every page escapes what it shows: names, reasons, error messages, ids, report rows and event
 * details are any text (the platform allows it), so each is rendered here with markup in it and
 * the output must carry it as text only.
 */
import { describe, expect, it } from 'vitest';
import type {
  ActionRequest,
  AuditEntry,
  BatchView,
  LoanHistory,
  ReportView,
  StatusView,
} from '../../../src/console/contract.js';
import { layout } from '../../../src/console/pages/layout.js';
import { displayZone, errorSentence, shortId } from '../../../src/console/pages/format.js';
import { loanPage } from '../../../src/console/pages/loan.js';
import { batchesPage, loginPage, reportPage, statusPage } from '../../../src/console/pages/other.js';
import { requestPage, requestsPage } from '../../../src/console/pages/requests.js';
import type { BrowserSession } from '../../../src/console/pages/sessions.js';

const X = `<img src=x onerror=alert(1)>"'&`;
const ESC = '&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;';
const session: BrowserSession = {
  user: X,
  roles: ['operator', 'approver'],
  csrfToken: 'tok',
  createdAt: 0,
  lastSeenAt: 0,
  search: X,
  flash: { kind: 'error', text: X },
};
const user = { name: 'peter', roles: ['approver', 'operator'] as const };

function assertSafe(out: string): void {
  expect(out).not.toContain('<img');
  // The raw value nowhere (its quote would end an attribute, its tag start an element).
  expect(out).not.toContain(X);
  expect(out).toContain(ESC);
}

const request: ActionRequest = {
  id: X,
  action: 'retry',
  loans: [X, 'b'],
  filter: { q: X, product: X },
  batch: X,
  previewCount: 2,
  reason: X,
  maker: X,
  createdAt: '2026-11-25T10:00:00Z',
  status: 'pending',
  decidedBy: null,
  decidedAt: null,
  decisionNote: null,
  executedAt: null,
  result: { done: 1, failed: [{ loanId: X, message: X }], detail: X },
};
const audit: AuditEntry = {
  seq: 1,
  at: '2026-11-25T10:00:00Z',
  actor: X,
  kind: 'request',
  action: 'retry',
  requestId: X,
  loanId: X,
  reason: X,
  detail: { note: X },
};

describe('console pages escape every value', () => {
  it('layout, flash and user name', () => {
    assertSafe(layout({ title: X, session, nav: 'queue', body: 'x', flash: session.flash }).toString());
    assertSafe(loginPage({ error: X, name: X }).toString());
  });

  it('loan page: row, identity, review items, records, history with mapping issues, requests, audit', () => {
    const history: LoanHistory = {
      loan: {
        id: X,
        loanNumber: X,
        state: 'quarantined',
        quarantineReason: X,
        lastErrorCode: X,
        lastErrorMessage: X,
        releaseMarker: X,
        productId: X,
      },
      identity: {
        accountNumber: X,
        accountNumberSource: 'pool',
        customers: [{ entityId: X, cif: X, matchedBy: X, existing: false, nameAgrees: false }],
      },
      daemon: { pid: 1, host: X, mappingVersion: X, reloadError: X },
      events: [
        {
          seq: 1,
          at: '2026-11-25T10:00:00Z',
          kind: X,
          fromState: X,
          toState: X,
          actor: X,
          reason: X,
          detail: {
            issues: [{ code: X, file: X, line: 1, column: 2, target: X, field: X, message: X }],
            note: X,
          },
        },
      ],
      reviewItems: [{ code: X, field: X, message: X, at: X }],
      records: [{ fields: { name: X } }],
      idempotencyKeys: [
        { key: X, operation: X, createdAt: '2026-11-25T10:00:00Z', completedAt: null, status: 200 },
      ],
      batches: [{ batchId: X, status: X, kind: X }],
      requests: [request],
    };
    const out = loanPage({
      session,
      history,
      diff: {
        loanId: X,
        outcome: 'would_rewrite',
        mappingVersion: X,
        previousVersion: X,
        changes: [X],
        message: X,
      },
      audit: [audit],
      canAct: true,
    }).toString();
    assertSafe(out);
    // Links built from ids are encoded path segments inside /console/.
    expect(out).toContain(`href="/console/loans/${encodeURIComponent(X).replaceAll("'", '&#39;')}`);
  });

  it("loan page: the last board's trace id (OpenTelemetry) from the newest event that carries one", () => {
    const ev = (seq: number, detail: unknown) => ({
      seq,
      at: '2026-11-25T10:00:00Z',
      kind: 'transition',
      fromState: 'mapped',
      toState: 'written',
      actor: 'connector',
      reason: null,
      detail,
    });
    const old = '0af7651916cd43dd8448eb211c80319c';
    const last = '4bf92f3577b34da6a3ce929d0e0e4736';
    const history = {
      loan: { id: 'ln_1', state: 'acknowledged' },
      identity: { accountNumber: null, accountNumberSource: null, customers: [] },
      daemon: null,
      events: [
        ev(1, { traceId: old }),
        ev(3, { traceId: last }),
        ev(2, { traceId: old }),
        ev(4, { note: 'x' }),
      ],
      reviewItems: [],
      records: null,
      idempotencyKeys: [],
      batches: [],
      requests: [],
    } as unknown as LoanHistory;
    const page = (h: LoanHistory) =>
      loanPage({ session, history: h, diff: null, audit: [], canAct: false }).toString();
    expect(page(history)).toContain(
      `<dt>Last trace</dt><dd><span class="mono" data-testid="trace-id">${last}</span>`,
    );
    // No trace (traces off, or a board before they were on): no row at all.
    expect(page({ ...history, events: [ev(1, { traceId: X })] })).not.toContain('Last trace');
  });

  it('requests, one request, reconciliation run, batches, status', () => {
    assertSafe(
      requestsPage({
        session,
        user,
        status: undefined,
        page: { items: [request], next: X },
        cursor: X,
      }).toString(),
    );
    assertSafe(requestPage({ session, user, request }).toString());
    const view: ReportView = {
      day: X,
      run: X,
      generatedAt: null,
      latestOfDay: true,
      signOff: { preparedBy: X, preparedAt: null, reviewedBy: null, reviewedAt: null },
      report: {
        header: { connectorVersion: X },
        totals: { [X]: { count: 1, cents: 1 } },
        tieOut: [{ title: X, equation: X, differenceCount: X }],
        exceptions: [
          {
            reason: X,
            loanId: X,
            loanNumber: X,
            connectorState: X,
            centsAmount: 1,
            ageBusinessDays: 1,
            ageBucket: X,
            detail: X,
          },
        ],
      },
    };
    assertSafe(reportPage({ session, user, view }).toString());
    const batch: BatchView = {
      id: X,
      status: 'open',
      openedAt: '2026-11-25T10:00:00Z',
      cutoffAt: '2026-11-25T18:00:00Z',
      sealedAt: null,
      sealReason: X,
      sealedBy: X,
      loanCount: 1,
      recordCount: 1,
      principalCents: '100',
      files: [{ name: X, bytes: 1 }],
    };
    assertSafe(batchesPage({ session, batches: [batch], canAct: true }).toString());
    const status: StatusView = {
      role: 'leader',
      daemon: { pid: 1, host: X, startedAt: '2026-11-25T10:00:00Z', mappingVersion: X, reloadError: X },
      lastCycleAt: null,
      platform: {
        lastSuccessAt: null,
        lastFailure: { at: 0, code: X, detail: X },
        strikes24h: 1,
        trafficStopped: false,
        budgets: [],
      },
      core: { ok: false, detail: X },
      loansByState: { [X]: 1 },
      pendingRequests: 0,
      readiness: { ready: false, checks: { [X]: { ok: false, detail: X } } },
    };
    assertSafe(
      statusPage({
        session,
        status,
        canAct: true,
        locks: [{ user: X, client: X, since: 0, until: 1 }],
        canUnlock: true,
      }).toString(),
    );
  });
});

describe('console pages show times in the bank zone', () => {
  it('a batch cut-off configured as 18:00 America/Chicago shows as 18:00 CST, not 00:00 UTC the next day; the page names its zone', () => {
    const batch: BatchView = {
      id: 'b1',
      status: 'open',
      openedAt: '2026-11-27T14:00:00Z',
      cutoffAt: '2026-11-28T00:00:00Z',
      sealedAt: null,
      sealReason: null,
      sealedBy: null,
      loanCount: 1,
      recordCount: 1,
      principalCents: '100',
      files: [],
    };
    const page = displayZone.run('America/Chicago', () =>
      layout({
        title: 't',
        session,
        nav: 'batches',
        body: batchesPage({ session, batches: [batch], canAct: false }),
      }).toString(),
    );
    expect(page).toContain('2026-11-27 18:00:00 CST');
    expect(page).not.toContain('UTC');
    expect(page).toContain('Times in America/Chicago (CST)');
  });
});

describe('the queue reads like a work list', () => {
  it('a long id is shortened around an ellipsis; an error becomes its sentence (the column showed the start of an encoded URL)', () => {
    expect(shortId('ln_2f9c1e7a-55aa-4c4e-9d0f-7b1d2c3e4f5a')).toBe('ln_2f9c1e…2c3e4f5a');
    expect(shortId('L-1')).toBe('L-1');
    expect(
      errorSentence(
        'document.download',
        'GET https://blobs.example.com/loans/ln%2F1%3Fx/doc.pdf?X-Amz-Signature=abc failed: 403 Forbidden. Retried 3 times; giving up',
      ),
    ).toBe('GET blobs.example.com/… failed: 403 Forbidden.');
    expect(
      errorSentence(
        'mapping.mapping',
        'loan.yaml:12:3 loan.maturityDate: expected a date after the first payment date; 2 more issues',
      ),
    ).toBe('maturityDate: expected a date after the first payment date (loan.yaml:12)');
  });
});
