/** Levenshtein distance (insert, delete, substitute: 1 each). */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) (d[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const prev = d[i - 1] as number[];
      row[j] = Math.min(
        (prev[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/**
 * The candidate closest to a mistyped name, as ` (did you mean "x"?)`, or '' when none is close
 * enough to be a typo (a case-only difference always is). Mapping lint and the config loader
 * suggest the same way.
 */
export function didYouMean(name: string, candidates: Iterable<string>): string {
  let best: string | undefined;
  let bestD = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    if (c === name) continue;
    const dist = c.toLowerCase() === name.toLowerCase() ? 0 : editDistance(name, c);
    if (dist < bestD) {
      bestD = dist;
      best = c;
    }
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(name.length / 3))
    ? ` (did you mean "${best}"?)`
    : '';
}
