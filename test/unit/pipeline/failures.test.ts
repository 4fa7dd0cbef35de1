import { describe, expect, it } from 'vitest';
import { classifyFailure, dispositionOf, type FailureDisposition } from '../../../src/pipeline/failures.js';
import {
  createCustomerResolver,
  CustomerAmbiguousError,
  CustomerWaitError,
} from '../../../src/identity/customer-match.js';
import { CustomerKeys } from '../../../src/lib/customer-keys.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { fakePipeline } from '../../support/fake-pipeline.js';
import { fakeLoan } from '../../support/fake-platform.js';
import {
  classifyCoreFailure,
  CoreRejectedError,
  CoreUnavailableError,
  CustomerSourceUnavailableError,
} from '../../../src/core/port.js';
import { FatalError } from '../../../src/lib/errors.js';
import {
  CLIENT_CODES,
  DOCUMENTED_CODES,
  PlatformError,
  type PlatformErrorCode,
} from '../../../src/platform/errors.js';
import { IllegalTransitionError, type QuarantineReason } from '../../../src/store/loan-states.js';
import { StaleStateError } from '../../../src/store/loans.js';
import { PoolExhaustedError } from '../../../src/store/identity/numbers.js';
import { FencedOut } from '../../../src/store/index.js';

const platform = (code: PlatformErrorCode, status: number | null = null): PlatformError =>
  new PlatformError({ code, message: `${code} happened`, status });

interface Row {
  name: string;
  err: unknown;
  phase?: 'core' | 'ack';
  disposition: FailureDisposition;
  code: string;
  reason?: QuarantineReason;
  exhaustedReason?: QuarantineReason;
}

const fence = { name: 'boarding', holder: 'a', epoch: 1 };

const TABLE: Row[] = [
  // store and fence
  {
    name: 'FencedOut',
    err: new FencedOut(fence, null),
    disposition: 'stepped-down',
    code: 'store.fenced_out',
  },
  {
    name: 'FencedOut refused by leadership before the database (not leading)',
    err: new FencedOut(null, null, { reason: 'not_leader' }),
    disposition: 'stepped-down',
    code: 'store.fenced_out',
  },
  {
    name: 'IllegalTransitionError',
    err: new IllegalTransitionError('L1', 'queued', 'acknowledged'),
    disposition: 'stepped-down',
    code: 'store.illegal_transition',
  },
  {
    name: 'StaleStateError',
    err: new StaleStateError('L1', 'skipped', ['fetched']),
    disposition: 'stale',
    code: 'store.stale_state',
  },
  // customer match
  {
    name: 'CustomerAmbiguousError',
    err: new CustomerAmbiguousError('two customers', { entityId: 'e1', cifs: ['1', '2'] }),
    disposition: 'quarantine',
    code: 'customer.ambiguous',
    reason: 'customer_match_ambiguous',
  },
  {
    name: 'CustomerWaitError',
    err: new CustomerWaitError('customers.pending_create', 'another loan creates it'),
    disposition: 'retry-later',
    code: 'customers.pending_create',
    exhaustedReason: 'retries_exhausted',
  },
  {
    name: 'CustomerSourceUnavailableError (extract missing)',
    err: new CustomerSourceUnavailableError('customers.extract_missing', 'no extract'),
    disposition: 'retry-later',
    code: 'customers.extract_missing',
  },
  {
    name: 'CustomerSourceUnavailableError (core search failed: the core does not answer)',
    err: new CustomerSourceUnavailableError('customers.search_failed', 'search failed'),
    disposition: 'core-unavailable',
    code: 'customers.search_failed',
  },
  // number pool (a FatalError too, but our own limit)
  {
    name: 'PoolExhaustedError',
    err: new PoolExhaustedError('account', 10),
    disposition: 'fatal',
    code: 'identity.pool_exhausted',
  },
  // core
  {
    name: 'CoreRejectedError',
    err: new CoreRejectedError('bad product', 400),
    disposition: 'quarantine',
    code: 'core.rejected',
    reason: 'core_rejected',
  },
  {
    name: 'CoreUnavailableError (nothing written)',
    err: new CoreUnavailableError('refused', false),
    disposition: 'core-unavailable',
    code: 'core.unavailable',
    exhaustedReason: 'retries_exhausted',
  },
  {
    name: 'CoreUnavailableError (ambiguous)',
    err: new CoreUnavailableError('timeout', true),
    disposition: 'core-ambiguous',
    code: 'core.ambiguous',
    exhaustedReason: 'ambiguous',
  },
  {
    name: 'FatalError (core refused us)',
    err: new FatalError('401'),
    disposition: 'fatal',
    code: 'core.fatal',
  },
  // platform
  {
    name: 'PlatformError auth',
    err: platform('auth.invalid_key', 401),
    disposition: 'fatal',
    code: 'auth.invalid_key',
  },
  {
    name: 'PlatformError traffic stopped',
    err: platform('rate_limit.traffic_stopped'),
    disposition: 'stop-cycle',
    code: 'platform.rate_limit.traffic_stopped',
  },
  {
    name: 'PlatformError server (retry-call)',
    err: platform('server', 503),
    disposition: 'retry-later',
    code: 'platform.server',
  },
  {
    name: 'PlatformError download expired (retry-later)',
    err: platform('download.expired', 403),
    disposition: 'retry-later',
    code: 'platform.download.expired',
  },
  {
    name: 'PlatformError validation on the core phase',
    err: platform('validation', 422),
    disposition: 'quarantine',
    code: 'platform.validation',
    reason: 'validation',
  },
  {
    name: 'PlatformError refused document host',
    err: platform('download.refused'),
    disposition: 'quarantine',
    code: 'platform.download.refused',
    reason: 'download_refused',
  },
  {
    name: 'PlatformError on the ack',
    err: platform('conflict', 409),
    phase: 'ack',
    disposition: 'quarantine',
    code: 'platform.conflict',
    reason: 'ack_rejected',
  },
  // anything else
  { name: 'a plain Error', err: new Error('bug'), disposition: 'retry-later', code: 'internal' },
  { name: 'a thrown string', err: 'oops', disposition: 'retry-later', code: 'internal' },
];

describe('the failure taxonomy (src/pipeline/failures.ts)', () => {
  it('one vocabulary (issue 44): dispositionOf(err) is the word each layer chose for its own errors', () => {
    // The platform client's retry-call is its own business: once it gives up, the attempt is lost.
    for (const code of [...DOCUMENTED_CODES, ...CLIENT_CODES]) {
      const e = platform(code);
      expect(dispositionOf(e), code).toBe(e.disposition === 'retry-call' ? 'retry-later' : e.disposition);
    }
    const coreErrors = [
      new CoreRejectedError('refused', 400, null),
      new CoreUnavailableError('down', false),
      new CoreUnavailableError('timed out after the write went out', true),
      new FatalError('bad credentials'),
    ];
    for (const e of coreErrors) expect(dispositionOf(e), e.message).toBe(classifyCoreFailure(e)?.disposition);
    expect(TABLE.map((r) => dispositionOf(r.err, r.phase ?? 'core'))).toEqual(
      TABLE.map((r) => r.disposition),
    );
  });

  it.each(TABLE)('$name → $disposition / $code', (row) => {
    const f = classifyFailure(row.err, row.phase ?? 'core');
    expect({ disposition: f.disposition, code: f.code }).toEqual({
      disposition: row.disposition,
      code: row.code,
    });
    if (row.reason !== undefined) expect(f.reason).toBe(row.reason);
    if (row.exhaustedReason !== undefined) expect(f.exhaustedReason).toBe(row.exhaustedReason);
  });

  it('records an event for every failure that stops the cycle (the loan history says why)', () => {
    for (const row of TABLE) {
      const f = classifyFailure(row.err, row.phase ?? 'core');
      if (f.disposition === 'fatal' || f.disposition === 'stop-cycle')
        expect(f.event, row.name).not.toBeNull();
    }
  });

  it('only a core refusal is recorded as an answer when shutdown aborted the attempt', () => {
    const answered = TABLE.filter((r) => classifyFailure(r.err, r.phase ?? 'core').answerDespiteAbort);
    expect(answered.map((r) => r.name)).toEqual(['CoreRejectedError']);
  });
});

describe('the cycle acts on the disposition', () => {
  /** A pipeline whose core's customer search fails with `code` for every loan. */
  async function cycleWithCustomerSource(code: string) {
    const p = fakePipeline({
      maxAttempts: 1000,
      customers: (store, clock) =>
        createCustomerResolver({
          store,
          directory: {
            findByTin: () => Promise.reject(new CustomerSourceUnavailableError(code, `${code} happened`)),
            status: () => ({ ok: false, detail: code }),
          },
          keys: new CustomerKeys('failures-test-key-0123456789'),
          newCif: () => Promise.resolve(null),
          onAmbiguous: 'quarantine',
          allowLast4Tin: false,
          clock,
          logger: silentLogger(),
        }),
    });
    for (let i = 1; i <= 6; i++) {
      const loan = fakeLoan(`L${i}`);
      loan.entities.businesses = [
        { id: `biz-L${i}`, name: 'Acme', ein: `12-34567${10 + i}`, role: 'borrower' },
      ];
      p.platform.add(loan);
    }
    return p.runner.run({ reason: 'test' });
  }

  it('a failed customer search of the core (core-unavailable) counts towards the core-outage stop', async () => {
    const s = await cycleWithCustomerSource('customers.search_failed');
    expect(s.coreOutage).toMatchObject({ failures: 3 });
    // The pass stopped: loans already in flight finish, the rest are not tried this cycle.
    expect(s.attempted).toBeLessThan(6);
  });

  it('a missing customer extract (retry-later) does not: every loan waits and the pass goes on', async () => {
    const s = await cycleWithCustomerSource('customers.extract_missing');
    expect(s.coreOutage).toBeNull();
    expect(s.retryWait).toBe(6);
    expect(s.problems.every((q) => q.code === 'customers.extract_missing')).toBe(true);
  });
});
