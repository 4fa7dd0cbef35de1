import { createRng, type Rng } from './rng.js';

/**
 * Id shapes the sandbox generates (docs/sandbox.md "Id shapes"). The platform spec types every id
 * as a plain string with no length or shape, so the sandbox must not let the connector get away
 * with assuming one:
 * - `short`: the prefixed ids of earlier sandboxes (`ln_1nh9j7qm2q`, 13–16 characters);
 * - `uuid`: lower-case UUIDs (36 characters);
 * - `long`: opaque ids of 24 to 64 characters with `-`, `_`, `.` and `:` (a quarter of them
 *   exactly 64), e.g. `urn:lender:loan:2f.k9-x_…`;
 * - `xlong`: opaque ids of 101 to 160 characters, the same alphabet (longer than Fineract's
 *   100-character externalId; a quarter of them exactly 160);
 * - `wild`: ids of at most 100 characters with `/`, `%`, `?`, `#`, `+`, `&`, spaces and non-ASCII
 *   letters (one in four outside the BMP), e.g. `loan/2026 Q1/Zürich #7 50%+ño`;
 * - `mixed` (default): each id picks short, uuid or long as before, and one in five of them is
 *   then replaced by an xlong or a wild one (from a stream of its own, so the ids that stay are
 *   the ones earlier versions drew).
 */
export const ID_SHAPES = ['mixed', 'short', 'uuid', 'long', 'xlong', 'wild'] as const;
export type IdShapes = (typeof ID_SHAPES)[number];

/** The longest `long` id. */
export const MAX_LONG_ID_LENGTH = 64;
/** The longest id the sandbox generates (`xlong`); every shipped mapping set and layout must carry it. */
export const MAX_GENERATED_ID_LENGTH = 160;
/** The longest `wild` id (characters): it fits Fineract's externalId, so only its characters are odd. */
export const MAX_WILD_ID_LENGTH = 100;

/** What an id names (the short shape's prefix). */
export type IdKind = 'ln' | 'biz' | 'per' | 'doc' | 'req' | 'brd';

const WORD: Record<IdKind, string> = {
  ln: 'loan',
  biz: 'business',
  per: 'person',
  doc: 'document',
  req: 'requirement',
  brd: 'release',
};
const OPAQUE = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const SEPARATORS = ['-', '_', '.', ':'];
/** Fineract's externalId column (VARCHAR(100)): xlong ids are all longer. */
const FINERACT_LIMIT = 100;

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

function long(rng: Rng, kind: IdKind, min = 24, max = MAX_LONG_ID_LENGTH): string {
  const length = rng.chance(0.25) ? max : rng.int(min, max);
  let s = `urn:lender:${WORD[kind]}:`;
  while (s.length < length) {
    const c =
      rng.chance(0.15) && !SEPARATORS.includes(s[s.length - 1] as string)
        ? rng.pick(SEPARATORS)
        : OPAQUE[rng.int(0, OPAQUE.length - 1)];
    s += c;
  }
  // Never ends in a separator (an id "a." or "a:" is legal, but reads like a cut-off one).
  if (SEPARATORS.includes(s[s.length - 1] as string)) s = `${s.slice(0, -1)}z`;
  return s;
}

/** Characters of a `wild` id besides the opaque alphabet: path, query and fragment delimiters, space, non-ASCII. */
const WILD = ['/', '%', '?', '#', '+', '&', ' ', 'é', 'ü', 'ø', 'ñ', 'ß', 'Ж', '中', '№', '😀'];

function wild(rng: Rng, kind: IdKind): string {
  // Every wild id holds a slash, a space, a percent sign and a non-ASCII letter, then at least
  // 10 characters at random (unique), up to its length.
  const prefix = `${WORD[kind]}/${rng.pick(['Zürich', 'São Paulo', 'Łódź', 'København', '東京'])} %`;
  const length = rng.chance(0.25) ? MAX_WILD_ID_LENGTH : rng.int(prefix.length + 10, MAX_WILD_ID_LENGTH);
  let s = prefix;
  while (s.length < length) s += rng.chance(0.25) ? rng.pick(WILD) : OPAQUE[rng.int(0, OPAQUE.length - 1)];
  // Cut to the length without splitting a surrogate pair; no trailing space (it reads like a cut).
  let out = s.slice(0, length);
  if (/[\uD800-\uDBFF]$/.test(out)) out = `${out.slice(0, -1)}x`;
  return out.endsWith(' ') ? `${out.slice(0, -1)}z` : out;
}

export function createIdFactory(seed: number, shapes: IdShapes): IdFactory {
  // Its own stream: drawing a uuid or a long id does not shift the main generator's values.
  const rng = createRng((seed ^ 0x5bd1e995) >>> 0);
  // Mixed: which ids become xlong or wild, and their characters, from a third stream, so the
  // short, uuid and long ids of a seed stay what earlier versions drew.
  const odd = createRng((seed ^ 0x27d4eb2f) >>> 0);
  const draw = (
    shape: 'short' | 'uuid' | 'long' | 'xlong' | 'wild',
    kind: IdKind,
    short: string,
    r: Rng,
  ): string => {
    if (shape === 'short') return short;
    if (shape === 'uuid') return uuid(r);
    if (shape === 'long') return long(r, kind);
    if (shape === 'xlong') return long(r, kind, FINERACT_LIMIT + 1, MAX_GENERATED_ID_LENGTH);
    return wild(r, kind);
  };
  return {
    make(kind, short) {
      if (shapes !== 'mixed') return draw(shapes, kind, short, rng);
      const usual = draw(rng.pick(['short', 'uuid', 'long'] as const), kind, short, rng);
      if (!odd.chance(0.2)) return usual;
      return draw(odd.pick(['xlong', 'wild'] as const), kind, short, odd);
    },
  };
}

export function isIdShapes(v: string): v is IdShapes {
  return (ID_SHAPES as readonly string[]).includes(v);
}
