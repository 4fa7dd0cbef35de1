import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { isLoopbackHost, webhookUrlProblem } from '../../../src/sandbox/webhook-url.js';
import { signStandardWebhook } from '../../../src/sandbox/webhook-sender.js';

describe('webhook URL rules', () => {
  it.each(['https://hooks.bank.example/x', 'https://8.8.8.8/hook', 'https://[2606:4700::1111]/x'])(
    'accepts %s',
    (u) => {
      expect(webhookUrlProblem(u, false)).toBeNull();
    },
  );
  it.each([
    'http://hooks.bank.example/x',
    'https://127.0.0.1/x',
    'https://localhost:8443/x',
    'https://10.0.0.8/x',
    'https://172.20.1.1/x',
    'https://192.168.1.1/x',
    'https://169.254.169.254/',
    'https://[::1]/x',
    'https://[fd00::1]/x',
    'https://metadata.google.internal/',
    'ftp://x.example/',
    'not a url',
    'https://user:pw@hooks.example/x',
    'https://[::ffff:127.0.0.1]/x',
    'https://[::ffff:a9fe:a9fe]/latest',
    'https://[::ffff:10.0.0.1]/x',
    'https://[2001:db8::1]/x',
    'https://[fe90::1]/x',
    'https://198.18.0.1/x',
  ])('refuses %s', (u) => {
    expect(webhookUrlProblem(u, false)).not.toBeNull();
  });
  it('allows loopback over http only when the option is on, never private hosts', () => {
    expect(webhookUrlProblem('http://127.0.0.1:9000/hooks', true)).toBeNull();
    expect(webhookUrlProblem('http://localhost:9000/hooks', true)).toBeNull();
    expect(webhookUrlProblem('http://10.0.0.1/hooks', true)).not.toBeNull();
  });
});

describe('Standard Webhooks signature', () => {
  it('verifies with the standardwebhooks package', () => {
    const secret = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
    const ts = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ id: 'evt_1', type: 'loan.funded', data: { loanId: 'ln_1' } });
    const sig = signStandardWebhook(secret, 'evt_1', ts, body);
    expect(
      new Webhook(secret).verify(body, {
        'webhook-id': 'evt_1',
        'webhook-timestamp': String(ts),
        'webhook-signature': sig,
      }),
    ).toMatchObject({ type: 'loan.funded' });
  });
});

describe('isLoopbackHost', () => {
  it.each([
    '127.0.0.1',
    '::1',
    '[::1]',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    'localhost',
    'api.localhost',
    '127.9.9.9',
  ])('%s is loopback', (h) => {
    expect(isLoopbackHost(h)).toBe(true);
  });
  it.each(['10.0.0.1', '::ffff:10.0.0.1', 'example.com', '::'])('%s is not', (h) => {
    expect(isLoopbackHost(h)).toBe(false);
  });
});
