import type { Config } from '../../config/schema.js';
import type { Clock } from '../../lib/clock.js';
import { errorMessage } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { PlatformApi } from '../api.js';
import type { WebhookEndpoint } from '../../contract/schemas.js';

export type EndpointState = 'active' | 'failing' | 'disabled' | 'missing' | 'unconfigured' | 'unknown';

export interface EndpointCheckResult {
  state: EndpointState;
  checkedAt: number;
  /** Operator-facing summary (served on /readyz, so never a secret). */
  detail: string;
  endpoint?: WebhookEndpoint;
}

/** Remembers the last endpoint check so /readyz can answer without calling the platform. */
export interface EndpointWatch {
  last(): EndpointCheckResult | null;
  record(result: EndpointCheckResult): void;
}

export function createEndpointWatch(): EndpointWatch {
  let last: EndpointCheckResult | null = null;
  return {
    last: () => last,
    record(r) {
      last = r;
    },
  };
}

/** Compares URLs the way the platform is likely to store them (host case and trailing slash ignored). */
export function sameEndpointUrl(a: string, b: string): boolean {
  try {
    const ua = new URL(a);
    const ub = new URL(b);
    const path = (u: URL): string => u.pathname.replace(/\/+$/, '');
    return (
      ua.protocol === ub.protocol &&
      ua.host.toLowerCase() === ub.host.toLowerCase() &&
      path(ua) === path(ub) &&
      ua.search === ub.search
    );
  } catch {
    return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
  }
}

/**
 * Whether the platform stopped delivering to an endpoint. Values other than `active` are "not
 * shown" in the spec, so any other status counts as disabled; an `active` endpoint whose
 * autoDisabledAt is later than its last success is treated as disabled too (the field may stay
 * set after a re-enable, so a later success clears it).
 */
export function isEndpointDisabled(e: WebhookEndpoint): boolean {
  if (typeof e.status === 'string' && e.status !== '' && e.status !== 'active') return true;
  if (!e.autoDisabledAt) return false;
  const disabledAt = Date.parse(e.autoDisabledAt);
  const lastSuccess = e.lastSuccessAt ? Date.parse(e.lastSuccessAt) : Number.NaN;
  return Number.isNaN(lastSuccess) || Number.isNaN(disabledAt) || lastSuccess < disabledAt;
}

export interface CheckEndpointsOptions {
  watch?: EndpointWatch;
  clock: Clock;
  signal?: AbortSignal;
}

/**
 * Finds our endpoint (matched by `webhooks.publicUrl`) in the platform's list and warns when it is
 * auto-disabled or failing: then no loan.funded pushes arrive and boarding falls back to the
 * scheduled cycles. Never throws: a failed check is logged and reported as `unknown`.
 * The run command calls this on `schedule.endpointCheck`.
 */
export async function checkEndpoints(
  platform: Pick<PlatformApi, 'listWebhookEndpoints'>,
  config: Pick<Config, 'webhooks'>,
  logger: Logger,
  opts: CheckEndpointsOptions,
): Promise<EndpointCheckResult> {
  const clock = opts.clock;
  const publicUrl = config.webhooks.publicUrl;
  const done = (r: Omit<EndpointCheckResult, 'checkedAt'>): EndpointCheckResult => {
    const result = { ...r, checkedAt: clock.now() };
    opts.watch?.record(result);
    return result;
  };
  if (!publicUrl) {
    logger.debug('webhook endpoint check skipped: webhooks.publicUrl is not set');
    return done({ state: 'unconfigured', detail: 'webhooks.publicUrl not set' });
  }
  let endpoints: WebhookEndpoint[];
  try {
    endpoints = await platform.listWebhookEndpoints(opts.signal ? { signal: opts.signal } : {});
  } catch (err) {
    logger.warn(
      { err: errorMessage(err) },
      'webhook endpoint check failed; will try again on the next schedule',
    );
    return done({ state: 'unknown', detail: 'endpoint list unavailable' });
  }
  const ours = endpoints.filter((e) => typeof e.url === 'string' && sameEndpointUrl(e.url, publicUrl));
  if (ours.length === 0) {
    logger.warn(
      { publicUrl, endpoints: endpoints.length },
      'no webhook endpoint on the platform points at webhooks.publicUrl: ' +
        'register one with `webhooks register --url <publicUrl>`',
    );
    return done({ state: 'missing', detail: 'no endpoint registered for webhooks.publicUrl' });
  }
  // Several registrations of the same URL: the healthiest one decides.
  const active = ours.find((e) => !isEndpointDisabled(e));
  const endpoint = active ?? ours[0];
  if (!endpoint) return done({ state: 'missing', detail: 'no endpoint registered for webhooks.publicUrl' });
  if (!active) {
    logger.warn(
      {
        endpointId: endpoint.id,
        status: endpoint.status,
        autoDisabledAt: endpoint.autoDisabledAt,
        consecutiveFailures: endpoint.consecutiveFailures,
        lastFailureReason: endpoint.lastFailureReason,
      },
      `webhook endpoint is disabled on the platform: no pushes arrive; fix the cause, then run \`webhooks enable ` +
        `${endpoint.id}\``,
    );
    return done({
      state: 'disabled',
      endpoint,
      detail: `endpoint ${endpoint.id} disabled${endpoint.autoDisabledAt ? ` at ${endpoint.autoDisabledAt}` : ''}`,
    });
  }
  if ((endpoint.consecutiveFailures ?? 0) > 0) {
    logger.warn(
      {
        endpointId: endpoint.id,
        consecutiveFailures: endpoint.consecutiveFailures,
        lastFailureReason: endpoint.lastFailureReason,
        lastFailureAt: endpoint.lastFailureAt,
      },
      'webhook deliveries to this connector are failing; the platform may auto-disable the endpoint',
    );
    return done({
      state: 'failing',
      endpoint,
      detail: `endpoint ${endpoint.id}: ${endpoint.consecutiveFailures} consecutive failures`,
    });
  }
  logger.debug({ endpointId: endpoint.id }, 'webhook endpoint active');
  return done({ state: 'active', endpoint, detail: `endpoint ${endpoint.id} active` });
}
