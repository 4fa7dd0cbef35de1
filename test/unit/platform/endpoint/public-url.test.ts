import { describe, expect, it } from 'vitest';
import { webhookTargetProblem } from '../../../../src/platform/endpoint/public-url.js';

const resolveTo = (addresses: string[]) => () => Promise.resolve(addresses);

describe('webhook endpoint URL checks in the connector (regression: http and private hosts were left to the platform)', () => {
  it('https only outside development; no credentials', async () => {
    expect(
      await webhookTargetProblem('http://connector.bank.example/webhooks/platform', {
        allowLocal: false,
        resolve: resolveTo(['93.184.215.14']),
      }),
    ).toMatch(/expected an https:\/\/ URL/);
    expect(
      await webhookTargetProblem('https://u:p@connector.bank.example/webhooks/platform', {
        allowLocal: false,
      }),
    ).toBe('must not carry credentials');
    expect(
      await webhookTargetProblem('https://connector.bank.example/webhooks/platform', {
        allowLocal: false,
        resolve: resolveTo(['93.184.215.14']),
      }),
    ).toBeNull();
  });

  it('refuses loopback, private and metadata hosts, literally or after DNS resolution', async () => {
    expect(await webhookTargetProblem('https://127.0.0.1/webhooks/platform', { allowLocal: false })).toMatch(
      /loopback/,
    );
    expect(await webhookTargetProblem('https://169.254.169.254/latest', { allowLocal: false })).toMatch(
      /metadata/,
    );
    expect(await webhookTargetProblem('https://[::1]/x', { allowLocal: false })).toMatch(/loopback/);
    expect(
      await webhookTargetProblem('https://innocent.example/x', {
        allowLocal: false,
        resolve: resolveTo(['93.184.215.14', '10.0.0.5']),
      }),
    ).toMatch(/resolves to 10\.0\.0\.5, a private/);
    expect(
      await webhookTargetProblem('https://rebind.example/x', {
        allowLocal: false,
        resolve: resolveTo(['127.0.0.1']),
      }),
    ).toMatch(/resolves to 127\.0\.0\.1, a loopback/);
    expect(
      await webhookTargetProblem('https://nowhere.example/x', {
        allowLocal: false,
        resolve: () => Promise.reject(Object.assign(new Error('x'), { code: 'ENOTFOUND' })),
      }),
    ).toMatch(/does not resolve \(ENOTFOUND\)/);
  });

  it('development (the sandbox) may register a loopback http receiver', async () => {
    expect(
      await webhookTargetProblem('http://127.0.0.1:8080/webhooks/platform', { allowLocal: true }),
    ).toBeNull();
  });
});
