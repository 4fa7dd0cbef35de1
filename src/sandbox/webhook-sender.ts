import { createHmac } from 'node:crypto';
import type { Logger } from '../lib/logger.js';
import { bump } from './counters.js';
import type { SandboxEvent, SandboxState, WebhookEndpointRecord } from './state.js';

export interface WebhookRetry {
  /** Total delivery attempts per event and endpoint (first try included). */
  attempts: number;
  /** Backoff before retry n is baseMs * 2^(n-1). */
  baseMs: number;
}

export interface DeliveryAttempt {
  eventId: string;
  type: string;
  endpointId: string;
  attempt: number;
  at: string;
  ok: boolean;
  status: number | null;
  error: string | null;
}

/** Standard Webhooks v1 signature: base64 HMAC-SHA256 over `id.timestamp.body` with the decoded secret. */
export function signStandardWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * Delivers lifecycle events to subscribed endpoints with retries and the failure bookkeeping the
 * spec exposes on the endpoint record; auto-disables after `autoDisableAfter` consecutive failures.
 */
export class WebhookSender {
  readonly attempts: DeliveryAttempt[] = [];
  private readonly inflight = new Set<Promise<void>>();
  private readonly timers = new Map<NodeJS.Timeout, () => void>();
  private closed = false;

  constructor(
    private readonly state: SandboxState,
    private readonly logger: Logger,
    public retry: WebhookRetry,
    public autoDisableAfter: number,
    private readonly timeoutMs = 5_000,
  ) {
    state.onEvent((e) => this.dispatch(e));
  }

  payload(e: SandboxEvent): string {
    return JSON.stringify({
      id: e.id,
      type: e.type,
      createdAt: e.createdAt,
      environment: this.state.environment,
      data: e.data,
    });
  }

  private dispatch(e: SandboxEvent): void {
    for (const endpoint of this.state.endpoints.values()) {
      if (
        endpoint.orgId !== e.orgId ||
        endpoint.status !== 'active' ||
        !endpoint.subscribedEvents.includes(e.type)
      )
        continue;
      this.track(this.deliver(endpoint, e, 1));
    }
  }

  private track(p: Promise<void>): void {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  private async deliver(endpoint: WebhookEndpointRecord, e: SandboxEvent, attempt: number): Promise<void> {
    if (this.closed || endpoint.status !== 'active') return;
    const body = this.payload(e);
    const ts = Math.floor(this.state.nowMs() / 1000);
    const counters = this.state.counters.webhookDeliveries;
    counters.attempts += 1;
    const per = (counters.byEndpoint[endpoint.id] ??= { attempts: 0, succeeded: 0, failed: 0 });
    per.attempts += 1;
    let status: number | null = null;
    let error: string | null = null;
    try {
      const res = await fetch(endpoint.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'LoanPlatform-Webhooks/1.0 (sandbox)',
          'webhook-id': e.id,
          'webhook-timestamp': String(ts),
          'webhook-signature': signStandardWebhook(endpoint.secret, e.id, ts, body),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      status = res.status;
      await res.arrayBuffer().catch(() => undefined);
      if (res.status < 200 || res.status >= 300) error = `HTTP ${res.status}`;
    } catch (err) {
      error =
        err instanceof Error
          ? err.cause instanceof Error
            ? `${err.message}: ${err.cause.message}`
            : err.message
          : String(err);
    }
    const at = this.state.nowIso();
    this.attempts.push({
      eventId: e.id,
      type: e.type,
      endpointId: endpoint.id,
      attempt,
      at,
      ok: error === null,
      status,
      error,
    });
    if (error === null) {
      counters.succeeded += 1;
      per.succeeded += 1;
      bump(counters.byType, e.type);
      endpoint.consecutiveFailures = 0;
      endpoint.lastSuccessAt = at;
      return;
    }
    counters.failed += 1;
    per.failed += 1;
    endpoint.consecutiveFailures += 1;
    endpoint.lastFailureAt = at;
    endpoint.lastFailureReason = error;
    this.logger.debug(
      { endpointId: endpoint.id, eventId: e.id, attempt, error },
      'sandbox webhook delivery failed',
    );
    if (endpoint.consecutiveFailures >= this.autoDisableAfter && endpoint.status === 'active') {
      endpoint.status = 'disabled';
      endpoint.autoDisabledAt = at;
      return;
    }
    if (attempt >= this.retry.attempts || this.closed) return;
    const delay = this.retry.baseMs * 2 ** (attempt - 1);
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, delay);
      this.timers.set(t, resolve);
    });
    await this.deliver(endpoint, e, attempt + 1);
  }

  /** Resolves when no delivery is in flight (tests and the admin API wait on this). */
  async idle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  close(): void {
    this.closed = true;
    // Wake pending backoffs so in-flight deliveries end at once instead of holding the process.
    for (const [t, resolve] of this.timers) {
      clearTimeout(t);
      resolve();
    }
    this.timers.clear();
  }
}
