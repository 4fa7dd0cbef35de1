/**
 * How often an operator may start a board or re-board check from a face that anyone signed in can
 * click (the console): each check reads the loan and its entities from the platform, within the
 * rate budget the boarding shares, so one runs at a time and each user starts at most
 * PREVIEWS_PER_MINUTE a minute. The face turns a refusal into its own answer (the console: 409 or
 * 429) and the wait into words.
 */

/** Checks each user may start per minute: each spends platform reads the boarding needs. */
export const PREVIEWS_PER_MINUTE = 6;

export type PreviewStart =
  | { ok: true; done: () => void }
  | { ok: false; why: 'busy' }
  | { ok: false; why: 'rate'; perMinute: number; waitS: number };

export class PreviewThrottle {
  private running = false;
  /** Start times of each user's checks in the last minute. */
  private readonly starts = new Map<string, number[]>();

  constructor(private readonly perMinute = PREVIEWS_PER_MINUTE) {}

  /** Starts a check for `user` at `now`, or says why not; call done() when the check ends. */
  start(user: string, now: number): PreviewStart {
    if (this.running) return { ok: false, why: 'busy' };
    const recent = (this.starts.get(user) ?? []).filter((t) => t > now - 60_000);
    if (recent.length >= this.perMinute) {
      const waitS = Math.max(1, Math.ceil(((recent[0] as number) + 60_000 - now) / 1000));
      this.starts.set(user, recent);
      return { ok: false, why: 'rate', perMinute: this.perMinute, waitS };
    }
    recent.push(now);
    this.starts.set(user, recent);
    this.running = true;
    let ended = false;
    return {
      ok: true,
      done: () => {
        if (ended) return;
        ended = true;
        this.running = false;
      },
    };
  }
}
