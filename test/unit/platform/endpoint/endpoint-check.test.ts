import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../../src/lib/clock.js';
import { silentLogger } from '../../../../src/lib/logger.js';
import type { WebhookEndpoint } from '../../../../src/contract/schemas.js';
import {
  checkEndpoints,
  createEndpointWatch,
  isEndpointDisabled,
  sameEndpointUrl,
} from '../../../../src/platform/endpoint/endpoint-check.js';

const url = 'https://connector.bank.example/webhooks/platform';
const config = (publicUrl?: string) => ({
  webhooks: {
    host: '127.0.0.1',
    port: 0,
    secrets: [],
    scheme: 'standard' as const,
    toleranceSeconds: 300,
    maxBodyBytes: 262_144,
    debounceMs: 0,
    maxConnections: 1024,
    maxConnectionsPerClient: 128,
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 20_000,
    keepAliveTimeoutMs: 5_000,
    ...(publicUrl ? { publicUrl } : {}),
  },
});
const platform = (endpoints: WebhookEndpoint[] | Error) => ({
  listWebhookEndpoints: () =>
    endpoints instanceof Error ? Promise.reject(endpoints) : Promise.resolve(endpoints),
});

describe('endpoint check', () => {
  it('matches URLs ignoring host case and a trailing slash', () => {
    expect(sameEndpointUrl('https://Connector.bank.example/webhooks/platform/', url)).toBe(true);
    expect(sameEndpointUrl('https://connector.bank.example/other', url)).toBe(false);
  });

  it('treats non-active status, or an auto-disable after the last success, as disabled', () => {
    expect(isEndpointDisabled({ id: 'a', status: 'active' })).toBe(false);
    expect(isEndpointDisabled({ id: 'a', status: 'disabled' })).toBe(true);
    expect(
      isEndpointDisabled({
        id: 'a',
        status: 'active',
        autoDisabledAt: '2026-01-02T00:00:00Z',
        lastSuccessAt: '2026-01-01T00:00:00Z',
      }),
    ).toBe(true);
    expect(
      isEndpointDisabled({
        id: 'a',
        status: 'active',
        autoDisabledAt: '2026-01-01T00:00:00Z',
        lastSuccessAt: '2026-01-03T00:00:00Z',
      }),
    ).toBe(false);
  });

  it.each([
    [[{ id: 'e1', url, status: 'active' }], 'active'],
    [[{ id: 'e1', url, status: 'active', consecutiveFailures: 3 }], 'failing'],
    [[{ id: 'e1', url, status: 'disabled', autoDisabledAt: '2026-01-01T00:00:00Z' }], 'disabled'],
    [
      [
        { id: 'e1', url, status: 'disabled' },
        { id: 'e2', url, status: 'active' },
      ],
      'active',
    ],
    [[{ id: 'e1', url: 'https://elsewhere.example/hook', status: 'active' }], 'missing'],
  ] as Array<[WebhookEndpoint[], string]>)('%j → %s', async (endpoints, state) => {
    const watch = createEndpointWatch();
    const r = await checkEndpoints(platform(endpoints), config(url), silentLogger(), {
      clock: systemClock,
      watch,
    });
    expect(r.state).toBe(state);
    expect(watch.last()).toBe(r);
  });

  it('never throws: an unreachable platform is `unknown`, no publicUrl is `unconfigured`', async () => {
    expect(
      (
        await checkEndpoints(platform(new Error('ECONNREFUSED')), config(url), silentLogger(), {
          clock: systemClock,
        })
      ).state,
    ).toBe('unknown');
    expect((await checkEndpoints(platform([]), config(), silentLogger(), { clock: systemClock })).state).toBe(
      'unconfigured',
    );
  });
});
