import { every, type Clock, type Timer } from './clock.js';
/**
 * Text from the platform (a loan number, a business name, an error message) can carry terminal
 * escape sequences: printed raw they can retitle the window, hide lines or fake output. Every
 * line the CLI prints goes through this: C0 controls other than tab and newline, DEL and C1
 * controls are removed (JSON output is unaffected: JSON.stringify already escapes them).
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

export function printable(text: string): string {
  return text.replace(CONTROL, '');
}

export const PROGRESS_MODES = ['auto', 'always', 'never'] as const;
export type ProgressMode = (typeof PROGRESS_MODES)[number];

type TtyLike = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/**
 * One status line on stderr for a long command: what it is doing (`boarding 12/28`) and, while a
 * wait lasts, why (`waiting 12 s for the read budget`). On a terminal it is redrawn in place and
 * counts a wait down; on anything else (`--progress=always` into a file or a pipe) each change is
 * one line of its own. Results go to stdout: `around` clears the line while they are written.
 */
export interface ProgressLine {
  readonly enabled: boolean;
  /** What the command is doing now. */
  status(text: string): void;
  /** A wait with its reason, shown beside the status until `until` (epoch ms) or resume(). */
  wait(describe: (remainingMs: number) => string, until: number): void;
  /** The wait is over (the call went out). */
  resume(): void;
  /** Clears the line for a write to the same terminal, then draws it again. */
  around(write: () => void): void;
  /** Clears the line and stops redrawing. */
  done(): void;
}

export interface ProgressOptions {
  mode: ProgressMode;
  /** The injected clock: the wait's countdown and the redraw interval are on it. */
  clock: Clock;
  /** Least time between two redraws of a changed status (ms). Default 100 on a terminal, 1000 otherwise. */
  minIntervalMs?: number;
}

const DISABLED: ProgressLine = {
  enabled: false,
  status: () => undefined,
  wait: () => undefined,
  resume: () => undefined,
  around: (w) => w(),
  done: () => undefined,
};

/** Shown when mode is `always`, or `auto` and the stream is a terminal. */
export function progressEnabled(mode: ProgressMode, stream: { isTTY?: boolean }): boolean {
  return mode === 'always' || (mode === 'auto' && stream.isTTY === true);
}

export function createProgressLine(stream: TtyLike, opts: ProgressOptions): ProgressLine {
  if (!progressEnabled(opts.mode, stream)) return DISABLED;
  const tty = stream.isTTY === true;
  const now = (): number => opts.clock.now();
  const minInterval = opts.minIntervalMs ?? (tty ? 100 : 1000);
  let status = '';
  let waiting: { describe: (remainingMs: number) => string; until: number } | null = null;
  let drawn = false;
  let lastText = '';
  let lastDraw = 0;
  let ticker: Timer | null = null;
  let closed = false;

  /** The status and the wait reason; past `width` the status is cut first (the reason is the news). */
  const text = (width: number): string => {
    const t = now();
    if (waiting !== null && waiting.until <= t) waiting = null;
    const w = waiting === null ? '' : printable(waiting.describe(waiting.until - t));
    let st = printable(status);
    const room = width - (w === '' ? 0 : w.length + 3);
    if (st.length > room) st = room > 1 ? `${st.slice(0, room - 1)}…` : '';
    const line = [st, w].filter((x) => x !== '').join(' · ');
    return line.length > width ? `${line.slice(0, width - 1)}…` : line;
  };
  const draw = (force: boolean): void => {
    if (closed) return;
    const t = now();
    if (!force && t - lastDraw < minInterval) return;
    // A pseudo-terminal may report 0 columns: assume 80. A file gets whole lines.
    const line = text(
      tty
        ? Math.max(20, (stream.columns !== undefined && stream.columns > 0 ? stream.columns : 80) - 1)
        : Number.POSITIVE_INFINITY,
    );
    if (tty) {
      stream.write(`\r\x1b[2K${line}`);
      drawn = line !== '';
    } else if (line !== lastText && line !== '') {
      stream.write(`${line}\n`);
    }
    lastText = line;
    lastDraw = t;
  };
  const stopTicker = (): void => {
    ticker?.cancel();
    ticker = null;
  };
  return {
    enabled: true,
    status(t) {
      if (t === status) return;
      status = t;
      draw(false);
    },
    wait(describe, until) {
      waiting = { describe, until };
      draw(true);
      // A terminal counts the wait down; a log file gets the reason once.
      if (tty && ticker === null) {
        ticker = every(opts.clock, 1000, () => {
          draw(true);
          if (waiting === null) stopTicker();
        });
      }
    },
    resume() {
      if (waiting === null) return;
      waiting = null;
      stopTicker();
      draw(true);
    },
    around(write) {
      if (tty && drawn) stream.write('\r\x1b[2K');
      write();
      if (tty && drawn) draw(true);
    },
    done() {
      stopTicker();
      // A log file gets the last word of a throttled status.
      if (!tty) draw(true);
      if (tty && drawn) stream.write('\r\x1b[2K');
      drawn = false;
      closed = true;
    },
  };
}
