import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { every, type Clock, type Timer } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { withLinkedSignal } from '../../lib/signals.js';
import type { StoreDb } from '../sql.js';
import { FencedOut, type Fence, type FenceScope } from './fence.js';

/**
 * Leadership with fencing (issue 26), one class for both engines.
 *
 * A lease row (name, holder, epoch, expiry) decided on the DATABASE's clock by a LeaseBackend
 * (PostgreSQL: leader_lease, src/store/leadership/pg.ts; SQLite: leases, src/store/leadership/leases.ts):
 * - acquire succeeds only when the row is free (released) or expired, and increments the epoch;
 * - renew succeeds only for the same holder AND epoch, and only before expiry;
 * - release frees the row at once (PostgreSQL also NOTIFYs the standbys: a hint; they poll, which
 *   is the rule, so a lost notification costs at most one poll interval).
 *
 * Every state-changing transaction of the leader's work runs inside `guard()`: the store checks
 * holder, epoch and expiry in the same transaction (sql.ts, the fence), so a stale leader's write
 * changes 0 rows (FencedOut) and it steps down.
 *
 * The process never compares its own clock with the database's. Its only use of the local clock is
 * the trust deadline: renew START (before the statement is sent) + TTL − margin. The database's
 * expiry is set later (when the renew runs) to its own now + TTL, so as long as the two clocks run
 * at about the same RATE (not the same time) the local deadline comes first. After it the replica
 * stops trusting its lease without asking the database: the term's AbortSignal aborts the external
 * calls in flight (core writes, acks), and `guard` refuses to start more.
 */

export interface LeaseTerm {
  name: string;
  holder: string;
  epoch: number;
}

export interface LeaseRow {
  name: string;
  holder: string | null;
  epoch: number;
  /** Milliseconds until expiry on the database clock (negative: expired or released). */
  expiresInMs: number;
}

/** The four statements of a lease, on one engine's clock. */
export interface LeaseBackend {
  /** Takes the lease when free or expired, epoch + 1; null when someone else holds it. */
  acquire(name: string, holder: string, ttlMs: number): Promise<{ epoch: number } | null>;
  /** Extends the lease only for the same holder and epoch, before expiry. */
  renew(term: LeaseTerm, ttlMs: number): Promise<boolean>;
  /** Frees the lease (same holder and epoch). */
  release(term: LeaseTerm): Promise<boolean>;
  read(name: string): Promise<LeaseRow | null>;
  /**
   * Calls fn when a release is announced (PostgreSQL LISTEN); returns the unsubscribe. onDrop: the
   * listening connection died (polling carries on; the next poll listens again). Optional.
   */
  listen?(name: string, fn: () => void, onDrop: () => void): Promise<() => void>;
}

export type { LeaveReason } from './fence.js';

export type Role = 'leader' | 'standby';

export interface LeadershipOptions {
  /** The lease's name: one per leadership (e.g. 'boarding'). */
  name: string;
  /** Unique per process incarnation (host:pid:random): a restarted process is a new holder. */
  holder: string;
  clock: Clock;
  logger?: Logger;
  /** Lease length on the database clock. Default 6 s (store.leadership.ttlMs). */
  ttlMs?: number;
  /** Renew (leader) and poll (standby) interval. Default 1.5 s (store.leadership.renewEveryMs). */
  renewEveryMs?: number;
  /**
   * Subtracted from the local trust deadline: the clock-rate drift and scheduling delay the
   * replica tolerates. Default 2 s (must leave TTL − margin > renewEveryMs).
   */
  marginMs?: number;
  /** Called on every role change (after the change). */
  onChange?: (role: Role, term: LeaseTerm | null) => void;
  /**
   * PostgreSQL: the server ends a fenced transaction left idle this long
   * (idle_in_transaction_session_timeout), so a leader paused inside one cannot hold the lease
   * row's lock and block a takeover for ever. Default ttlMs.
   */
  fenceIdleTimeoutMs?: number;
}

/** After the expiry read on the database clock, a standby waits this much more (rounding, the statement). */
const WAKE_SLACK_MS = 25;
/** The shortest wake-up: a lease that expires now is tried again after this, never in a tight loop. */
const WAKE_MIN_MS = 20;

interface Current {
  term: LeaseTerm;
  /** Process-clock ms after which this replica stops trusting the lease. */
  trustUntil: number;
  /** Aborted when the term ends (step-down, trust deadline, release). */
  controller: AbortController;
  deadline: Timer;
}

/**
 * host:pid:instance — unique per process incarnation (and per store it opened); `holderParts`
 * reads it back. With a PostgreSQL store the instance is the store's (its sessions'
 * application_name), so a successor can end a stale holder's sessions.
 */
export function newHolderId(instance: string = randomUUID().slice(0, 8)): string {
  return `${hostname()}:${process.pid}:${instance}`;
}

/** The host, pid and instance of a holder id made by newHolderId (null parts when it is another shape). */
export function holderParts(holder: string): {
  host: string | null;
  pid: number | null;
  instance: string | null;
} {
  const m = /^(.*):(\d+):([^:]*)$/.exec(holder);
  return m
    ? { host: m[1] as string, pid: Number(m[2]), instance: m[3] as string }
    : { host: null, pid: null, instance: null };
}

export class Leadership {
  readonly name: string;
  readonly holder: string;
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly marginMs: number;
  protected current: Current | null = null;
  private loop: Timer | null = null;
  /** A standby's one-shot try at the moment the holder's lease expires (sooner than the next poll). */
  private wake: Timer | null = null;
  private unlisten: (() => void) | null = null;
  private listening = false;
  private busy: Promise<void> | null = null;
  private stopped = false;
  private takeovers = 0;
  /** The last database failure logged: a database down for an hour is one line, not 720. */
  private lastFailure: string | null = null;
  private readonly listeners = new Set<(role: Role, term: LeaseTerm | null) => void>();

  constructor(
    protected readonly backend: LeaseBackend,
    protected readonly opts: LeadershipOptions,
  ) {
    this.name = opts.name;
    this.holder = opts.holder;
    this.ttlMs = opts.ttlMs ?? 6_000;
    this.renewEveryMs = opts.renewEveryMs ?? 1_500;
    this.marginMs = opts.marginMs ?? Math.min(2_000, Math.floor(this.ttlMs / 5));
    if (this.ttlMs - this.marginMs <= this.renewEveryMs) {
      throw new Error(
        `leadership: ttlMs (${this.ttlMs}) − marginMs (${this.marginMs}) ` +
          `must exceed renewEveryMs (${this.renewEveryMs})`,
      );
    }
    if (opts.onChange) this.listeners.add(opts.onChange);
  }

  get role(): Role {
    return this.trusted() ? 'leader' : 'standby';
  }

  /** The term this replica leads, while it still trusts it; else null. */
  get term(): LeaseTerm | null {
    return this.trusted() ? (this.current?.term ?? null) : null;
  }

  /** Aborted when the current term ends; null when not leader. External calls take it. */
  get signal(): AbortSignal | null {
    return this.trusted() ? (this.current?.controller.signal ?? null) : null;
  }

  /** How many times this replica became leader. */
  get acquisitions(): number {
    return this.takeovers;
  }

  /** Subscribes to role changes; returns the unsubscribe. */
  onChange(fn: (role: Role, term: LeaseTerm | null) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The lease row as the database sees it now (who leads, which epoch): for status and messages. */
  read(): Promise<LeaseRow | null> {
    return this.backend.read(this.name);
  }

  /** true while the local trust deadline has not passed (no database round trip). */
  trusted(): boolean {
    return this.current !== null && this.opts.clock.now() < this.current.trustUntil;
  }

  /**
   * Right before an external call: true while the term is trusted. Past the deadline it steps down
   * at once (aborting the term's signal) instead of waiting for the deadline's timer: a process
   * resumed after a pause (SIGSTOP, a long GC) runs its I/O callbacks before its overdue timers,
   * and one of them could otherwise send the next call of a term that is already over.
   */
  checkTrust(): boolean {
    if (this.current !== null && !this.trusted()) this.stepDown('trust_expired');
    return this.trusted();
  }

  /** Milliseconds of trust left. */
  trustLeftMs(): number {
    return this.current === null ? 0 : Math.max(0, this.current.trustUntil - this.opts.clock.now());
  }

  /** One attempt to become leader (standby) or stay leader (leader). Serialised. */
  tick(): Promise<void> {
    if (this.busy) return this.busy;
    this.busy = this.step().finally(() => {
      this.busy = null;
    });
    return this.busy;
  }

  private async step(): Promise<void> {
    if (this.stopped) return;
    const started = this.opts.clock.now();
    const cur = this.current;
    try {
      await this.stepOnce(cur, started);
      if (this.lastFailure !== null) {
        this.lastFailure = null;
        this.opts.logger?.info({ lease: this.name }, 'leadership: the database answers again');
      }
    } catch (err) {
      // Database unreachable: keep what we have until the trust deadline (its timer steps down).
      const message = (err as Error).message;
      if (message !== this.lastFailure) {
        this.lastFailure = message;
        this.opts.logger?.warn(
          { err: { message }, lease: this.name },
          'leadership: database call failed (logged once until it answers again)',
        );
      }
    }
  }

  private async stepOnce(cur: Current | null, started: number): Promise<void> {
    if (cur !== null) {
      if (await this.backend.renew(cur.term, this.ttlMs)) {
        if (this.current === cur) this.trust(cur, started);
        return;
      }
      if (this.current === cur) this.stepDown('lease_lost');
    }
    const got = await this.backend.acquire(this.name, this.holder, this.ttlMs);
    if (got === null) {
      await this.wakeAtExpiry();
      return;
    }
    if (this.stopped) {
      await this.backend.release({ name: this.name, holder: this.holder, epoch: got.epoch });
      return;
    }
    this.takeovers += 1;
    const term: LeaseTerm = { name: this.name, holder: this.holder, epoch: got.epoch };
    const next: Current = {
      term,
      trustUntil: 0,
      controller: new AbortController(),
      deadline: { cancel: () => {} },
    };
    this.current = next;
    this.trust(next, started);
    this.opts.logger?.info({ lease: term.name, epoch: term.epoch }, 'leadership acquired');
    this.emit('leader', term);
  }

  /**
   * A standby that found the lease held tries again the moment it expires on the database's clock
   * (read now, so the wait is measured by that clock; only the elapsed time is local), instead of
   * at its next poll: after a leader dies, the takeover waits for the lease's expiry and no poll
   * interval on top (issue 44: failover ≤ 10 s). The acquisition itself is still decided by the
   * database, so a wake-up that comes early finds the lease held and schedules the next one.
   */
  private async wakeAtExpiry(): Promise<void> {
    const row = await this.backend.read(this.name);
    if (row === null || this.stopped || this.current !== null) return;
    const inMs = Math.max(WAKE_MIN_MS, Math.ceil(row.expiresInMs) + WAKE_SLACK_MS);
    if (inMs >= this.renewEveryMs) return; // the regular poll comes first
    this.wake?.cancel();
    this.wake = this.opts.clock.timeout(inMs, () => {
      this.wake = null;
      if (this.current === null) void this.tick();
    });
  }

  private emit(role: Role, term: LeaseTerm | null): void {
    for (const l of this.listeners) {
      try {
        l(role, term);
      } catch (err) {
        this.opts.logger?.warn(
          { err: { message: (err as Error).message } },
          'leadership: a role listener failed',
        );
      }
    }
  }

  private trust(cur: Current, renewStart: number): void {
    cur.trustUntil = renewStart + this.ttlMs - this.marginMs;
    cur.deadline.cancel();
    cur.deadline = this.opts.clock.timeout(Math.max(0, cur.trustUntil - this.opts.clock.now()), () => {
      if (this.current === cur) this.stepDown('trust_expired');
    });
  }

  /** Leaves the term locally (no database call): in-flight external calls are aborted. */
  stepDown(reason: 'trust_expired' | 'lease_lost' | 'released' = 'lease_lost'): void {
    const cur = this.current;
    if (cur === null) return;
    this.current = null;
    cur.deadline.cancel();
    cur.controller.abort(
      reason === 'released' ? new Error('leadership released') : new FencedOut(cur.term, null, { reason }),
    );
    if (reason === 'released')
      this.opts.logger?.info({ lease: cur.term.name, epoch: cur.term.epoch }, 'leadership released');
    else
      this.opts.logger?.warn(
        { lease: cur.term.name, epoch: cur.term.epoch, reason },
        'leadership lost: stepping down',
      );
    this.emit('standby', null);
  }

  /** The fence of the current term, or null when this replica does not lead (or no longer trusts it). */
  fence(): Fence | null {
    const t = this.term;
    return t === null ? null : { name: t.name, holder: t.holder, epoch: t.epoch };
  }

  /**
   * The store scope of the leader's work: every write transaction started inside `guard(fn)` (by
   * any repository, however deep) checks this term's holder, epoch and expiry in the same
   * transaction; a write after the term ended changes nothing (FencedOut) and this replica steps
   * down. Throws FencedOut at once when not leading.
   */
  guard<T>(db: StoreDb, fn: () => Promise<T>): Promise<T> {
    const start = this.term;
    if (start === null) return Promise.reject(new FencedOut(null, null, { reason: 'not_leader' }));
    const scope: FenceScope = {
      name: this.name,
      holder: this.holder,
      current: () => {
        // Only the term the guarded work started in: a later term (a re-acquisition after a
        // step-down) is a new leadership, and the old work must not write under it.
        const t = this.term;
        return t !== null && t.epoch === start.epoch
          ? { name: t.name, holder: t.holder, epoch: t.epoch }
          : null;
      },
      onFencedOut: () => {
        if (this.current?.term.epoch === start.epoch) this.stepDown('lease_lost');
      },
      idleTimeoutMs: this.opts.fenceIdleTimeoutMs ?? this.ttlMs,
    };
    return db.withFence(scope, fn);
  }

  /**
   * An external call (a core write, an ack) made by the leader: started only when the trust left
   * covers its timeout, and given a signal that aborts at the timeout or when the term ends,
   * whichever comes first. So no call of this term is still running after the local trust
   * deadline, which comes before the database lets another replica take over.
   */
  async callWithinTrust<T>(timeoutMs: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const cur = this.current;
    if (cur === null || !this.trusted())
      throw new FencedOut(cur?.term ?? null, null, { reason: cur === null ? 'not_leader' : 'trust_expired' });
    if (this.trustLeftMs() <= timeoutMs) throw new FencedOut(cur.term, null, { reason: 'trust_too_short' });
    const timeout = new AbortController();
    const timer = this.opts.clock.timeout(timeoutMs, () =>
      timeout.abort(new Error(`call timed out after ${timeoutMs} ms`)),
    );
    try {
      return await withLinkedSignal([cur.controller.signal, timeout.signal], fn);
    } finally {
      timer.cancel();
    }
  }

  /** Renews or polls every renewEveryMs; a release notification makes a standby try at once. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.listen();
    this.loop = every(this.opts.clock, this.renewEveryMs, () => {
      if (this.unlisten === null) void this.listen();
      void this.tick();
    });
    await this.tick();
  }

  private async listen(): Promise<void> {
    if (this.backend.listen === undefined || this.listening || this.stopped || this.unlisten !== null) return;
    this.listening = true;
    try {
      let dropped = false;
      let off: (() => void) | null = null;
      off = await this.backend.listen(
        this.name,
        () => {
          if (this.current === null) void this.tick();
        },
        () => {
          dropped = true;
          if (off !== null && this.unlisten === off) this.unlisten = null;
        },
      );
      if (dropped) return;
      if (this.stopped) off();
      else this.unlisten = off;
    } catch (err) {
      this.opts.logger?.warn(
        { err: { message: (err as Error).message } },
        'leadership: LISTEN failed; polling only',
      );
    } finally {
      this.listening = false;
    }
  }

  /** Graceful stop: releases the lease at once (the standby is notified) and stops polling. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.loop?.cancel();
    this.loop = null;
    this.wake?.cancel();
    this.wake = null;
    await this.busy;
    const cur = this.current;
    if (cur !== null) {
      this.stepDown('released');
      try {
        await this.backend.release(cur.term);
      } catch (err) {
        this.opts.logger?.warn(
          { err: { message: (err as Error).message } },
          'leadership: release failed; the lease expires on its own',
        );
      }
    }
    const off = this.unlisten;
    this.unlisten = null;
    off?.();
  }
}
