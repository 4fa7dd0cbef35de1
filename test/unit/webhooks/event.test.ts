import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { extractFundedAt, parseTime } from '../../../src/contract/webhook-payload.js';
import { InvalidPayloadError, toWebhookEvent } from '../../../src/webhooks/event.js';

const ctx = {
  webhookIdHeader: 'msg_1',
  signedTimestampMs: 1_700_000_000_000,
  receivedAt: 1_800_000_000_000,
  rawBody: Buffer.from('{}'),
};

describe('toWebhookEvent (tolerant envelope)', () => {
  it('reads the sandbox-like shape', () => {
    const e = toWebhookEvent(
      { id: 'evt_1', type: 'loan.funded', createdAt: '2026-11-21T10:00:00Z', data: { loanId: 'L1' } },
      ctx,
    );
    expect(e).toMatchObject({
      webhookId: 'msg_1',
      type: 'loan.funded',
      known: true,
      loanId: 'L1',
      occurredAt: Date.parse('2026-11-21T10:00:00Z'),
    });
  });

  it.each([
    [{ event: 'loan.funded', data: { loan: { id: 'L2' } } }, 'L2'],
    [{ type: 'loan.funded', data: { id: 'L3' } }, 'L3'],
    [{ type: 'loan.status_changed', data: { loan_id: 77 } }, '77'],
    [{ eventType: 'loan.created', loanId: 'L4' }, 'L4'],
    [{ type: 'document.uploaded', data: { id: 'D1', loanId: 'L5' } }, 'L5'],
    [{ type: 'document.signed', data: { id: 'D1' } }, null],
    [{ type: 'loan.funded', data: 'weird' }, null],
  ])('finds the loan id in %j', (payload, loanId) => {
    expect(toWebhookEvent(payload, ctx).loanId).toBe(loanId);
  });

  it('keeps unknown types and fields, marking them unknown', () => {
    const e = toWebhookEvent({ type: 'loan.teleported', extra: { a: 1 } }, ctx);
    expect(e).toMatchObject({ type: 'loan.teleported', known: false, payload: { extra: { a: 1 } } });
    expect(toWebhookEvent({ hello: 'world' }, ctx).type).toBe('unknown');
  });

  it('falls back to the payload id, then a body hash, for the dedupe key', () => {
    expect(toWebhookEvent({ id: 'evt_9', type: 'x' }, { ...ctx, webhookIdHeader: null }).webhookId).toBe(
      'evt:evt_9',
    );
    expect(toWebhookEvent({ type: 'x' }, { ...ctx, webhookIdHeader: null }).webhookId).toMatch(
      /^sha256:[0-9a-f]{64}$/,
    );
  });

  it('takes the event time from the payload, else the signed timestamp, else receipt', () => {
    expect(toWebhookEvent({ type: 'x', timestamp: 1_750_000_000 }, ctx).occurredAt).toBe(1_750_000_000_000);
    expect(toWebhookEvent({ type: 'x', createdAt: 'not a date' }, ctx).occurredAt).toBe(
      ctx.signedTimestampMs,
    );
    expect(toWebhookEvent({ type: 'x' }, { ...ctx, signedTimestampMs: null }).occurredAt).toBe(
      ctx.receivedAt,
    );
  });

  it('refuses JSON that is not an object', () => {
    for (const v of [[], 3, 'x', null, true])
      expect(() => toWebhookEvent(v, ctx)).toThrow(InvalidPayloadError);
  });

  it('never reads a bare date as a time (it would be UTC midnight)', () => {
    expect(parseTime('2026-11-21')).toBeNull();
    // Outside years 1970–9999 is not a time (epoch ns read as ms cannot even be formatted).
    expect(parseTime(1_762_000_000_000_000_000)).toBeNull();
    expect(parseTime('1762000000000000000')).toBeNull();
    expect(parseTime('1969-12-31T23:59:59Z')).toBeNull();
    expect(parseTime(253_402_300_799_999)).toBe(253_402_300_799_999);
    expect(parseTime('2026-11-21T00:00:00-06:00')).toBe(Date.parse('2026-11-21T06:00:00Z'));
  });

  it('uses data.fundedAt for the funded time when given', () => {
    expect(extractFundedAt({ payload: { data: { fundedAt: '2026-01-02T03:04:05Z' } }, occurredAt: 5 })).toBe(
      Date.parse('2026-01-02T03:04:05Z'),
    );
    expect(extractFundedAt({ payload: { data: {} }, occurredAt: 5 })).toBe(5);
  });
});

describe('toWebhookEvent on arbitrary JSON', () => {
  const field = fc.oneof(
    fc.constant(undefined),
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double(),
    fc.constantFrom(
      '',
      ' ',
      'loan.funded',
      'document.uploaded',
      '2026-11-21T10:00:00Z',
      '1700000000',
      'x',
      '12.5',
    ),
    fc.string(),
    fc.constant(Number.MAX_SAFE_INTEGER + 2),
    fc.array(fc.integer(), { maxLength: 2 }),
    fc.dictionary(fc.constantFrom('loanId', 'id', 'loan_id'), fc.oneof(fc.string(), fc.integer()), {
      maxKeys: 2,
    }),
  );
  const keys = [
    'id',
    'type',
    'event',
    'eventType',
    'event_type',
    'createdAt',
    'created_at',
    'occurredAt',
    'timestamp',
    'created',
    'loanId',
    'data',
    'other',
  ];
  const envelope = fc.oneof(fc.dictionary(fc.constantFrom(...keys), field, { maxKeys: 8 }), field);

  it('refuses exactly the non-objects; every object gives a storable event with a time that formats', () => {
    fc.assert(
      fc.property(envelope, fc.option(fc.constant('msg_h')), (json, header) => {
        const c = { ...ctx, webhookIdHeader: header };
        const isObject = json !== null && typeof json === 'object' && !Array.isArray(json);
        if (!isObject) {
          expect(() => toWebhookEvent(json, c)).toThrow(InvalidPayloadError);
          return;
        }
        const e = toWebhookEvent(json, c);
        expect(typeof e.type).toBe('string');
        expect(e.webhookId.length).toBeGreaterThan(0);
        if (header !== null) expect(e.webhookId).toBe(header);
        expect(() => new Date(e.occurredAt).toISOString()).not.toThrow();
        expect(e.payload).toBe(json);
      }),
      { numRuns: 2000 },
    );
  });
});
