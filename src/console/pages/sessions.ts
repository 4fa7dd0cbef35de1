/**
 * Browser sessions of the console, kept on the server (memory of the daemon process): the cookie
 * carries only a random id. A session ends on logout, after `idleMs` without a request, or when the
 * daemon restarts (people log in again; nothing else is lost). Each session has its own CSRF token
 * (synchronizer token): every form carries it, every POST must send it back.
 *
 * The session also keeps what must not travel in URLs: the queue's search text (a borrower name is
 * PII; in a query string it would land in access logs and browser history).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';

export interface BrowserSession {
  /** The user's name as configured (console.users[].name). */
  readonly user: string;
  readonly roles: readonly string[];
  readonly csrfToken: string;
  readonly createdAt: number;
  lastSeenAt: number;
  /** The exception queue's search text (loan id, loan number or borrower name), kept off the URL. */
  search: string;
  /** A one-shot message shown on the next page (after a POST → redirect). */
  flash: { kind: 'ok' | 'error'; text: string } | null;
}

export interface SessionStore {
  /** A new session for a user who just logged in; returns the cookie value. */
  create(user: string, roles: readonly string[]): { id: string; session: BrowserSession };
  /** The live session of a cookie value (and marks it used), or null (unknown, expired). */
  get(id: string | undefined): BrowserSession | null;
  destroy(id: string | undefined): void;
  /** Ends every session of a user (e.g. removed from the config). */
  destroyUser(user: string): number;
  /** Whether a submitted token is this session's (constant time). */
  csrfMatches(session: BrowserSession, submitted: unknown): boolean;
  size(): number;
}

export interface SessionStoreOptions {
  clock: Clock;
  /** A session unused this long is gone (default 30 minutes). */
  idleMs?: number;
  /** Whatever the idle time, a session ends this long after login (default 12 hours). */
  absoluteMs?: number;
  /** At most this many live sessions; the least recently used goes first (default 1,000). */
  maxSessions?: number;
}

export const DEFAULT_IDLE_MS = 30 * 60_000;
const DEFAULT_ABSOLUTE_MS = 12 * 60 * 60_000;

/** Sessions are looked up by a hash of the cookie value: a heap dump does not hand out live cookies. */
const key = (id: string): string => createHash('sha256').update(id).digest('base64url');

export function createSessionStore(opts: SessionStoreOptions): SessionStore {
  const idleMs = opts.idleMs ?? DEFAULT_IDLE_MS;
  const absoluteMs = opts.absoluteMs ?? DEFAULT_ABSOLUTE_MS;
  const max = opts.maxSessions ?? 1_000;
  // Insertion order = least recently used first (a used session is moved to the end).
  const sessions = new Map<string, BrowserSession>();

  const expired = (s: BrowserSession, now: number): boolean =>
    now - s.lastSeenAt >= idleMs || now - s.createdAt >= absoluteMs;

  function sweep(now: number): void {
    for (const [k, s] of sessions) if (expired(s, now)) sessions.delete(k);
    while (sessions.size >= max) {
      const oldest = sessions.keys().next();
      if (oldest.done === true) break;
      sessions.delete(oldest.value);
    }
  }

  return {
    create(user, roles) {
      const now = opts.clock.now();
      sweep(now);
      const id = randomBytes(32).toString('base64url');
      const session: BrowserSession = {
        user,
        roles: [...roles],
        csrfToken: randomBytes(32).toString('base64url'),
        createdAt: now,
        lastSeenAt: now,
        search: '',
        flash: null,
      };
      sessions.set(key(id), session);
      return { id, session };
    },
    get(id) {
      if (typeof id !== 'string' || id.length < 16 || id.length > 128) return null;
      const k = key(id);
      const s = sessions.get(k);
      if (!s) return null;
      const now = opts.clock.now();
      if (expired(s, now)) {
        sessions.delete(k);
        return null;
      }
      s.lastSeenAt = now;
      sessions.delete(k);
      sessions.set(k, s);
      return s;
    },
    destroy(id) {
      if (typeof id === 'string') sessions.delete(key(id));
    },
    destroyUser(user) {
      let n = 0;
      for (const [k, s] of sessions) {
        if (s.user === user) {
          sessions.delete(k);
          n += 1;
        }
      }
      return n;
    },
    csrfMatches(session, submitted) {
      if (typeof submitted !== 'string') return false;
      const a = Buffer.from(session.csrfToken);
      const b = Buffer.from(submitted);
      return a.length === b.length && timingSafeEqual(a, b);
    },
    size: () => sessions.size,
  };
}
