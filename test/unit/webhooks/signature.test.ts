import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { createVerifier, unusableSecrets } from '../../../src/webhooks/signature.js';

const secretA = `whsec_${randomBytes(24).toString('base64')}`;
const secretB = `whsec_${randomBytes(32).toString('base64')}`;
const body = Buffer.from(JSON.stringify({ type: 'loan.funded', data: { loanId: 'L1' } }));
const now = Date.UTC(2026, 10, 21, 12, 0, 0);

function standardHeaders(
  secret: string,
  id = 'msg_1',
  at = new Date(now),
  payload: Buffer = body,
): Record<string, string> {
  const sig = new Webhook(secret).sign(id, at, payload.toString('utf8'));
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': sig,
  };
}

describe('standard webhooks verifier', () => {
  const verifier = createVerifier({ scheme: 'standard', secrets: [secretA], toleranceSeconds: 300 });

  it('accepts a delivery signed by the independent standardwebhooks package', () => {
    const r = verifier.verify(standardHeaders(secretA), body, now);
    expect(r).toEqual({ ok: true, webhookId: 'msg_1', timestampMs: now });
  });

  it('accepts while rotating: either of two configured secrets', () => {
    const rotating = createVerifier({
      scheme: 'standard',
      secrets: [secretA, secretB],
      toleranceSeconds: 300,
    });
    expect(rotating.verify(standardHeaders(secretA), body, now).ok).toBe(true);
    expect(rotating.verify(standardHeaders(secretB), body, now).ok).toBe(true);
    expect(verifier.verify(standardHeaders(secretB), body, now)).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it('accepts several space-separated signatures when one of them matches', () => {
    const good = standardHeaders(secretA);
    const bad = standardHeaders(secretB);
    const headers = {
      ...good,
      'webhook-signature': `${bad['webhook-signature']} v2,xyz ${good['webhook-signature']}`,
    };
    expect(verifier.verify(headers, body, now).ok).toBe(true);
  });

  it('refuses a changed body, id or timestamp', () => {
    const h = standardHeaders(secretA);
    expect(verifier.verify(h, Buffer.from(`${body.toString()} `), now)).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
    expect(verifier.verify({ ...h, 'webhook-id': 'msg_2' }, body, now)).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
    expect(verifier.verify({ ...h, 'webhook-timestamp': String(now / 1000 + 1) }, body, now)).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it('refuses timestamps outside the tolerance, both directions', () => {
    const old = standardHeaders(secretA, 'm', new Date(now - 301_000));
    const future = standardHeaders(secretA, 'm', new Date(now + 301_000));
    expect(verifier.verify(old, body, now)).toMatchObject({
      ok: false,
      reason: 'timestamp_out_of_tolerance',
    });
    expect(verifier.verify(future, body, now)).toMatchObject({
      ok: false,
      reason: 'timestamp_out_of_tolerance',
    });
    expect(verifier.verify(standardHeaders(secretA, 'm', new Date(now - 299_000)), body, now).ok).toBe(true);
  });

  it('names missing and malformed headers', () => {
    const h = standardHeaders(secretA);
    const { 'webhook-signature': _s, ...noSig } = h;
    expect(verifier.verify(noSig, body, now)).toMatchObject({ ok: false, reason: 'missing_headers' });
    expect(verifier.verify({ ...h, 'webhook-timestamp': 'yesterday' }, body, now)).toMatchObject({
      ok: false,
      reason: 'malformed_headers',
    });
  });

  it('does not accept svix-* headers under the standard scheme (never auto-detected)', () => {
    const h = standardHeaders(secretA);
    const svix = {
      'svix-id': h['webhook-id']!,
      'svix-timestamp': h['webhook-timestamp']!,
      'svix-signature': h['webhook-signature']!,
    };
    expect(verifier.verify(svix, body, now)).toMatchObject({ ok: false, reason: 'missing_headers' });
    const svixVerifier = createVerifier({ scheme: 'svix', secrets: [secretA], toleranceSeconds: 300 });
    expect(svixVerifier.verify(svix, body, now).ok).toBe(true);
    expect(svixVerifier.verify(h, body, now)).toMatchObject({ ok: false, reason: 'missing_headers' });
  });

  it('refuses everything when no secret is configured', () => {
    const none = createVerifier({ scheme: 'standard', secrets: [], toleranceSeconds: 300 });
    expect(none.verify(standardHeaders(secretA), body, now)).toMatchObject({
      ok: false,
      reason: 'no_secret_configured',
    });
  });

  it('reports secrets that are not base64 after whsec_', () => {
    expect(unusableSecrets('standard', [secretA, 'whsec_not base64!'])).toEqual([1]);
    expect(unusableSecrets('stripe', ['anything'])).toEqual([]);
  });
});

describe('stripe verifier', () => {
  const secret = 'whsec_stripe_test_secret';
  const verifier = createVerifier({
    scheme: 'stripe',
    secrets: ['whsec_old', secret],
    toleranceSeconds: 300,
  });
  const sign = (t: number, key = secret): string =>
    createHmac('sha256', key).update(`${t}.${body.toString()}`).digest('hex');

  it('accepts t=…,v1=<hex> of the current secret', () => {
    const t = now / 1000;
    expect(verifier.verify({ 'stripe-signature': `t=${t},v1=${sign(t)},v0=abc` }, body, now)).toEqual({
      ok: true,
      webhookId: null,
      timestampMs: now,
    });
  });

  it('refuses a wrong key, a stale t and a header without t', () => {
    const t = now / 1000;
    expect(verifier.verify({ 'stripe-signature': `t=${t},v1=${sign(t, 'other')}` }, body, now)).toMatchObject(
      { reason: 'bad_signature' },
    );
    expect(
      verifier.verify({ 'stripe-signature': `t=${t - 600},v1=${sign(t - 600)}` }, body, now),
    ).toMatchObject({ reason: 'timestamp_out_of_tolerance' });
    expect(verifier.verify({ 'stripe-signature': `v1=${sign(t)}` }, body, now)).toMatchObject({
      reason: 'malformed_headers',
    });
    expect(verifier.verify({}, body, now)).toMatchObject({ reason: 'missing_headers' });
  });
});

describe('hmac-sha256-hex verifier', () => {
  const secret = 'plain-shared-secret';
  const verifier = createVerifier({ scheme: 'hmac-sha256-hex', secrets: [secret], toleranceSeconds: 300 });
  const hex = createHmac('sha256', secret).update(body).digest('hex');

  it('accepts a hex HMAC of the body, with or without sha256= prefix and timestamp', () => {
    expect(verifier.verify({ 'x-signature': hex }, body, now)).toEqual({
      ok: true,
      webhookId: null,
      timestampMs: null,
    });
    // X-Webhook-Id is not signed: it never names the delivery (regression: replays with new ids).
    expect(
      verifier.verify(
        { 'x-signature': `sha256=${hex}`, 'x-timestamp': String(now / 1000), 'x-webhook-id': 'd1' },
        body,
        now,
      ),
    ).toEqual({
      ok: true,
      webhookId: null,
      timestampMs: now,
    });
  });

  it('refuses a tampered body and a stale timestamp', () => {
    expect(verifier.verify({ 'x-signature': hex }, Buffer.from('{}'), now)).toMatchObject({
      reason: 'bad_signature',
    });
    expect(
      verifier.verify({ 'x-signature': hex, 'x-timestamp': String(now / 1000 - 1000) }, body, now),
    ).toMatchObject({ reason: 'timestamp_out_of_tolerance' });
    expect(verifier.verify({ 'x-signature': 'zz' }, body, now)).toMatchObject({
      reason: 'malformed_headers',
    });
  });
});
