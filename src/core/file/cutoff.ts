/**
 * When a batch closes. `daily` is a wall-clock time in the bank's zone (the core's import job runs
 * at a local time, across DST changes); `interval` cuts every N minutes counted from the epoch, so
 * cut-offs fall on the same instants whenever the connector starts.
 */
export type CutoffRule = { kind: 'daily'; hour: number; minute: number; timeZone: string } | { kind: 'interval'; minutes: number; timeZone: string };

/** `"18:00"` → daily at 18:00; an interval in minutes wins when given. */
export function cutoffRule(opts: { cutoff: string; intervalMinutes?: number | undefined; timeZone: string }): CutoffRule {
  if (opts.intervalMinutes !== undefined) return { kind: 'interval', minutes: opts.intervalMinutes, timeZone: opts.timeZone };
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
  const { y, mo, d } = localParts(after, rule.timeZone);
  for (let add = 0; add < 3; add += 1) {
    const t = zonedToUtc(y, mo, d + add, rule.hour, rule.minute, rule.timeZone);
    if (t > after) return t;
  }
  throw new Error('unreachable: no cut-off within three days');
}

/** The bank day a batch is named after: the day its cut-off ends (a midnight cut-off names the day before). */
export function batchDay(cutoffAt: number, timeZone: string): string {
  const p = localParts(cutoffAt - 1, timeZone);
  return `${p.y}-${String(p.mo).padStart(2, '0')}-${String(p.d).padStart(2, '0')}`;
}

function localParts(at: number, timeZone: string): { y: number; mo: number; d: number; h: number; mi: number; s: number } {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(new Date(at));
  const get = (t: string): number => Number(parts.find((p) => p.type === t)?.value ?? '0');
  return { y: get('year'), mo: get('month'), d: get('day'), h: get('hour'), mi: get('minute'), s: get('second') };
}

function offsetAt(at: number, timeZone: string): number {
  const p = localParts(at, timeZone);
  return Date.UTC(p.y, p.mo - 1, p.d, p.h, p.mi, p.s) - Math.floor(at / 1000) * 1000;
}

/** The instant a wall-clock time happens in a zone (a time skipped by DST resolves past the gap). */
function zonedToUtc(y: number, mo: number, d: number, h: number, mi: number, timeZone: string): number {
  const wall = Date.UTC(y, mo - 1, d, h, mi);
  let t = wall - offsetAt(wall, timeZone);
  t = wall - offsetAt(t, timeZone);
  return t;
}
