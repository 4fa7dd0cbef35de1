import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { StoreDb } from '../store/sql.js';

/**
 * This host's clock against the state database's (issue 37). Leadership and the shared rate budget
 * decide on the database's clock, so a replica minutes off still leads and spends right, and so are
 * batch cut-offs judged (store/file-batches.ts); but webhook timestamps (±300 s), retry times and
 * every time shown to people come from the host. A skew of store.maxClockSkewMs or more is
 * reported: /readyz (check `clock`), /metrics (boarding_clock_offset_seconds), one ALERT line per
 * ten minutes, and `config check --connect`.
 * SQLite lives on the host: nothing to compare.
 */
export interface ClockOffset {
  /** Database clock minus this host's clock, ms (positive: the host is behind). */
  offsetMs: number;
  /** The round trip the reading took; the offset is known to within half of it. */
  rttMs: number;
}

/** One reading (null on SQLite): the database's clock_timestamp() against the midpoint of the round trip. */
export async function measureClockOffset(db: StoreDb, clock: Clock): Promise<ClockOffset | null> {
  if (!db.dialect.hasServerClock) return null;
  const t0 = clock.now();
  const row = await db.get<{ ms: number | string }>(
    'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
  );
  const t1 = clock.now();
  if (row === undefined) throw new Error('the database did not return its time');
  return { offsetMs: Math.round(Number(row.ms) - (t0 + t1) / 2), rttMs: t1 - t0 };
}

export function describeOffset(o: ClockOffset): string {
  const s = Math.abs(o.offsetMs) / 1000;
  const amount = s >= 90 ? `${(s / 60).toFixed(1)} min` : `${s.toFixed(1)} s`;
  return o.offsetMs === 0
    ? 'this host agrees with the database clock'
    : `this host's clock is ${amount} ${o.offsetMs > 0 ? 'behind' : 'ahead of'} the database's`;
}

export interface ClockSkewStatus {
  ok: boolean;
  detail: string;
  offset: ClockOffset | null;
}

export interface ClockSkewWatch {
  /** A reading at most `everyMs` old (read anew when older). */
  check(): Promise<ClockSkewStatus>;
  /** The last reading, without asking the database. */
  last(): ClockSkewStatus | null;
}

export function createClockSkewWatch(opts: {
  db: StoreDb;
  clock: Clock;
  maxSkewMs: number;
  logger?: Logger;
  everyMs?: number;
  alertEveryMs?: number;
}): ClockSkewWatch {
  const every = opts.everyMs ?? 30_000;
  const alertEvery = opts.alertEveryMs ?? 10 * 60_000;
  let current: (ClockSkewStatus & { at: number }) | null = null;
  let lastAlertAt: number | null = null;
  let inFlight: Promise<ClockSkewStatus> | null = null;

  async function read(): Promise<ClockSkewStatus> {
    const now = opts.clock.now();
    let status: ClockSkewStatus;
    try {
      const offset = await measureClockOffset(opts.db, opts.clock);
      if (offset === null)
        status = { ok: true, detail: 'SQLite: the state is on this host, no other clock to compare', offset };
      else if (Math.abs(offset.offsetMs) < opts.maxSkewMs)
        status = {
          ok: true,
          detail: `${describeOffset(offset)} (±${Math.ceil(offset.rttMs / 2)} ms)`,
          offset,
        };
      else {
        status = {
          ok: false,
          detail:
            `CLOCK SKEW: ${describeOffset(offset)} (store.maxClockSkewMs ${opts.maxSkewMs}): batch cut-offs, ` +
            "webhook timestamps and retry times are off by as much; fix the host's time sync (NTP)",
          offset,
        };
        if (lastAlertAt === null || now - lastAlertAt >= alertEvery) {
          lastAlertAt = now;
          opts.logger?.error(
            { alert: 'clock.skew', offsetMs: offset.offsetMs, maxSkewMs: opts.maxSkewMs },
            `ALERT: ${status.detail}`,
          );
        }
      }
    } catch (err) {
      // The database check reports an unreachable database; this one only says it could not tell.
      status = { ok: true, detail: `not measured: ${errorMessage(err)}`, offset: current?.offset ?? null };
    }
    current = { ...status, at: now };
    return status;
  }

  return {
    check() {
      if (current !== null && opts.clock.now() - current.at < every) return Promise.resolve(current);
      inFlight ??= read().finally(() => {
        inFlight = null;
      });
      return inFlight;
    },
    last: () => current,
  };
}
