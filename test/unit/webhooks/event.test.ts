import { describe, expect, it } from 'vitest';
import { InvalidPayloadError, extractFundedAt, parseTime, toWebhookEvent } from '../../../src/webhooks/event.js';

const ctx = { webhookIdHeader: 'msg_1', signedTimestampMs: 1_700_000_000_000, receivedAt: 1_800_000_000_000, rawBody: Buffer.from('{}') };

describe('toWebhookEvent (tolerant envelope)', () => {
  it('reads the sandbox-like shape', () => {
    const e = toWebhookEvent({ id: 'evt_1', type: 'loan.funded', createdAt: '2026-11-21T10:00:00Z', data: { loanId: 'L1' } }, ctx);
    expect(e).toMatchObject({ webhookId: 'msg_1', type: 'loan.funded', known: true, loanId: 'L1', occurredAt: Date.parse('2026-11-21T10:00:00Z') });
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
    expect(toWebhookEvent({ id: 'evt_9', type: 'x' }, { ...ctx, webhookIdHeader: null }).webhookId).toBe('evt:evt_9');
    expect(toWebhookEvent({ type: 'x' }, { ...ctx, webhookIdHeader: null }).webhookId).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('takes the event time from the payload, else the signed timestamp, else receipt', () => {
    expect(toWebhookEvent({ type: 'x', timestamp: 1_750_000_000 }, ctx).occurredAt).toBe(1_750_000_000_000);
    expect(toWebhookEvent({ type: 'x', createdAt: 'not a date' }, ctx).occurredAt).toBe(ctx.signedTimestampMs);
    expect(toWebhookEvent({ type: 'x' }, { ...ctx, signedTimestampMs: null }).occurredAt).toBe(ctx.receivedAt);
  });

  it('refuses JSON that is not an object', () => {
    for (const v of [[], 3, 'x', null, true]) expect(() => toWebhookEvent(v, ctx)).toThrow(InvalidPayloadError);
  });

  it('never reads a bare date as a time (it would be UTC midnight)', () => {
    expect(parseTime('2026-11-21')).toBeNull();
    expect(parseTime('2026-11-21T00:00:00-06:00')).toBe(Date.parse('2026-11-21T06:00:00Z'));
  });

  it('uses data.fundedAt for the funded time when given', () => {
    expect(extractFundedAt({ payload: { data: { fundedAt: '2026-01-02T03:04:05Z' } }, occurredAt: 5 })).toBe(Date.parse('2026-01-02T03:04:05Z'));
    expect(extractFundedAt({ payload: { data: {} }, occurredAt: 5 })).toBe(5);
  });
});
