/** What a fault injected into a core simulator matches: a method (any if absent) and a path. */
export interface FaultMatch {
  method?: string;
  path: string | RegExp;
  /** How many requests it still applies to (default 1). */
  times?: number;
}

/**
 * The first injected fault that matches a request, used up by one (both simulators inject faults
 * this way: tests and users script "the next POST /loans commits, then drops the connection").
 */
export function takeFault<F extends FaultMatch>(
  faults: F[],
  req: { method: string; path: string },
): F | undefined {
  const f = faults.find(
    (x) =>
      (x.times ?? 1) > 0 &&
      (x.method === undefined || x.method.toUpperCase() === req.method) &&
      (typeof x.path === 'string' ? x.path === req.path : x.path.test(req.path)),
  );
  if (f) f.times = (f.times ?? 1) - 1;
  return f;
}
