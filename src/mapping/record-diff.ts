/**
 * Field-level differences between two lists of mapped records: a fixture's expectation against
 * the outcome (`mappings test`), and a loan's last boarded records against what the mapping on
 * disk gives now (re-board preview, dry run --against).
 */
import type { MappedRecord } from './types.js';

const show = (v: unknown): string => (v === undefined ? '(absent)' : JSON.stringify(v));

/** How a difference is worded: a fixture's expectation against the outcome, or a board against a re-map. */
export interface DiffWords {
  before: string;
  after: string;
  missing: string;
  extra: string;
}
const FIXTURE_WORDS: DiffWords = {
  before: 'expected',
  after: 'got',
  missing: 'record missing',
  extra: 'unexpected record',
};
/** Last boarded records against what the mapping on disk gives now (preview, dry run --against). */
export const CHANGE_WORDS: DiffWords = {
  before: 'was',
  after: 'now',
  missing: 'record no longer produced',
  extra: 'new record',
};

function diffValue(path: string, expected: unknown, actual: unknown, out: string[], w: DiffWords): void {
  if (Object.is(expected, actual)) return;
  const isObj = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObj(expected) && isObj(actual)) {
    for (const k of new Set([...Object.keys(expected), ...Object.keys(actual)]))
      diffValue(`${path}.${k}`, expected[k], actual[k], out, w);
    return;
  }
  if (Array.isArray(expected) && Array.isArray(actual)) {
    for (let i = 0; i < Math.max(expected.length, actual.length); i++)
      diffValue(`${path}[${i}]`, expected[i], actual[i], out, w);
    return;
  }
  out.push(`${path}: ${w.before} ${show(expected)}, ${w.after} ${show(actual)}`);
}

/** Field-level differences between two record lists, keyed by type/externalId; one line each. */
export function diffRecordLists(
  before: readonly MappedRecord[],
  after: readonly MappedRecord[],
  w: DiffWords = FIXTURE_WORDS,
): string[] {
  const out: string[] = [];
  const key = (r: MappedRecord): string => `${r.type}/${r.externalId}`;
  const actual = new Map(after.map((r) => [key(r), r]));
  const wanted = new Map(before.map((r) => [key(r), r]));
  for (const [k, e] of wanted) {
    const a = actual.get(k);
    if (!a) out.push(`${k}: ${w.missing}`);
    else diffValue(k, e.fields, a.fields, out, w);
  }
  for (const k of actual.keys()) if (!wanted.has(k)) out.push(`${k}: ${w.extra}`);
  if (out.length === 0) {
    const order = (rs: readonly MappedRecord[]): string => rs.map(key).join(', ');
    if (order(before) !== order(after))
      out.push(`record order differs: ${w.before} ${order(before)}; ${w.after} ${order(after)}`);
  }
  return out;
}
