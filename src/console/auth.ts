/**
 * Console authentication: users from config (console.users) with scrypt password hashes, the
 * optional trusted reverse proxy's user header, and the throttle of failed logins that HTTP Basic
 * auth (the JSON API) and the login form (the pages) share.
 *
 * Hashes: Node's built-in crypto.scrypt (OpenSSL's), a random 16-byte salt, parameters encoded in
 * the string (`scrypt$ln=15,r=8,p=1$<salt>$<hash>`, base64), compared in constant time. No
 * dependency to keep up to date and no native build; the parameters can be raised later without
 * invalidating existing hashes.
 */
import { createHmac, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import ipaddr from 'ipaddr.js';
import type { ConsoleConfig } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { ConsoleRole, ConsoleUser } from './service.js';

const SCRYPT_LN = 15;
const SCRYPT_R = 8;
const SCRYPT_P = 1;
const KEY_LEN = 32;
/** How long a verified Basic credential is remembered (keyed digest, in memory). */
const VERIFIED_TTL_MS = 5 * 60_000;

function scrypt(password: string, salt: Buffer, keyLen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCb(password.normalize('NFC'), salt, keyLen, opts, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

const scryptOpts = (ln: number, r: number, p: number): ScryptOptions => ({ N: 2 ** ln, r, p, maxmem: 256 * 2 ** ln * r + 1024 * 1024 });

/** The hash `console passwd` prints for a password. */
export async function hashPassword(password: string): Promise<string> {
  if (password.length === 0) throw new Error('the password is empty');
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, KEY_LEN, scryptOpts(SCRYPT_LN, SCRYPT_R, SCRYPT_P));
  return `scrypt$ln=${SCRYPT_LN},r=${SCRYPT_R},p=${SCRYPT_P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Whether `password` matches an encoded hash (false for a malformed one). */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const m = /^scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/.exec(encoded);
  if (!m) return false;
  const [ln, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (ln < 10 || ln > 20 || r < 1 || r > 32 || p < 1 || p > 16) return false;
  const salt = Buffer.from(m[4] as string, 'base64');
  const want = Buffer.from(m[5] as string, 'base64');
  if (want.length < 16) return false;
  const got = await scrypt(password, salt, want.length, scryptOpts(ln, r, p));
  return timingSafeEqual(got, want);
}

export type LoginOutcome =
  | { ok: true; user: ConsoleUser }
  | { ok: false; why: 'invalid' }
  | { ok: false; why: 'throttled'; retryAfterSeconds: number };

export interface ConsoleAuth {
  /**
   * Checks a name and password (Basic auth and the login form both come here), throttled per
   * client address and per user name: after console.loginThrottle.maxFailures failures in its
   * window, attempts are refused without checking the password until the window moves on.
   */
  verifyLogin(name: string, password: string, client: string): Promise<LoginOutcome>;
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

export interface ConsoleAuthOptions {
  config: Pick<ConsoleConfig, 'users' | 'proxy' | 'loginThrottle'>;
  clock: Clock;
  logger: Logger;
  /** Told about refused and throttled logins (the audit log). */
  onEvent?: (kind: 'login_failed' | 'login_throttled', name: string, detail: { client: string }) => void;
}

/** A hash no password matches, checked for unknown users so their answer takes as long. */
let dummyHash: Promise<string> | null = null;

export function createConsoleAuth(opts: ConsoleAuthOptions): ConsoleAuth {
  const { config, clock } = opts;
  const log = opts.logger.child({ component: 'console-auth' });
  const users = new Map(config.users.map((u) => [u.name, u]));
  const failures = new Map<string, number[]>();
  const throttleReported = new Map<string, number>();
  const windowMs = config.loginThrottle.windowSeconds * 1000;
  const max = config.loginThrottle.maxFailures;
  const proxyRanges = (config.proxy?.addresses ?? []).map((a) => (a.includes('/') ? ipaddr.parseCIDR(a.trim()) : ([ipaddr.parse(a.trim()), ipaddr.parse(a.trim()).kind() === 'ipv4' ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number])));

  const toUser = (name: string): ConsoleUser | null => {
    const u = users.get(name);
    return u ? { name: u.name, roles: [...u.roles] as ConsoleRole[] } : null;
  };

  function recent(key: string, now: number): number[] {
    const list = (failures.get(key) ?? []).filter((t) => t > now - windowMs);
    if (list.length === 0) failures.delete(key);
    else failures.set(key, list);
    return list;
  }

  function throttledFor(keys: string[], now: number): number {
    let wait = 0;
    for (const k of keys) {
      const list = recent(k, now);
      if (list.length >= max) wait = Math.max(wait, (list[list.length - max] as number) + windowMs - now);
    }
    return wait;
  }

  function fail(keys: string[], now: number): void {
    for (const k of keys) failures.set(k, [...recent(k, now), now]);
    // Bounded memory: a flood of distinct names or addresses never grows this without end.
    if (failures.size > 10_000) {
      for (const k of failures.keys()) {
        recent(k, now);
        if (failures.size <= 5_000) break;
      }
      if (failures.size > 10_000) failures.clear();
    }
  }

  function isTrustedProxy(addr: string): boolean {
    if (proxyRanges.length === 0 || !ipaddr.isValid(addr)) return false;
    let ip = ipaddr.parse(addr);
    if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
    return proxyRanges.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range, bits));
  }

  const clientAddress = (req: Request): string => req.socket.remoteAddress ?? 'unknown';

  // Basic auth sends the password with every API call; scrypt costs tens of ms by design. A
  // credential verified in the last VERIFIED_TTL_MS is remembered as a keyed digest (per-process
  // random key; never the password), so automation does not pay it per call.
  const cacheKey = randomBytes(32);
  const verified = new Map<string, { user: string; until: number }>();
  const digest = (name: string, password: string): string => createHmac('sha256', cacheKey).update(name).update('\0').update(password).digest('base64');

  const auth: ConsoleAuth = {
    enabled: config.users.length > 0 || config.proxy !== undefined,
    user: toUser,
    clientAddress,
    async verifyLogin(name, password, client) {
      const now = clock.now();
      const keys = [`addr:${client}`, `user:${name}`];
      const wait = throttledFor(keys, now);
      if (wait > 0) {
        // Logged and audited once per client and window: a flood of refused attempts must not
        // become a flood of log lines and state database writes.
        const reportKey = `${client}\0${name.slice(0, 64)}`;
        if ((throttleReported.get(reportKey) ?? 0) <= now) {
          if (throttleReported.size > 10_000) throttleReported.clear();
          throttleReported.set(reportKey, now + wait);
          log.warn({ user: name.slice(0, 64), client }, 'console login throttled');
          opts.onEvent?.('login_throttled', name.slice(0, 64), { client });
        }
        return { ok: false, why: 'throttled', retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)) };
      }
      const u = users.get(name);
      const hash = u?.passwordHash ?? (await (dummyHash ??= hashPassword(randomBytes(16).toString('hex'))));
      const ok = (await verifyPassword(password, hash)) && u !== undefined && u.passwordHash !== undefined;
      if (!ok) {
        fail(keys, clock.now());
        log.warn({ user: name.slice(0, 64), client }, 'console login refused');
        opts.onEvent?.('login_failed', name.slice(0, 64), { client });
        return { ok: false, why: 'invalid' };
      }
      failures.delete(`user:${name}`);
      return { ok: true, user: toUser(name) as ConsoleUser };
    },
    proxyUser(req) {
      const header = config.proxy?.userHeader;
      if (header === undefined) return null;
      const value = req.get(header);
      if (value === undefined || value.trim() === '') return null;
      const addr = clientAddress(req);
      if (!isTrustedProxy(addr)) {
        log.warn({ client: addr, header }, 'console: proxy user header from an address not in console.proxy.addresses ignored');
        return null;
      }
      const user = toUser(value.trim());
      if (!user) log.warn({ client: addr, user: value.trim().slice(0, 64) }, 'console: the proxy named a user not in console.users; refused');
      return user;
    },
    basic: (req, res, next) => {
      const fromProxy = auth.proxyUser(req);
      if (fromProxy) {
        setConsoleUser(res, fromProxy);
        next();
        return;
      }
      const challenge = (): void => {
        res.setHeader('WWW-Authenticate', 'Basic realm="boarding-connector console", charset="UTF-8"');
        res.status(401).json({ error: 'authentication required: HTTP Basic with a console user (console.users)' });
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
      const known = hit && hit.until > clock.now() && throttledFor([`addr:${clientAddress(req)}`, `user:${name}`], clock.now()) === 0 ? toUser(hit.user) : null;
      if (known) {
        setConsoleUser(res, known);
        next();
        return;
      }
      auth.verifyLogin(name, password, clientAddress(req)).then(
        (r) => {
          if (r.ok) {
            if (verified.size >= 1000) verified.clear();
            verified.set(key, { user: r.user.name, until: clock.now() + VERIFIED_TTL_MS });
            setConsoleUser(res, r.user);
            next();
          } else if (r.why === 'throttled') {
            res.setHeader('Retry-After', String(r.retryAfterSeconds));
            res.status(429).json({ error: `too many failed logins: try again in ${r.retryAfterSeconds} s` });
          } else challenge();
        },
        (err: unknown) => next(err),
      );
    },
  };
  return auth;
}
