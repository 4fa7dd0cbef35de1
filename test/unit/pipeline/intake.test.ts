import { describe, expect, it } from 'vitest';
import { recordInvalidItem, recordQueueItem } from '../../../src/pipeline/intake.js';
import { ackKey, releaseMarker, storableQueueItem } from '../../../src/pipeline/release.js';
import { retryDelayMs } from '../../../src/pipeline/backoff.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { fakeLoan } from '../../support/fake-platform.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;
const log = silentLogger();
const none = new Set<string>();

describe.each(STORE_ENGINES)('queue intake on %s', (engine) => {
  const open = testStores(engine);
  const setup = async () => createBoardingStore((await open()).db).loans;

  it.skipIf(engineSkipped(engine))(
    'queues a new loan, refreshes a known one, ignores an acknowledged one still listed',
    async () => {
      const loans = await setup();
      const item = fakeLoan('L1').item;
      expect(await recordQueueItem(loans, item, T0, log, none)).toBe('new');
      expect(await loans.require('L1')).toMatchObject({
        state: 'queued',
        releaseMarker: 'b-L1',
        loanNumber: 'LN-L1',
        centsAmount: 1_000_000,
        productId: 'p1',
      });
      expect(await recordQueueItem(loans, { ...item, loanNumber: 'LN-new' }, T0 + 1, log, none)).toBe('seen');
      expect((await loans.require('L1')).loanNumber).toBe('LN-new');
      await loans.transition('L1', { to: 'acknowledged' }, T0 + 2);
      expect(await recordQueueItem(loans, item, T0 + 3, log, none)).toBe('ignored');
      expect((await loans.require('L1')).state).toBe('acknowledged');
    },
  );

  it.skipIf(engineSkipped(engine))(
    'boards a new release again: acknowledged or quarantined → queued with a fresh attempt budget; skipped stays skipped',
    async () => {
      const loans = await setup();
      const item = fakeLoan('L1').item;
      await recordQueueItem(loans, item, T0, log, none);
      await loans.transition(
        'L1',
        { to: 'quarantined', patch: { quarantineReason: 'mapping', attempts: 3, writtenAt: null } },
        T0,
      );
      const again = { ...item, boarding: { id: 'b2', releasedAt: '2026-02-01T00:00:00Z' } };
      expect(await recordQueueItem(loans, again, T0 + 1, log, none)).toBe('re-released');
      expect(await loans.require('L1')).toMatchObject({
        state: 'queued',
        releaseMarker: 'b2',
        attempts: 0,
        quarantineReason: null,
      });
      await loans.transition('L1', { to: 'skipped', kind: 'ops', actor: 'x' }, T0 + 2);
      expect(await recordQueueItem(loans, { ...item, boarding: { id: 'b3' } }, T0 + 3, log, none)).toBe(
        'seen',
      );
      expect(await loans.require('L1')).toMatchObject({ state: 'skipped', releaseMarker: 'b3' });
    },
  );

  it.skipIf(engineSkipped(engine))(
    'quarantines a malformed item by id; one without an id is only logged',
    async () => {
      const loans = await setup();
      expect(
        await recordInvalidItem(
          loans,
          { id: 'B1', index: 0, problems: ['centsAmount: expected number'], raw: {} },
          T0,
          log,
        ),
      ).toBe('quarantined-invalid');
      expect(await loans.require('B1')).toMatchObject({
        state: 'quarantined',
        quarantineReason: 'validation',
      });
      expect(
        await recordInvalidItem(loans, { id: null, index: 1, problems: ['id: required'], raw: {} }, T0, log),
      ).toBe('ignored');
    },
  );
});

describe('release markers, keys, stored items, backoff', () => {
  it('derives the marker from the boarding id, else the release time, else a constant', () => {
    expect(releaseMarker({ boarding: { id: 'brd_1', releasedAt: 'x' } })).toBe('brd_1');
    expect(releaseMarker({ boarding: { releasedAt: '2026-01-01T00:00:00Z' } })).toBe('2026-01-01T00:00:00Z');
    expect(releaseMarker({ boarding: null })).toBe('release');
    expect(ackKey('L1', 'brd_1')).toBe('ack:L1:brd_1');
    const long = ackKey('L'.repeat(300), 'm');
    expect(long).toMatch(/^ack:[0-9a-f]{64}$/);
    expect(ackKey('L'.repeat(300), 'm')).toBe(long);
  });

  it('an ack key of a loan id with non-ASCII letters is still a legal header value (regression: the ack never left, retried as a network error)', () => {
    expect(ackKey('loan/2026 Q1 a%b?c#d', 'brd_1')).toBe('ack:loan/2026 Q1 a%b?c#d:brd_1');
    for (const id of ['loan/Zürich 7', 'ln 東京 😀', 'tab\there']) {
      const key = ackKey(id, 'brd_1');
      expect(key, id).toMatch(/^ack:[0-9a-f]{64}$/);
      expect(ackKey(id, 'brd_1')).toBe(key);
      expect(() => new Headers({ 'idempotency-key': key })).not.toThrow();
    }
    expect(ackKey('loan/Zürich 7', 'brd_1')).not.toBe(ackKey('loan/Zürich 7', 'brd_2'));
  });

  it('never stores a tax id that shows up on a loan', () => {
    const stored = storableQueueItem({
      ...fakeLoan('L1').item,
      ein: '12-3456789',
      extra: { ssn: '123-45-6789', keep: 1 },
    });
    expect(stored).not.toContain('3456789');
    expect(stored).not.toContain('45-6789');
    expect(JSON.parse(stored).extra).toEqual({ keep: 1 });
  });

  it('backs off exponentially, capped, with at most 20 % jitter', () => {
    const s = { retryBaseMs: 1000, retryMaxMs: 10_000 };
    expect([1, 2, 3, 4, 5, 9].map((a) => retryDelayMs(a, s, () => 0))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
    expect(retryDelayMs(1, s, () => 0.999)).toBeGreaterThanOrEqual(800);
  });
});
