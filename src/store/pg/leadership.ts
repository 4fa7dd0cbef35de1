import { every, type Clock, type Timer } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { inTransaction, type PgClient, type PgPool, type Queryable } from './pool.js';

/**
 * Leadership with fencing on PostgreSQL (issue 26, preview).
 *
 * A lease row (name, holder, epoch, expires_at) on the DATABASE clock only:
 * - acquire succeeds only when the row is free (released) or expired, and increments the epoch;
 * - renew succeeds only for the same holder AND epoch, and only before expiry (an expired lease is
 *   free: its holder must acquire again and gets a new epoch);
 * - release frees the row at once and NOTIFYs the standbys (a hint; they also poll, which is the
 *   rule, so a lost notification costs at most one poll interval).
 *
 * Every state-changing transaction runs through fenced(): inside the same transaction it locks the
 * lease row (FOR SHARE) and checks holder, epoch and expiry. A takeover is an UPDATE of that row,
 * so it waits for a fenced transaction in progress to commit (the old leader's write is ordered
 * before the takeover), and a fenced transaction that starts after a takeover finds a different
 * holder/epoch and changes nothing: FencedOutError, and the replica steps down.
 *
 * The process never compares its own clock with the database's. Its only use of the local clock is
 * the trust deadline: renew START (before the statement is sent) + TTL − margin. The database's
 * expiry is set later (when the renew runs) to its own now + TTL, so as long as the two clocks run
 * at about the same RATE (not the same time) the local deadline comes first. After it the replica
 * stops trusting its lease without asking the database: external calls (core writes, acks) must
 * not start, and the term's AbortSignal aborts those in flight.
 */

export const LEASE_CHANNEL = 'boarding_lease';

export interface LeaseTerm {
  name: string;
  holder: string;
  epoch: number;
}

export class FencedOutError extends Error {
  constructor(
    readonly term: LeaseTerm | null,
    readonly reason: 'not_leader' | 'trust_expired' | 'lease_lost' | 'trust_too_short',
  ) {
    super(
      reason === 'not_leader'
        ? 'not the leader: no fenced write'
        : reason === 'trust_too_short'
          ? `lease ${term?.name ?? ''} epoch ${term?.epoch ?? ''}: the trust left is shorter than the call's timeout; not starting it`
          : reason === 'trust_expired'
            ? `lease ${term?.name ?? ''} epoch ${term?.epoch ?? ''} past its local trust deadline: stepping down`
            : `lease ${term?.name ?? ''} epoch ${term?.epoch ?? ''} is no longer ours (taken over or expired): stepping down`,
    );
    this.name = 'FencedOutError';
  }
}

const msInterval = (ms: number): string => `${Math.max(0, Math.round(ms))} milliseconds`;

// ---- the statements (exported so tests can run them inside their own transactions) ----

/** One statement: takes the lease when free or expired, epoch + 1. null when someone holds it. */
export async function acquireLease(q: Queryable, name: string, holder: string, ttlMs: number): Promise<{ epoch: number; expiresAt: Date } | null> {
  const r = await q.query<{ epoch: string; expires_at: Date }>(
    `INSERT INTO leader_lease AS l (name, holder, epoch, acquired_at, renewed_at, expires_at)
       VALUES ($1, $2, 1, clock_timestamp(), clock_timestamp(), clock_timestamp() + $3::interval)
     ON CONFLICT (name) DO UPDATE
       SET holder = excluded.holder, epoch = l.epoch + 1, acquired_at = clock_timestamp(),
           renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $3::interval
       WHERE l.holder IS NULL OR l.expires_at <= clock_timestamp()
     RETURNING epoch, expires_at`,
    [name, holder, msInterval(ttlMs)],
  );
  const row = r.rows[0];
  return row ? { epoch: Number(row.epoch), expiresAt: row.expires_at } : null;
}

/** One statement: extends the lease only for the same holder and epoch, before expiry. */
export async function renewLease(q: Queryable, term: LeaseTerm, ttlMs: number): Promise<boolean> {
  const r = await q.query(
    `UPDATE leader_lease SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $4::interval
      WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()`,
    [term.name, term.holder, term.epoch, msInterval(ttlMs)],
  );
  return r.rowCount === 1;
}

/** One statement: frees the lease (same holder and epoch) and notifies the standbys. */
export async function releaseLease(q: Queryable, term: LeaseTerm): Promise<boolean> {
  const r = await q.query(
    `WITH freed AS (
       UPDATE leader_lease SET holder = NULL, expires_at = clock_timestamp()
        WHERE name = $1 AND holder = $2 AND epoch = $3 RETURNING name)
     SELECT pg_notify('${LEASE_CHANNEL}', name) FROM freed`,
    [term.name, term.holder, term.epoch],
  );
  return r.rowCount === 1;
}

/**
 * The fence, inside the caller's transaction: locks the lease row FOR SHARE and checks holder,
 * epoch and expiry. true: the lease is ours until COMMIT (a takeover waits for this transaction).
 */
export async function lockLease(tx: PgClient, term: LeaseTerm): Promise<boolean> {
  const r = await tx.query(
    `SELECT 1 FROM leader_lease
      WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()
      FOR SHARE`,
    [term.name, term.holder, term.epoch],
  );
  return r.rowCount === 1;
}

export interface LeaseRow {
  name: string;
  holder: string | null;
  epoch: number;
  /** Milliseconds until expiry on the database clock (negative: expired). */
  expiresInMs: number;
}

export async function readLease(q: Queryable, name: string): Promise<LeaseRow | null> {
  const r = await q.query<{ name: string; holder: string | null; epoch: string; expires_in_ms: number }>(
    `SELECT name, holder, epoch, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS expires_in_ms
       FROM leader_lease WHERE name = $1`,
    [name],
  );
  const row = r.rows[0];
  return row ? { name: row.name, holder: row.holder, epoch: Number(row.epoch), expiresInMs: row.expires_in_ms } : null;
}

// ---- the replica's view ----

export interface LeadershipOptions {
  pool: PgPool;
  /** The lease's name: one per leadership (e.g. 'daemon'). */
  name: string;
  /** Unique per process incarnation (host:pid:random): a restarted process is a new holder. */
  holder: string;
  clock: Clock;
  logger?: Logger;
  /** Lease length on the database clock. Default 15 s. */
  ttlMs?: number;
  /** Renew (leader) and poll (standby) interval. Default 5 s. */
  renewEveryMs?: number;
  /**
   * Subtracted from the local trust deadline: the clock-rate drift and scheduling delay the
   * replica tolerates. Default 2 s (must leave TTL − margin > renewEveryMs).
   */
  marginMs?: number;
  /**
   * The server ends a fenced transaction left idle this long (idle_in_transaction_session_timeout),
   * so a leader paused inside one cannot hold the lease row's lock and block a takeover for ever.
   * Default ttlMs.
   */
  fenceIdleTimeoutMs?: number;
  /** Called on every role change (after the change). */
  onChange?: (role: 'leader' | 'standby', term: LeaseTerm | null) => void;
}

interface Current {
  term: LeaseTerm;
  /** Process-clock ms after which this replica stops trusting the lease. */
  trustUntil: number;
  /** Aborted when the term ends (step-down, trust deadline, release). */
  controller: AbortController;
  deadline: Timer;
}

export class PgLeadership {
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly marginMs: number;
  private current: Current | null = null;
  private loop: Timer | null = null;
  private listener: PgClient | null = null;
  private dropListener: (() => void) | null = null;
  private listening = false;
  private busy: Promise<void> | null = null;
  private stopped = false;
  private takeovers = 0;

  constructor(private readonly opts: LeadershipOptions) {
    this.ttlMs = opts.ttlMs ?? 15_000;
    this.renewEveryMs = opts.renewEveryMs ?? 5_000;
    this.marginMs = opts.marginMs ?? 2_000;
    if (this.ttlMs - this.marginMs <= this.renewEveryMs) {
      throw new Error(`leadership: ttlMs (${this.ttlMs}) − marginMs (${this.marginMs}) must exceed renewEveryMs (${this.renewEveryMs})`);
    }
  }

  get role(): 'leader' | 'standby' {
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

  /** true while the local trust deadline has not passed (no database round trip). */
  trusted(): boolean {
    return this.current !== null && this.opts.clock.now() < this.current.trustUntil;
  }

  /** Milliseconds of trust left: an external call whose timeout is longer must not start. */
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
      if (cur !== null) {
        if (await renewLease(this.opts.pool, cur.term, this.ttlMs)) {
          if (this.current === cur) this.trust(cur, started);
          return;
        }
        this.stepDown('lease_lost');
      }
      const got = await acquireLease(this.opts.pool, this.opts.name, this.opts.holder, this.ttlMs);
      if (got === null || this.stopped) return;
      this.takeovers += 1;
      const term: LeaseTerm = { name: this.opts.name, holder: this.opts.holder, epoch: got.epoch };
      const next: Current = { term, trustUntil: 0, controller: new AbortController(), deadline: { cancel: () => {} } };
      this.current = next;
      this.trust(next, started);
      this.opts.logger?.info({ lease: term.name, epoch: term.epoch }, 'leadership acquired');
      this.opts.onChange?.('leader', term);
    } catch (err) {
      // Database unreachable: keep what we have until the trust deadline (its timer steps down).
      this.opts.logger?.warn({ err: { message: (err as Error).message }, lease: this.opts.name }, 'leadership: database call failed');
    }
  }

  private trust(cur: Current, renewStart: number): void {
    cur.trustUntil = renewStart + this.ttlMs - this.marginMs;
    cur.deadline.cancel();
    cur.deadline = this.opts.clock.timeout(cur.trustUntil - this.opts.clock.now(), () => {
      if (this.current === cur) this.stepDown('trust_expired');
    });
  }

  /** Leaves the term locally (no database call): in-flight external calls are aborted. */
  stepDown(reason: 'trust_expired' | 'lease_lost' | 'released' = 'lease_lost'): void {
    const cur = this.current;
    if (cur === null) return;
    this.current = null;
    cur.deadline.cancel();
    cur.controller.abort(reason === 'released' ? new Error('leadership released') : new FencedOutError(cur.term, reason));
    this.opts.logger?.warn({ lease: cur.term.name, epoch: cur.term.epoch, reason }, 'leadership lost: stepping down');
    this.opts.onChange?.('standby', null);
  }

  /**
   * Runs fn in one transaction that first locks and checks the lease (holder, epoch, expiry).
   * Throws FencedOutError (and steps down) when the lease is not ours: fn never runs, nothing is
   * written. Also refuses without a database call once the local trust deadline has passed.
   */
  async fenced<T>(fn: (tx: PgClient, term: LeaseTerm) => Promise<T>): Promise<T> {
    const cur = this.current;
    if (cur === null) throw new FencedOutError(null, 'not_leader');
    if (!this.trusted()) {
      this.stepDown('trust_expired');
      throw new FencedOutError(cur.term, 'trust_expired');
    }
    return inTransaction(this.opts.pool, async (tx) => {
      // A paused leader holding the lock must not block a takeover for ever: the server ends a
      // transaction left idle longer than the lease.
      await tx.query(`SET LOCAL idle_in_transaction_session_timeout = ${Math.round(this.opts.fenceIdleTimeoutMs ?? this.ttlMs)}`);
      if (!(await lockLease(tx, cur.term))) {
        if (this.current === cur) this.stepDown('lease_lost');
        throw new FencedOutError(cur.term, 'lease_lost');
      }
      return fn(tx, cur.term);
    });
  }

  /**
   * An external call (a core write, an ack) made by the leader: started only when the trust left
   * covers its timeout, and given a signal that aborts at the timeout or when the term ends,
   * whichever comes first. So no call of this term is still running after the local trust
   * deadline, which comes before the database lets another replica take over.
   */
  async callWithinTrust<T>(timeoutMs: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const cur = this.current;
    if (cur === null || !this.trusted()) throw new FencedOutError(cur?.term ?? null, cur === null ? 'not_leader' : 'trust_expired');
    if (this.trustLeftMs() <= timeoutMs) throw new FencedOutError(cur.term, 'trust_too_short');
    const timeout = new AbortController();
    const timer = this.opts.clock.timeout(timeoutMs, () => timeout.abort(new Error(`call timed out after ${timeoutMs} ms`)));
    try {
      return await fn(AbortSignal.any([cur.controller.signal, timeout.signal]));
    } finally {
      timer.cancel();
    }
  }

  /** Renews or polls every renewEveryMs; a release notification makes a standby try at once. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.listen();
    this.loop = every(this.opts.clock, this.renewEveryMs, () => {
      if (this.listener === null) void this.listen();
      void this.tick();
    });
    await this.tick();
  }

  private async listen(): Promise<void> {
    if (this.listening || this.stopped) return;
    this.listening = true;
    try {
      let client: PgClient;
      try {
        client = await this.opts.pool.connect();
      } catch (err) {
        this.opts.logger?.warn({ err: { message: (err as Error).message } }, 'leadership: LISTEN failed; polling only');
        return;
      }
      let dropped = false;
      const onNotification = (n: { channel: string; payload?: string | undefined }): void => {
        if (n.channel === LEASE_CHANNEL && n.payload === this.opts.name && this.current === null) void this.tick();
      };
      // The listening connection is destroyed, never handed back to the pool (it would carry the
      // LISTEN and these handlers to another user). A no-op error handler stays on it: a socket
      // error after the drop must not become an uncaught exception.
      const drop = (): void => {
        if (dropped) return;
        dropped = true;
        if (this.listener === client) this.listener = null;
        if (this.dropListener === drop) this.dropListener = null;
        client.off('notification', onNotification);
        client.release(true);
      };
      client.on('notification', onNotification);
      // The connection died (a restart, pg_terminate_backend): polling carries on, the next tick listens again.
      client.on('error', drop);
      try {
        await client.query(`LISTEN ${LEASE_CHANNEL}`);
      } catch (err) {
        drop();
        this.opts.logger?.warn({ err: { message: (err as Error).message } }, 'leadership: LISTEN failed; polling only');
        return;
      }
      if (this.stopped) {
        drop();
        return;
      }
      this.listener = client;
      this.dropListener = drop;
    } finally {
      this.listening = false;
    }
  }

  /** Graceful stop: releases the lease at once (the standby is notified) and stops polling. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.loop?.cancel();
    this.loop = null;
    await this.busy;
    const cur = this.current;
    if (cur !== null) {
      this.stepDown('released');
      try {
        await releaseLease(this.opts.pool, cur.term);
      } catch (err) {
        this.opts.logger?.warn({ err: { message: (err as Error).message } }, 'leadership: release failed; the lease expires on its own');
      }
    }
    this.dropListener?.();
  }
}
