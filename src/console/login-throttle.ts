/**
 * The throttle of failed console logins: it stops a guesser, not the team.
 *
 * - Per user name AND client address: `maxFailures` failures of one name from one address in the
 *   window lock that name from that address. Other names from the same address (a whole team
 *   behind the bank's proxy) and the same name from other addresses go on.
 * - Per user name from any address: `maxFailuresPerUser` failures put the name under a ceiling
 *   that slows every attempt of it (the caller delays them), never blocks one: locking the name
 *   everywhere let anyone who reaches the login page lock the approvers out (issue 43 F10). An
 *   address that has not failed still logs in; a guesser spread over addresses still meets the
 *   per-address locks and the delay.
 * - Bounded memory that never drops an active lock under a flood: failure counters are evicted
 *   oldest first beyond MAX_COUNTERS (unknown names before configured users'), locks of configured
 *   users are never evicted, and locks of names that are no user (they guard no account) are kept
 *   up to MAX_STRANGER_LOCKS, oldest dropped first.
 * - A lock ends after the window, or when lifted (`unlock`: an approver in the console, or `console
 *   unlock NAME` through the audit log, see auth.ts).
 *
 * Names arrive as keys (lib/user-name.ts userNameKey for a configured user, a keyed digest for any
 * other name): nothing here holds what someone typed.
 */

export const MAX_COUNTERS = 20_000;
export const MAX_STRANGER_LOCKS = 10_000;

export interface ThrottleLimits {
  maxFailures: number;
  maxFailuresPerUser: number;
  windowMs: number;
}

export interface LoginLock {
  /** The name's key (a configured user's normalised name). */
  name: string;
  /** null: the per-user ceiling (every address slowed, none locked). */
  client: string | null;
  since: number;
  until: number;
}

interface Lock extends LoginLock {
  known: boolean;
}

interface Counter {
  times: number[];
  known: boolean;
}

export interface LoginThrottle {
  /**
   * Milliseconds the name must wait from this client (0: go ahead) and the lock that holds it;
   * `slowed`: the name is over its per-user ceiling (go ahead, but slowly), with that ceiling.
   */
  check(
    name: string,
    client: string,
    now: number,
  ): { waitMs: number; lock: LoginLock | null; slowed: LoginLock | null };
  /** Counts a failure; returns the lock it set, if this failure set one. */
  fail(name: string, known: boolean, client: string, now: number): LoginLock | null;
  /** A login succeeded: the failures of this name from this client are forgotten. */
  succeeded(name: string, client: string): void;
  /** Lifts every lock (and forgets every failure) of a name; how many locks there were. */
  unlock(name: string): number;
  /** Active locks of configured users (for the status page), newest first. */
  locks(now: number): LoginLock[];
  /** Sizes, for tests and metrics. */
  size(): { counters: number; locks: number };
}

const pairKey = (name: string, client: string): string => `p\0${name}\0${client}`;
const userKey = (name: string): string => `u\0${name}`;

export function createLoginThrottle(limits: ThrottleLimits): LoginThrottle {
  const counters = new Map<string, Counter>();
  const locks = new Map<string, Lock>();
  let strangerLocks = 0;

  function liveLock(key: string, now: number): Lock | null {
    const l = locks.get(key);
    if (!l) return null;
    if (l.until > now) return l;
    dropLock(key);
    return null;
  }

  function dropLock(key: string): void {
    const l = locks.get(key);
    if (!l) return;
    locks.delete(key);
    if (!l.known) strangerLocks--;
  }

  function count(key: string, known: boolean, now: number): number {
    const c = counters.get(key);
    const times = (c?.times ?? []).filter((t) => t > now - limits.windowMs);
    times.push(now);
    // Re-inserted so the map's order is least recently failed first (eviction takes the front).
    counters.delete(key);
    counters.set(key, { times, known: known || (c?.known ?? false) });
    return times.length;
  }

  function evictCounters(): void {
    if (counters.size <= MAX_COUNTERS) return;
    // Names that are no user go first; a configured user's counters only when nothing else is left.
    for (const [k, c] of counters) {
      if (counters.size <= MAX_COUNTERS) return;
      if (!c.known) counters.delete(k);
    }
    for (const k of counters.keys()) {
      if (counters.size <= MAX_COUNTERS) return;
      counters.delete(k);
    }
  }

  function setLock(key: string, lock: Lock): void {
    dropLock(key);
    locks.set(key, lock);
    if (!lock.known) {
      strangerLocks++;
      if (strangerLocks > MAX_STRANGER_LOCKS) {
        for (const [k, l] of locks) {
          if (strangerLocks <= MAX_STRANGER_LOCKS) break;
          if (!l.known) dropLock(k);
        }
      }
    }
  }

  return {
    check(name, client, now) {
      const view = (l: Lock | null): LoginLock | null =>
        l ? { name: l.name, client: l.client, since: l.since, until: l.until } : null;
      const pair = liveLock(pairKey(name, client), now);
      return {
        waitMs: pair ? pair.until - now : 0,
        lock: view(pair),
        slowed: view(liveLock(userKey(name), now)),
      };
    },
    fail(name, known, client, now) {
      let set: Lock | null = null;
      const pair = pairKey(name, client);
      if (count(pair, known, now) >= limits.maxFailures && !liveLock(pair, now)) {
        set = { name, client, since: now, until: now + limits.windowMs, known };
        setLock(pair, set);
      }
      const user = userKey(name);
      if (count(user, known, now) >= limits.maxFailuresPerUser && !liveLock(user, now)) {
        set = { name, client: null, since: now, until: now + limits.windowMs, known };
        setLock(user, set);
      }
      evictCounters();
      return set ? { name: set.name, client: set.client, since: set.since, until: set.until } : null;
    },
    succeeded(name, client) {
      counters.delete(pairKey(name, client));
    },
    unlock(name) {
      let n = 0;
      const prefixes = [`p\0${name}\0`, userKey(name)];
      for (const k of [...locks.keys()]) {
        if (k === prefixes[1] || k.startsWith(prefixes[0] as string)) {
          dropLock(k);
          n++;
        }
      }
      for (const k of [...counters.keys()])
        if (k === prefixes[1] || k.startsWith(prefixes[0] as string)) counters.delete(k);
      return n;
    },
    locks(now) {
      const out: LoginLock[] = [];
      for (const [k, l] of locks) {
        if (!l.known) continue;
        if (l.until <= now) {
          dropLock(k);
          continue;
        }
        out.push({ name: l.name, client: l.client, since: l.since, until: l.until });
      }
      return out.sort((a, b) => b.since - a.since);
    },
    size: () => ({ counters: counters.size, locks: locks.size }),
  };
}
