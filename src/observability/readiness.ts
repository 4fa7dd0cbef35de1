import type { Clock } from '../lib/clock.js';
import type { PoolUsage } from '../store/identity/numbers.js';
import { errorMessage } from '../lib/errors.js';
import type { PlatformHealth } from '../platform/api.js';
import type { StoreDb } from '../store/sql.js';
import type { EndpointWatch } from '../platform/endpoint/endpoint-check.js';
import type { DiskStatus } from './disk-space.js';
import type { ClockSkewStatus } from './clock-skew.js';

export interface CheckResult {
  ok: boolean;
  /** Short, operator-facing; never a secret (it is served on /readyz). */
  detail?: string;
}

/** One readiness condition; /readyz answers 200 only when every check is ok. */
export type ReadinessCheck = () => CheckResult | Promise<CheckResult>;

/** The state database accepts a write: BEGIN IMMEDIATE takes the write lock, then rolls back. */
export function dbWritableCheck(db: StoreDb): ReadinessCheck {
  return async () => {
    const blocker = await db.writeBlocker();
    return blocker === null ? { ok: true } : { ok: false, detail: blocker };
  };
}

export interface PlatformReadinessOptions {
  /** How old the last successful platform call may be. Default 15 min. */
  maxSuccessAgeMs?: number;
  /** Before the first call, the process counts as ready for this long after start. Default 2 min. */
  startupGraceMs?: number;
  /**
   * true while this replica stands by (another replica leads): the leader makes the platform
   * calls, so having made none of its own, or only old ones, is not a failure (a healthy standby
   * is ready: it takes webhooks).
   */
  standby?: () => boolean;
  clock: Clock;
}

/**
 * The platform answers: the last call succeeded, recently. A failed call (network, timeout, 5xx,
 * 429, auth, traffic stop; not one loan's 4xx) newer than the last success fails the check from
 * the first one, start-up included: the grace period only covers "no call made yet".
 */
export function platformRecentSuccessCheck(
  health: () => PlatformHealth,
  opts: PlatformReadinessOptions,
): ReadinessCheck {
  const clock = opts.clock;
  const maxAge = opts.maxSuccessAgeMs ?? 15 * 60_000;
  const grace = opts.startupGraceMs ?? 2 * 60_000;
  const startedAt = clock.now();
  const iso = (ms: number): string => new Date(ms).toISOString();
  return () => {
    const { lastSuccessAt, lastFailure } = health();
    const now = clock.now();
    if (opts.standby?.() === true) {
      // Regression: a standby fell to "no successful platform call since start" (503) two minutes
      // after it started, so a load balancer stopped sending it webhooks.
      const own =
        lastFailure && (lastSuccessAt === null || lastFailure.at >= lastSuccessAt)
          ? `; this replica's own last call failed: ${lastFailure.detail} at ${iso(lastFailure.at)}`
          : '';
      return { ok: true, detail: `standby: the leader makes the platform calls${own}` };
    }
    if (lastFailure && (lastSuccessAt === null || lastFailure.at >= lastSuccessAt)) {
      const since =
        lastSuccessAt === null
          ? 'no successful platform call since start'
          : `last success ${iso(lastSuccessAt)}`;
      return {
        ok: false,
        detail: `platform call failing: ${lastFailure.detail} at ${iso(lastFailure.at)} (${since})`,
      };
    }
    if (lastSuccessAt === null) {
      return now - startedAt <= grace
        ? { ok: true, detail: 'no platform call yet (starting)' }
        : { ok: false, detail: 'no successful platform call since start' };
    }
    const age = now - lastSuccessAt;
    return age <= maxAge
      ? { ok: true }
      : { ok: false, detail: `last successful platform call ${Math.round(age / 1000)}s ago` };
  };
}

/** No unresolved 429 strike in the last 24 h (one strike already means the key is at risk). */
export function noRateLimitStrikeCheck(health: () => PlatformHealth): ReadinessCheck {
  return () => {
    const h = health();
    if (h.strikes24h === 0) return { ok: true };
    return {
      ok: false,
      detail: `${h.strikes24h} rate-limit strike(s) in 24 h${h.trafficStopped ? '; traffic stopped' : ''}`,
    };
  };
}

/** Our webhook endpoint on the platform is not auto-disabled (as of the last endpoint check). */
export function webhookEndpointCheck(watch: EndpointWatch): ReadinessCheck {
  return () => {
    const last = watch.last();
    if (!last || last.state === 'unconfigured' || last.state === 'unknown')
      return { ok: true, detail: last?.detail ?? 'not checked yet' };
    return last.state === 'disabled' ? { ok: false, detail: last.detail } : { ok: true, detail: last.detail };
  };
}

/**
 * What readiness reads of the loaded mapping set: declared here (its user's port) so observability/
 * depends on nothing above it; ops/mapping-reload.ts LoadedMappingStatus satisfies it structurally.
 */
export interface MappingStatusView {
  version: string;
  loadedAt: number;
  lastReloadError: { at: number; trigger: string; message: string } | null;
}

/**
 * The mapping set in use, and why the last reload was refused. A refused reload stays ready: the
 * loaded set keeps boarding, and pulling the receiver out of rotation would only lose webhooks.
 */
export function mappingCheck(status: () => MappingStatusView): ReadinessCheck {
  return () => {
    const s = status();
    const err = s.lastReloadError;
    if (!err)
      return { ok: true, detail: `mapping ${s.version} loaded ${new Date(s.loadedAt).toISOString()}` };
    return {
      ok: true,
      detail:
        `mapping ${s.version} in use; the reload at ${new Date(err.at).toISOString()} (${err.trigger}) ` +
        `was refused: ${err.message.slice(0, 2000)}`,
    };
  };
}

/**
 * The core's customer source (the bank's extract; Fineract's search). Unavailable, loans with
 * customers wait in retry_wait (never boarded as "no existing customer"); like a refused mapping
 * reload it stays ready — the receiver keeps taking webhooks — and the detail says why loans wait.
 */
export function customerSourceCheck(status: () => { ok: boolean; detail: string }): ReadinessCheck {
  return () => {
    const s = status();
    return s.ok
      ? { ok: true, detail: s.detail }
      : { ok: true, detail: `loans wait for customer match: ${s.detail}` };
  };
}

export interface StandardChecksInput {
  db?: StoreDb;
  /** Usage of the bank's number pools in use (identity.*.source pool). */
  numberPools?: () => Promise<readonly PoolUsage[]>;
  platformHealth?: () => PlatformHealth;
  endpointWatch?: EndpointWatch;
  platform?: Omit<PlatformReadinessOptions, 'clock'>;
  /** true while this replica stands by (PlatformReadinessOptions.standby). */
  standby?: () => boolean;
  mapping?: () => MappingStatusView;
  clock: Clock;
  customers?: () => { ok: boolean; detail: string };
  /** Free space where the connector writes (src/observability/disk-space.ts). */
  disk?: () => DiskStatus;
  /** The core's outage as the last boarding pass saw it (null: none). */
  coreOutage?: () => CoreOutageView | null;
  /** The imaging folder (src/imaging/folder-watch.ts): missing, or not drained by the importer. */
  imaging?: () => { ok: boolean; detail: string };
  /** This host's clock against the database's (PostgreSQL). */
  clockSkew?: () => Promise<ClockSkewStatus>;
}

/** A core outage: the last pass stopped after `failures` unavailable writes in a row. */
export interface CoreOutageView {
  since: number;
  failures: number;
  message: string;
}

/** Boarding stops below boarding.minFreeDiskMb (the daemon starts no cycle): not ready. */
export function diskSpaceCheck(status: () => DiskStatus): ReadinessCheck {
  return () => {
    const s = status();
    return { ok: s.ok, detail: s.detail };
  };
}

/**
 * The last pass stopped because the core did not answer (or refused writes: a full disk): not ready
 * until a board succeeds.
 */
export function coreOutageCheck(outage: () => CoreOutageView | null): ReadinessCheck {
  return () => {
    const o = outage();
    if (o === null) return { ok: true };
    return {
      ok: false,
      detail:
        `CORE OUTAGE since ${new Date(o.since).toISOString()}: ${o.failures} writes in a row failed ` +
        `(${o.message}); boarding resumes by itself once the core answers`,
    };
  };
}

/** Host clock against the database clock: not ready at store.maxClockSkewMs or more. */
export function clockSkewCheck(status: () => Promise<ClockSkewStatus>): ReadinessCheck {
  return async () => {
    const s = await status();
    return { ok: s.ok, detail: s.detail };
  };
}

/**
 * The bank's number pools: not ready once one is exhausted (boarding has stopped); ready but with
 * a warning in the detail from its warnAt share on, so the bank adds a range in time.
 */
export function numberPoolsCheck(usage: () => Promise<readonly PoolUsage[]>): ReadinessCheck {
  return async () => {
    const pools = await usage();
    if (pools.length === 0)
      return { ok: true, detail: 'no number pool in use (the core assigns the numbers)' };
    const parts = pools.map((u) => {
      const pct = `${(u.ratio * 100).toFixed(1)}% used (${u.used} of ${u.capacity})`;
      const key =
        u.pool === 'account' ? 'identity.accountNumbers.pool.ranges' : 'identity.customerNumbers.pool.ranges';
      if (u.used >= u.capacity) return `${u.pool}: EXHAUSTED, boarding stopped: add a range to ${key}`;
      if (u.ratio >= u.warnAt)
        return `${u.pool}: WARNING ${pct}, at or above warnAt ${u.warnAt}: add a range to ${key}`;
      return `${u.pool}: ${pct}`;
    });
    return { ok: pools.every((u) => u.used < u.capacity), detail: parts.join('; ') };
  };
}

/** The four checks the issue asks for, from whatever the caller has. */
export function standardReadinessChecks(input: StandardChecksInput): Record<string, ReadinessCheck> {
  const checks: Record<string, ReadinessCheck> = {};
  if (input.db) checks['database'] = dbWritableCheck(input.db);
  if (input.platformHealth) {
    checks['platform'] = platformRecentSuccessCheck(input.platformHealth, {
      ...input.platform,
      ...(input.standby ? { standby: input.standby } : {}),
      clock: input.clock,
    });
    checks['rateLimit'] = noRateLimitStrikeCheck(input.platformHealth);
  }
  if (input.endpointWatch) checks['webhookEndpoint'] = webhookEndpointCheck(input.endpointWatch);
  if (input.mapping) checks['mapping'] = mappingCheck(input.mapping);
  if (input.numberPools) checks['numberPools'] = numberPoolsCheck(input.numberPools);
  if (input.customers) checks['customers'] = customerSourceCheck(input.customers);
  if (input.disk) checks['disk'] = diskSpaceCheck(input.disk);
  if (input.coreOutage) checks['core'] = coreOutageCheck(input.coreOutage);
  if (input.imaging) {
    const imaging = input.imaging;
    checks['imaging'] = () => {
      const s = imaging();
      return { ok: s.ok, detail: s.detail };
    };
  }
  if (input.clockSkew) checks['clock'] = clockSkewCheck(input.clockSkew);
  return checks;
}

/** Runs every check; a check that throws counts as failed. */
export async function runReadiness(
  checks: Record<string, ReadinessCheck>,
): Promise<{ ready: boolean; checks: Record<string, CheckResult> }> {
  const results: Record<string, CheckResult> = {};
  let ready = true;
  for (const [name, check] of Object.entries(checks)) {
    let r: CheckResult;
    try {
      r = await check();
    } catch (err) {
      r = { ok: false, detail: `check failed: ${errorMessage(err)}` };
    }
    results[name] = r;
    if (!r.ok) ready = false;
  }
  return { ready, checks: results };
}
