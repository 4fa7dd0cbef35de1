/**
 * The fence (issue 26 point 2): every state-changing transaction of the leader re-checks, inside
 * the transaction, that the lease still has its holder and epoch and is unexpired on the database's
 * clock. A stale holder's write throws FencedOut and changes nothing. One error for every way a
 * replica finds it may not write (issue 34): the store's refusal and leadership's own refusals.
 */

export interface Fence {
  /** The lease's name (e.g. 'boarding'). */
  name: string;
  holder: string;
  epoch: number;
}

/** Why leadership refused before the database was asked (a term it no longer trusts). */
export type LeaveReason = 'not_leader' | 'trust_expired' | 'lease_lost' | 'trust_too_short';

/** What the lease row held when the store refused the write (null: no row). */
export type FoundLease = { holder: string | null; epoch: number; live: boolean } | null;

function leaveMessage(fence: Fence | null, reason: LeaveReason): string {
  const lease = `lease ${fence?.name ?? ''} epoch ${fence?.epoch ?? ''}`;
  switch (reason) {
    case 'not_leader':
      return 'not the leader: no fenced write';
    case 'trust_too_short':
      return `${lease}: the trust left is shorter than the call's timeout; not starting it`;
    case 'trust_expired':
      return `${lease} past its local trust deadline: stepping down`;
    case 'lease_lost':
      return `${lease} is no longer ours (taken over or expired): stepping down`;
  }
}

function refusedMessage(fence: Fence, found: FoundLease): string {
  if (found === null)
    return `lease ${fence.name} is not held: ${fence.holder} (epoch ${fence.epoch}) may not write`;
  const state =
    found.holder === fence.holder && found.epoch === fence.epoch
      ? 'expired'
      : `held by ${found.holder ?? 'nobody'} epoch ${found.epoch}`;
  return `lease ${fence.name} is ${state}: ${fence.holder} (epoch ${fence.epoch}) may not write`;
}

/**
 * A stale holder's write: the lease moved on (another holder or epoch), expired, or this replica
 * no longer leads. Nothing was written. `reason` says which: 'lease_lost' when the store found the
 * lease row changed; leadership's own reasons when it refused before asking the database.
 */
export class FencedOut extends Error {
  override readonly name = 'FencedOut';
  readonly reason: LeaveReason;
  readonly fence: Fence | null;
  readonly found: FoundLease;

  constructor(fence: Fence | null, found: FoundLease, opts: { reason?: LeaveReason; why?: string } = {}) {
    const reason = opts.reason ?? 'lease_lost';
    super(
      opts.why !== undefined
        ? `lease ${fence?.name ?? ''}: ${opts.why}: ${fence?.holder ?? ''} may not write`
        : opts.reason !== undefined || fence === null
          ? leaveMessage(fence, reason)
          : refusedMessage(fence, found),
    );
    this.fence = fence;
    this.found = found;
    this.reason = reason;
  }
}

/**
 * The leader's work (Leadership.guard): every write transaction started inside it checks the
 * fence `current()` returns — null once the term it started in is over, and then the write is
 * refused before it runs.
 */
export interface FenceScope {
  name: string;
  holder: string;
  current(): Fence | null;
  /** A write was refused: the lease moved on (the replica steps down). */
  onFencedOut(err: FencedOut): void;
  /**
   * PostgreSQL: a fenced transaction left idle this long is ended by the server (a paused leader cannot block
   * a takeover).
   */
  idleTimeoutMs?: number;
}

/**
 * The fence's statement on PostgreSQL ($1 name, $2 holder, $3 epoch): one row when the lease still
 * has that holder and epoch and has not expired on the database's clock, and that row is then
 * locked FOR KEY SHARE: a takeover (which locks the row FOR UPDATE first, pg.ts acquireLease) waits
 * for the transaction, and a fence check waits for an uncommitted takeover and then sees it; a
 * renewal (an UPDATE of the expiry, FOR NO KEY UPDATE) waits for neither, so a leader's renewals
 * never queue behind its own long write transactions (issue 44: a queue walk's page transactions
 * held FOR SHARE back to back and starved the renewals until the leader stopped trusting its lease).
 * A lease that no longer matches is refused at once: the condition filters before the lock, so a
 * stale holder never waits for an uncommitted takeover of an expired lease.
 */
export const PG_FENCE_SQL = `SELECT 1 FROM leader_lease
  WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp() FOR KEY SHARE`;
