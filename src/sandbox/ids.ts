import { createRng, type Rng } from './rng.js';

/**
 * Id shapes the sandbox generates (docs/sandbox.md "Id shapes"). The platform spec types every id
 * as a plain string with no length or shape, so the sandbox must not let the connector get away
 * with assuming one:
 * - `short`: the prefixed ids of earlier sandboxes (`ln_1nh9j7qm2q`, 13–16 characters);
 * - `uuid`: lower-case UUIDs (36 characters);
 * - `long`: opaque ids of 24 to 64 characters with `-`, `_`, `.` and `:` (a quarter of them
 *   exactly 64), e.g. `urn:lender:loan:2f.k9-x_…`;
 * - `mixed` (default): each id picks one of the three.
 */
export const ID_SHAPES = ['mixed', 'short', 'uuid', 'long'] as const;
export type IdShapes = (typeof ID_SHAPES)[number];

/** The longest id the sandbox generates; every shipped mapping set and layout must carry it. */
export const MAX_GENERATED_ID_LENGTH = 64;

/** What an id names (the short shape's prefix). */
export type IdKind = 'ln' | 'biz' | 'per' | 'doc' | 'req' | 'brd';

const WORD: Record<IdKind, string> = { ln: 'loan', biz: 'business', per: 'person', doc: 'document', req: 'requirement', brd: 'release' };
const OPAQUE = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const SEPARATORS = ['-', '_', '.', ':'];

export interface IdFactory {
  /**
   * A new id of `kind`. `short` is the id the main generator drew (so a seed's other values stay
   * as they were whatever the shape); uuid and long ids come from the factory's own stream.
   */
  make(kind: IdKind, short: string): string;
}

function uuid(rng: Rng): string {
  const hex = (n: number): string => Array.from({ length: n }, () => rng.int(0, 15).toString(16)).join('');
  return `${hex(8)}-${hex(4)}-4${hex(3)}-${'89ab'[rng.int(0, 3)]}${hex(3)}-${hex(12)}`;
}

function long(rng: Rng, kind: IdKind): string {
  const length = rng.chance(0.25) ? MAX_GENERATED_ID_LENGTH : rng.int(24, MAX_GENERATED_ID_LENGTH);
  let s = `urn:lender:${WORD[kind]}:`;
  while (s.length < length) {
    const c = rng.chance(0.15) && !SEPARATORS.includes(s[s.length - 1] as string) ? rng.pick(SEPARATORS) : OPAQUE[rng.int(0, OPAQUE.length - 1)];
    s += c;
  }
  // Never ends in a separator (an id "a." or "a:" is legal, but reads like a cut-off one).
  if (SEPARATORS.includes(s[s.length - 1] as string)) s = `${s.slice(0, -1)}z`;
  return s;
}

export function createIdFactory(seed: number, shapes: IdShapes): IdFactory {
  // Its own stream: drawing a uuid or a long id does not shift the main generator's values.
  const rng = createRng((seed ^ 0x5bd1e995) >>> 0);
  return {
    make(kind, short) {
      const shape = shapes === 'mixed' ? rng.pick(['short', 'uuid', 'long'] as const) : shapes;
      if (shape === 'short') return short;
      if (shape === 'uuid') return uuid(rng);
      return long(rng, kind);
    },
  };
}

export function isIdShapes(v: string): v is IdShapes {
  return (ID_SHAPES as readonly string[]).includes(v);
}
