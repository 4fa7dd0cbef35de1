/**
 * Seeded pseudo-random source (mulberry32). The sandbox's data and fault decisions must be
 * reproducible from a seed, so nothing here touches Math.random.
 */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  int(min: number, maxInclusive: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  id(prefix: string, length?: number): string;
}

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export function createRng(seed: number): Rng {
  let state = seed >>> 0 || 0x9e3779b9;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (min: number, maxInclusive: number): number =>
    min + Math.floor(next() * (maxInclusive - min + 1));
  return {
    next,
    int,
    pick<T>(items: readonly T[]): T {
      if (items.length === 0) throw new Error('pick from an empty list');
      return items[int(0, items.length - 1)] as T;
    },
    chance: (p) => next() < p,
    id(prefix, length = 12) {
      let s = '';
      for (let i = 0; i < length; i += 1) s += ALPHABET[int(0, ALPHABET.length - 1)];
      return `${prefix}_${s}`;
    },
  };
}
