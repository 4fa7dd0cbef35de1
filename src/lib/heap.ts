import { setFlagsFromString } from 'node:v8';
import { UsageError } from './errors.js';

/**
 * How far V8 lets the JavaScript heap grow past what the last full collection found alive, in
 * percent. V8's own choice is up to 4× (300 %) while collections are cheap, which lets garbage
 * pile up for minutes: the peak RSS of `sync --once` then grew with the length of the run (198 MB
 * for 3,000 loans, 256 MB for 30,000) although the live heap stayed at ~30 MB. At 20 % the heap
 * follows the live data, flat in the size of the work, for a few more full collections (each a
 * few ms on a 30 MB heap). It is not a cap: a process that needs more memory still gets it.
 */
export const DEFAULT_HEAP_GROWTH_PERCENT = 20;

export const HEAP_GROWTH_ENV = 'BOARDING_HEAP_GROWTH_PERCENT';

const V8_FLAG = '--heap-growing-percent';

export interface HeapGrowthChoice {
  /** The percentage set, or null when V8's own heuristics are left alone. */
  percent: number | null;
  /** Why (for a debug line). */
  source: 'default' | 'env' | 'node-flag' | 'disabled';
}

/**
 * Sets V8's heap growing factor for this process (read by V8 at each full collection, so it can be
 * set after start, unlike --max-old-space-size). `BOARDING_HEAP_GROWTH_PERCENT` overrides the
 * default (0: V8's own heuristics); a `--heap-growing-percent` given to node itself wins over both
 * (V8 refuses that flag in NODE_OPTIONS). A heap cap in NODE_OPTIONS (--max-old-space-size) is
 * independent of this and still applies.
 */
export function applyHeapGrowth(
  env: NodeJS.ProcessEnv,
  execArgv: readonly string[],
  set: (flags: string) => void = setFlagsFromString,
): HeapGrowthChoice {
  if (
    execArgv.some(
      (a) =>
        a === V8_FLAG ||
        a.startsWith(`${V8_FLAG}=`) ||
        a === '--heap_growing_percent' ||
        a.startsWith('--heap_growing_percent='),
    )
  ) {
    return { percent: null, source: 'node-flag' };
  }
  const raw = env[HEAP_GROWTH_ENV];
  let percent = DEFAULT_HEAP_GROWTH_PERCENT;
  let source: HeapGrowthChoice['source'] = 'default';
  if (raw !== undefined && raw.trim() !== '') {
    const n = Number(raw.trim());
    if (!Number.isInteger(n) || n < 0 || n > 1000) {
      throw new UsageError(
        `${HEAP_GROWTH_ENV}: expected a whole number of percent from 0 ` +
          `to 1000 (0: V8's own heap growth), got ${JSON.stringify(raw)}`,
      );
    }
    if (n === 0) return { percent: null, source: 'disabled' };
    percent = n;
    source = 'env';
  }
  set(`${V8_FLAG}=${percent}`);
  return { percent, source };
}
