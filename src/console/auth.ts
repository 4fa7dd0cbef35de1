/**
 * Console authentication: users from config (console.users) with scrypt password hashes, the
 * optional trusted reverse proxy's user header, and the throttle of failed logins
 * (login-throttle.ts) that HTTP Basic auth (the JSON API) and the login form (the pages) share.
 *
 * Hashes: Node's built-in crypto.scrypt (OpenSSL's), a random 16-byte salt, parameters encoded in
 * the string (`scrypt$ln=17,r=8,p=1$<salt>$<hash>`, base64), compared in constant time. New hashes
 * use OWASP's parameters (N=2^17, r=8, p=1); a configured hash below them is re-hashed at the
 * user's next login and kept in the state database (console.upgradeHashes).
 *
 * User names are compared as lib/user-name.ts says (`Olga` logs in as `olga`). A name typed at a
 * failed login is never kept: logs and the audit log get the configured user's name, or for a name
 * that is no user a keyed digest (people type passwords into the name field).
 */
import {
  createHash,
  createHmac,
  randomBytes,
  scrypt as scryptCb,
  timingSafeEqual,
  type ScryptOptions,
} from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import ipaddr from 'ipaddr.js';
import type { ConsoleConfig } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { userNameKey } from '../lib/user-name.js';
import { createLoginThrottle, type LoginLock } from './login-throttle.js';
import type { ConsoleRole, ConsoleUser } from './contract.js';

/** scrypt parameters, as encoded in a hash (`ln` = log2 N). */
export interface ScryptParams {
  ln: number;
  r: number;
  p: number;
}

/** OWASP's minimum for scrypt (Password Storage Cheat Sheet): N=2^17, r=8, p=1. */
export const SCRYPT_OWASP: ScryptParams = { ln: 17, r: 8, p: 1 };
const KEY_LEN = 32;
/** How long a verified Basic credential is remembered (keyed digest, in memory). */
const VERIFIED_TTL_MS = 5 * 60_000;
/** scrypt at N=2^17 takes 128 MiB and about a second: at most this many at once, this many waiting. */
const SCRYPT_CONCURRENCY = 2;
const SCRYPT_QUEUE = 64;
/**
 * One client address's share of the scrypt gate: running and waiting together. Beyond it that
 * address's logins are refused before any scrypt (a flood costs the flooder, issue 43 F2), while
 * every other address still gets the next free slot in turn.
 */
export const SCRYPT_PER_CLIENT = 4;
/** How long each attempt of a name over its per-user ceiling waits before its password is checked. */
export const CEILING_DELAY_MS = 2_000;
/** Why a login was throttled (the label of boarding_console_login_throttled_total). */
export type ThrottleReason = 'address_locked' | 'address_busy' | 'user_ceiling';
/** How often a lock asks the audit log whether `console unlock` lifted it. */
const UNLOCK_CHECK_MS = 5_000;

function scrypt(password: string, salt: Buffer, keyLen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCb(password.normalize('NFC'), salt, keyLen, opts, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

const scryptOpts = ({ ln, r, p }: ScryptParams): ScryptOptions => ({
  N: 2 ** ln,
  r,
  p,
  maxmem: 256 * 2 ** ln * r + 1024 * 1024,
});

/**
 * The hash `console passwd` prints for a password (OWASP's parameters). Tests that are not about
 * hashing pass weaker `params` so that a login costs milliseconds, not a second.
 */
export async function hashPassword(password: string, params: ScryptParams = SCRYPT_OWASP): Promise<string> {
  if (password.length === 0) throw new Error('the password is empty');
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, KEY_LEN, scryptOpts(params));
  return `scrypt$ln=${params.ln},r=${params.r},p=${params.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

const HASH = /^scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/;

/** The parameters of an encoded hash, null when it is not one this connector reads. */
export function hashParams(encoded: string): ScryptParams | null {
  const m = HASH.exec(encoded);
  if (!m) return null;
  const [ln, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (ln < 10 || ln > 20 || r < 1 || r > 32 || p < 1 || p > 16) return null;
  return { ln, r, p };
}

/** Whether a hash is weaker than OWASP's parameters (it is re-hashed at the next login). */
export function belowOwasp(encoded: string): boolean {
  const p = hashParams(encoded);
  return p !== null && (p.ln < SCRYPT_OWASP.ln || p.r < SCRYPT_OWASP.r);
}

/** Whether `password` matches an encoded hash (false for a malformed one). */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const params = hashParams(encoded);
  const m = HASH.exec(encoded);
  if (!params || !m) return false;
  const salt = Buffer.from(m[4] as string, 'base64');
  const want = Buffer.from(m[5] as string, 'base64');
  if (want.length < 16) return false;
  const got = await scrypt(password, salt, want.length, scryptOpts(params));
  return timingSafeEqual(got, want);
}

/** The fingerprint of a configured hash that a stored re-hash replaces (a new config hash wins). */
const fingerprint = (encoded: string): string =>
  createHash('sha256').update(encoded).digest('base64url').slice(0, 22);

export type LoginOutcome =
  | { ok: true; user: ConsoleUser }
  | { ok: false; why: 'invalid' }
  | { ok: false; why: 'throttled'; retryAfterSeconds: number; reason: 'locked' | 'busy' };

/** "15 minutes", "1 hour 5 minutes", "40 seconds": how long a person is asked to wait. */
export function humanDuration(seconds: number): string {
  const s = Math.max(1, Math.ceil(seconds));
  const unit = (n: number, one: string): string => `${n} ${one}${n === 1 ? '' : 's'}`;
  if (s < 60) return unit(s, 'second');
  const m = Math.ceil(s / 60);
  if (m < 60) return unit(m, 'minute');
  const h = Math.floor(m / 60);
  return m % 60 === 0 ? unit(h, 'hour') : `${unit(h, 'hour')} ${unit(m % 60, 'minute')}`;
}

/** What a throttled person is told (the login form and the API's 429). */
export function throttledMessage(outcome: { retryAfterSeconds: number; reason: 'locked' | 'busy' }): string {
  if (outcome.reason === 'busy')
    return (
      'Too many logins from your address are being checked at once: try again in ' +
      `${humanDuration(outcome.retryAfterSeconds)}.`
    );
  return (
    'Too many failed logins for this user from your address: try again in ' +
    `${humanDuration(outcome.retryAfterSeconds)}, ` +
    'or ask an approver to unlock you now (console Status page, Login locks, Unlock; or on the host: ' +
    '`boarding-connector console unlock NAME`).'
  );
}

/** A login lock as the status page shows it: the configured user's name. */
export interface LoginLockView {
  user: string;
  /** null: the per-user ceiling (every address slowed, none locked). */
  client: string | null;
  since: number;
  until: number;
}

export interface ConsoleAuth {
  /**
   * Checks a name and password (Basic auth and the login form both come here), throttled per
   * user name and client address (login-throttle.ts): a locked name is refused without checking
   * the password until its lock ends or is lifted.
   */
  verifyLogin(name: string, password: string, client: string): Promise<LoginOutcome>;
  /** Lifts the login locks of a configured user (the caller checked the role and audited it); how many there were. */
  unlock(name: string): number;
  /** Active login locks of configured users, newest first. */
  locks(): LoginLockView[];
  /** The configured user a typed name means (case and surrounding punctuation aside), or null. */
  resolve(name: string): ConsoleUser | null;
  /** How a typed name may be logged or audited: the configured user's name, else a keyed digest. */
  auditName(name: string): string;
  /** Resolves when no password re-hash is running (tests). */
  settled(): Promise<void>;
  /**
   * The user a trusted reverse proxy named in console.proxy.userHeader, believed only when the
   * connection comes from one of console.proxy.addresses; null otherwise (the header is ignored).
   * A named user that is not in console.users is refused (null, logged).
   */
  proxyUser(req: Request): ConsoleUser | null;
  /** The configured user of this name (roles as configured), or null. */
  user(name: string): ConsoleUser | null;
  /** The address of the connection (the socket's peer; never a forwarded-for header). */
  clientAddress(req: Request): string;
  /**
   * Middleware of the JSON API: the trusted proxy's user, else HTTP Basic credentials. 401 with
   * WWW-Authenticate when missing or wrong, 429 with Retry-After when throttled. Sets the user
   * for `consoleUser(res)`.
   */
  basic: RequestHandler;
  /** Whether the console has any way in (users or a proxy configured). */
  readonly enabled: boolean;
  /** Throttled logins since start, by reason (boarding_console_login_throttled_total). */
  throttled(): Record<ThrottleReason, number>;
}

/** The authenticated user of a request (set by `ConsoleAuth.basic` or the pages' session check). */
export function consoleUser(res: Response): ConsoleUser {
  const u = (res.locals as { consoleUser?: ConsoleUser }).consoleUser;
  if (!u) throw new Error('console route reached without an authenticated user');
  return u;
}

export function setConsoleUser(res: Response, user: ConsoleUser): void {
  (res.locals as { consoleUser?: ConsoleUser }).consoleUser = user;
}

/** Where re-hashed passwords are kept and `console unlock` is found (the state database). */
export interface ConsoleAuthStore {
  passwordHash(name: string): Promise<{ replaces: string; hash: string } | null>;
  putPasswordHash(name: string, replaces: string, hash: string, at: number): Promise<void>;
  lastUnlock(nameKey: string): Promise<number | null>;
}

export interface ConsoleAuthOptions {
  config: Pick<ConsoleConfig, 'users' | 'proxy' | 'loginThrottle'> &
    Partial<Pick<ConsoleConfig, 'upgradeHashes'>>;
  clock: Clock;
  logger: Logger;
  /** Told about refused and throttled logins (the audit log); `name` is auditName() of what was typed. */
  onEvent?: (kind: 'login_failed' | 'login_throttled', name: string, detail: { client: string }) => void;
  /** Re-hashes and unlocks (absent: no re-hash is kept, only in-process unlocks). */
  store?: ConsoleAuthStore;
  /** The parameters a weak hash is re-hashed with (default OWASP's; tests of the path pass weaker ones). */
  rehashTo?: ScryptParams;
  /** The delay of an attempt over the per-user ceiling (default CEILING_DELAY_MS; tests pass less). */
  ceilingDelayMs?: number;
}

/**
 * At most `limit` scrypt computations at once. Waiting is per client address, served in turn (one
 * from each waiting address before a second from any), so a flood from one address cannot starve
 * another; an address already holding `perClient` (running and waiting) is refused at once
 * ('busy'), and so is anyone beyond `queue` waiting in all (a flood must not take the memory).
 */
export function createFairGate(
  limit: number,
  queue: number,
  perClient: number,
): <T>(client: string, fn: () => Promise<T>) => Promise<T | 'busy'> {
  let running = 0;
  let waitingTotal = 0;
  const held = new Map<string, number>();
  // Insertion order is the turn: a served address goes to the back if it still has waiters.
  const waiting = new Map<string, Array<() => void>>();
  const release = (client: string): void => {
    const n = (held.get(client) ?? 1) - 1;
    if (n <= 0) held.delete(client);
    else held.set(client, n);
  };
  const dispatch = (): void => {
    while (running < limit) {
      const next = waiting.entries().next();
      if (next.done) return;
      const [client, list] = next.value;
      waiting.delete(client);
      const wake = list.shift();
      if (list.length > 0) waiting.set(client, list);
      if (!wake) continue;
      waitingTotal--;
      running++;
      wake();
    }
  };
  return async (client, fn) => {
    if ((held.get(client) ?? 0) >= perClient) return 'busy';
    if (running >= limit || waitingTotal > 0) {
      if (waitingTotal >= queue) return 'busy';
      held.set(client, (held.get(client) ?? 0) + 1);
      waitingTotal++;
      // The slot is taken for us by dispatch() before we are woken.
      await new Promise<void>((resolve) => {
        const list = waiting.get(client);
        if (list) list.push(resolve);
        else waiting.set(client, [resolve]);
      });
    } else {
      held.set(client, (held.get(client) ?? 0) + 1);
      running++;
    }
    try {
      return await fn();
    } finally {
      running--;
      release(client);
      dispatch();
    }
  };
}

/** Whether a connection's address is one of the trusted proxy's (console.proxy.addresses: IPs or CIDRs). */
function trustedProxy(addresses: readonly string[]): (addr: string) => boolean {
  const ranges = addresses.map((a) =>
    a.includes('/')
      ? ipaddr.parseCIDR(a.trim())
      : ([ipaddr.parse(a.trim()), ipaddr.parse(a.trim()).kind() === 'ipv4' ? 32 : 128] as [
          ipaddr.IPv4 | ipaddr.IPv6,
          number,
        ]),
  );
  return (addr) => {
    if (ranges.length === 0 || !ipaddr.isValid(addr)) return false;
    let ip = ipaddr.parse(addr);
    if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress())
      ip = (ip as ipaddr.IPv6).toIPv4Address();
    return ranges.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range, bits));
  };
}

/** Re-hashes kept in the state database and `console unlock` lines read from it (console.upgradeHashes). */
function createHashKeeping(opts: ConsoleAuthOptions, log: Logger) {
  const { clock } = opts;
  const unlockChecked = new Map<string, number>();
  const rehash = (opts.config.upgradeHashes ?? true) && opts.store !== undefined;
  const rehashTo = opts.rehashTo ?? SCRYPT_OWASP;
  let rehashing: Promise<void> = Promise.resolve();

  /** Whether `console unlock` lifted this lock since it was set (asked at most every UNLOCK_CHECK_MS per name). */
  async function liftedByCli(key: string, lock: LoginLock): Promise<boolean> {
    if (!opts.store || key.startsWith('?')) return false;
    const now = clock.now();
    if ((unlockChecked.get(key) ?? 0) > now - UNLOCK_CHECK_MS) return false;
    if (unlockChecked.size > 1000) unlockChecked.clear();
    unlockChecked.set(key, now);
    const at = await opts.store.lastUnlock(key).catch(() => null);
    return at !== null && at >= lock.since;
  }

  /** The hash to check a user's password against: the kept re-hash of the configured one, if any. */
  async function currentHash(u: {
    name: string;
    passwordHash?: string | undefined;
  }): Promise<string | undefined> {
    if (u.passwordHash === undefined || !rehash || !belowOwasp(u.passwordHash)) return u.passwordHash;
    const kept = await opts.store?.passwordHash(u.name).catch(() => null);
    return kept && kept.replaces === fingerprint(u.passwordHash) ? kept.hash : u.passwordHash;
  }

  /** After a login with a weak hash: re-hash off the request, keep it (one at a time). */
  function upgrade(
    u: { name: string; passwordHash?: string | undefined },
    password: string,
    used: string,
  ): void {
    if (!rehash || u.passwordHash === undefined || used !== u.passwordHash || !belowOwasp(u.passwordHash))
      return;
    const configured = u.passwordHash;
    rehashing = rehashing.then(async () => {
      try {
        const fresh = await hashPassword(password, rehashTo);
        await opts.store?.putPasswordHash(u.name, fingerprint(configured), fresh, clock.now());
        log.warn(
          { user: u.name, from: hashParams(configured), to: rehashTo },
          'console password re-hashed at OWASP scrypt parameters and kept in the state database; replace its ' +
            'console.users passwordHash with one from `console passwd`',
        );
      } catch (err) {
        log.warn({ err, user: u.name }, 'console password re-hash failed; the configured hash stays in use');
      }
    });
  }

  return { liftedByCli, currentHash, upgrade, settled: () => rehashing };
}

/**
 * Middleware of the JSON API: the trusted proxy's user, else HTTP Basic credentials (401 with
 * WWW-Authenticate when missing or wrong, 429 with Retry-After when throttled).
 */
function basicMiddleware(deps: {
  auth: () => ConsoleAuth;
  clock: Clock;
  locked: (name: string, client: string) => boolean;
}): RequestHandler {
  // Basic auth sends the password with every API call; scrypt costs tens of ms by design. A
  // credential verified in the last VERIFIED_TTL_MS is remembered as a keyed digest (per-process
  // random key; never the password), so automation does not pay it per call.
  const cacheKey = randomBytes(32);
  const verified = new Map<string, { user: string; until: number }>();
  const digest = (name: string, password: string): string =>
    createHmac('sha256', cacheKey).update(name).update('\0').update(password).digest('base64');
  return (req, res, next) => {
    const fromProxy = deps.auth().proxyUser(req);
    if (fromProxy) {
      setConsoleUser(res, fromProxy);
      next();
      return;
    }
    const challenge = (): void => {
      res.setHeader('WWW-Authenticate', 'Basic realm="boarding-connector console", charset="UTF-8"');
      res
        .status(401)
        .json({ error: 'authentication required: HTTP Basic with a console user (console.users)' });
    };
    const m = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(req.get('authorization') ?? '');
    if (!m) {
      challenge();
      return;
    }
    const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) {
      challenge();
      return;
    }
    const name = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const key = digest(name, password);
    const hit = verified.get(key);
    // A throttled client waits even with a remembered credential (the throttle is checked first).
    const known =
      hit && hit.until > deps.clock.now() && !deps.locked(name, deps.auth().clientAddress(req))
        ? deps.auth().user(hit.user)
        : null;
    if (known) {
      setConsoleUser(res, known);
      next();
      return;
    }
    deps
      .auth()
      .verifyLogin(name, password, deps.auth().clientAddress(req))
      .then(
        (r) => {
          if (r.ok) {
            if (verified.size >= 1000) verified.clear();
            verified.set(key, { user: r.user.name, until: deps.clock.now() + VERIFIED_TTL_MS });
            setConsoleUser(res, r.user);
            next();
          } else if (r.why === 'throttled') {
            res.setHeader('Retry-After', String(r.retryAfterSeconds));
            res.status(429).json({ error: throttledMessage(r), retryAfterSeconds: r.retryAfterSeconds });
          } else challenge();
        },
        (err: unknown) => next(err),
      );
  };
}

/** The throttle of failed logins, from console.loginThrottle (per user: four times the per-client limit). */
function loginThrottleOf(config: ConsoleAuthOptions['config']): ReturnType<typeof createLoginThrottle> {
  return createLoginThrottle({
    maxFailures: config.loginThrottle.maxFailures,
    maxFailuresPerUser: config.loginThrottle.maxFailuresPerUser ?? config.loginThrottle.maxFailures * 4,
    windowMs: config.loginThrottle.windowSeconds * 1000,
  });
}

/**
 * The hash unknown users are checked against: as costly as the configured ones (the first
 * configured hash's parameters), so they answer as slowly.
 */
function unknownUserHash(config: ConsoleAuthOptions['config'], rehashTo: ScryptParams): Promise<string> {
  const firstHash = config.users.find((u) => u.passwordHash !== undefined)?.passwordHash;
  const dummyHash = hashPassword(
    randomBytes(16).toString('hex'),
    (firstHash ? hashParams(firstHash) : null) ?? rehashTo,
  );
  dummyHash.catch(() => undefined);
  return dummyHash;
}

/**
 * Throttled logins counted by reason (the metric) and reported once per client, name and lock: a
 * flood of refused attempts must not become a flood of log lines and state database writes.
 */
function createThrottleReports(log: Logger, onEvent: ConsoleAuthOptions['onEvent']) {
  const counts: Record<ThrottleReason, number> = { address_locked: 0, address_busy: 0, user_ceiling: 0 };
  const reported = new Map<string, number>();
  const firstOf = (key: string, now: number, forMs: number): boolean => {
    if ((reported.get(key) ?? 0) > now) return false;
    if (reported.size > 10_000) reported.clear();
    reported.set(key, now + forMs);
    return true;
  };
  return {
    counts,
    locked(who: string, key: string, client: string, now: number, waitMs: number): void {
      counts.address_locked++;
      if (!firstOf(`${client}\0${key}`, now, waitMs)) return;
      log.warn({ user: who, client, lockedFrom: 'this address' }, 'console login throttled');
      onEvent?.('login_throttled', who, { client });
    },
    busy(client: string, now: number): void {
      counts.address_busy++;
      if (!firstOf(`${client}\0busy`, now, 60_000)) return;
      log.warn(
        { client },
        'console login refused before its password was checked: too many logins from this address at once',
      );
    },
    refused(who: string, client: string, lock: LoginLock | null): void {
      const held = lock
        ? lock.client === null
          ? { slowed: 'every address (per-user ceiling)' }
          : { locked: 'this address' }
        : {};
      log.warn(
        { user: who, client, ...held, ...(lock ? { until: new Date(lock.until).toISOString() } : {}) },
        'console login refused',
      );
      onEvent?.('login_failed', who, { client });
    },
  };
}

export function createConsoleAuth(opts: ConsoleAuthOptions): ConsoleAuth {
  const { config, clock } = opts;
  const log = opts.logger.child({ component: 'console-auth' });
  const users = new Map(config.users.map((u) => [userNameKey(u.name), u]));
  const throttle = loginThrottleOf(config);
  const rehashTo = opts.rehashTo ?? SCRYPT_OWASP;
  const gate = createFairGate(SCRYPT_CONCURRENCY, SCRYPT_QUEUE, SCRYPT_PER_CLIENT);
  const ceilingDelayMs = opts.ceilingDelayMs ?? CEILING_DELAY_MS;
  const reports = createThrottleReports(log, opts.onEvent);
  const isTrustedProxy = trustedProxy(config.proxy?.addresses ?? []);
  // Per process, never stored: the digest of a name that is no user cannot be turned back into it.
  const nameKeyKey = randomBytes(32);
  const dummyHash = unknownUserHash(config, rehashTo);

  const resolveUser = (name: string) => users.get(userNameKey(name));
  const toUser = (name: string): ConsoleUser | null => {
    const u = resolveUser(name);
    return u ? { name: u.name, roles: [...u.roles] as ConsoleRole[] } : null;
  };
  /** The throttle's key of a typed name: a user's normalised name, else a keyed digest. */
  const throttleKey = (name: string): string =>
    resolveUser(name)
      ? userNameKey(name)
      : `?${createHmac('sha256', nameKeyKey).update(userNameKey(name)).digest('base64url').slice(0, 16)}`;
  const auditName = (name: string): string => {
    const u = resolveUser(name);
    if (u) return u.name;
    return `(not a user: #${createHmac('sha256', nameKeyKey).update(userNameKey(name)).digest('hex').slice(0, 8)})`;
  };

  const { liftedByCli, currentHash, upgrade, settled } = createHashKeeping(opts, log);

  const clientAddress = (req: Request): string => req.socket.remoteAddress ?? 'unknown';

  const auth: ConsoleAuth = {
    enabled: config.users.length > 0 || config.proxy !== undefined,
    throttled: () => ({ ...reports.counts }),
    user: toUser,
    clientAddress,
    resolve: toUser,
    auditName,
    settled,
    unlock(name) {
      const u = resolveUser(name);
      if (!u) return 0;
      const n = throttle.unlock(userNameKey(u.name));
      log.info({ user: u.name, locks: n }, 'console login lock lifted');
      return n;
    },
    locks() {
      return throttle.locks(clock.now()).map((l) => ({
        user: users.get(l.name)?.name ?? l.name,
        client: l.client,
        since: l.since,
        until: l.until,
      }));
    },
    async verifyLogin(name, password, client) {
      const key = throttleKey(name);
      const who = auditName(name);
      let held = throttle.check(key, client, clock.now());
      const anyLock = held.lock ?? held.slowed;
      if (anyLock && (await liftedByCli(key, anyLock))) {
        throttle.unlock(key);
        log.info({ user: who }, 'console login lock lifted by `console unlock`');
        held = throttle.check(key, client, clock.now());
      }
      const now = clock.now();
      if (held.waitMs > 0) {
        reports.locked(who, key, client, now, held.waitMs);
        return {
          ok: false,
          why: 'throttled',
          reason: 'locked',
          retryAfterSeconds: Math.max(1, Math.ceil(held.waitMs / 1000)),
        };
      }
      if (held.slowed) {
        // Over the per-user ceiling: slowed, never refused (an address that did not fail still gets in).
        reports.counts.user_ceiling++;
        await clock.sleep(ceilingDelayMs);
      }
      const u = resolveUser(name);
      const ok = await gate(client, async () => {
        const hash = u ? await currentHash(u) : undefined;
        const good =
          (await verifyPassword(password, hash ?? (await dummyHash))) &&
          u !== undefined &&
          hash !== undefined;
        if (good && u && hash) upgrade(u, password, hash);
        return good;
      });
      if (ok === 'busy') {
        reports.busy(client, now);
        return { ok: false, why: 'throttled', reason: 'busy', retryAfterSeconds: 2 };
      }
      if (!ok) {
        reports.refused(who, client, throttle.fail(key, u !== undefined, client, clock.now()));
        return { ok: false, why: 'invalid' };
      }
      throttle.succeeded(key, client);
      return { ok: true, user: toUser(name) as ConsoleUser };
    },
    proxyUser(req) {
      const header = config.proxy?.userHeader;
      if (header === undefined) return null;
      const value = req.get(header);
      if (value === undefined || value.trim() === '') return null;
      const addr = clientAddress(req);
      if (!isTrustedProxy(addr)) {
        log.warn(
          { client: addr, header },
          'console: proxy user header from an address not in console.proxy.addresses ignored',
        );
        return null;
      }
      const user = toUser(value.trim());
      if (!user)
        log.warn(
          { client: addr, user: auditName(value.trim()) },
          'console: the proxy named a user not in console.users; refused',
        );
      return user;
    },
    basic: basicMiddleware({
      auth: () => auth,
      clock,
      locked: (name, client) => throttle.check(throttleKey(name), client, clock.now()).waitMs > 0,
    }),
  };
  return auth;
}
