import { localDate, wallTimeAt, zonedToUtc } from '../../lib/calendar.js';

/**
 * When a batch closes. `daily` is a wall-clock time in the bank's zone (the core's import job runs
 * at a local time, across DST changes); `interval` cuts every N minutes counted from the epoch, so
 * cut-offs fall on the same instants whenever the connector starts.
 */
export type CutoffRule =
  | { kind: 'daily'; hour: number; minute: number; timeZone: string }
  | { kind: 'interval'; minutes: number; timeZone: string };

/** `"18:00"` → daily at 18:00; an interval in minutes wins when given. */
export function cutoffRule(opts: {
  cutoff: string;
  intervalMinutes?: number | undefined;
  timeZone: string;
}): CutoffRule {
  if (opts.intervalMinutes !== undefined)
    return { kind: 'interval', minutes: opts.intervalMinutes, timeZone: opts.timeZone };
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(opts.cutoff);
  if (!m) throw new Error(`cut-off ${JSON.stringify(opts.cutoff)}: expected HH:MM (24 h)`);
  return { kind: 'daily', hour: Number(m[1]), minute: Number(m[2]), timeZone: opts.timeZone };
}

/** The first cut-off strictly after `after` (epoch ms). */
export function nextCutoff(after: number, rule: CutoffRule): number {
  if (rule.kind === 'interval') {
    const step = rule.minutes * 60_000;
    return (Math.floor(after / step) + 1) * step;
  }
  const { year, month, day } = wallTimeAt(after, rule.timeZone);
  for (let add = 0; add < 3; add += 1) {
    const t = zonedToUtc(
      { year, month, day: day + add, hour: rule.hour, minute: rule.minute },
      rule.timeZone,
    );
    if (t > after) return t;
  }
  throw new Error('unreachable: no cut-off within three days');
}

/** The bank day a batch is named after: the day its cut-off ends (a midnight cut-off names the day before). */
export function batchDay(cutoffAt: number, timeZone: string): string {
  return localDate(cutoffAt - 1, timeZone);
}
