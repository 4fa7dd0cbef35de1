import type { ExprNode } from './expression.js';

/**
 * A direct evaluator for the expressions most mappings are made of (paths, literals, helper
 * calls, `=`, `&`, `? :`, `$exists`). JSONata's general evaluator costs tens of microseconds per
 * call, which caps throughput at a few hundred loans per second; these shapes need none of it.
 * Whenever the data is not what the shortcut handles exactly like JSONata (an array or a null
 * on the way, a number to concatenate, an object to compare), it answers FALLBACK and the
 * engine runs the real JSONata expression, so results never differ (a test compares both).
 */
export const FALLBACK: unique symbol = Symbol('fallback');

export type Bindings = Record<string, unknown>;
export type FastFn = (context: unknown, bindings: Bindings) => unknown;
export type HelperImpl = (this: { environment: { lookup(name: string): unknown }; input: unknown }, ...args: unknown[]) => unknown;

const ALLOWED_KEYS = new Set(['type', 'value', 'position', 'steps', 'arguments', 'procedure', 'condition', 'then', 'else', 'lhs', 'rhs']);

function plainKeys(n: ExprNode): boolean {
  return Object.entries(n).every(([k, v]) => v === undefined || ALLOWED_KEYS.has(k));
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** JSONata truthiness for the primitive cases; anything else falls back. */
function truthy(v: unknown): boolean | typeof FALLBACK {
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string') return v.length > 0;
  if (typeof v === 'number') return v !== 0;
  return FALLBACK;
}

const isPrimitive = (v: unknown): boolean => v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/** Compiles `node` to a direct evaluator, or undefined when the shape is not one it handles. */
export function compileFast(node: ExprNode, helpers: ReadonlyMap<string, HelperImpl>, boundNames: ReadonlySet<string>): FastFn | undefined {
  if (!plainKeys(node)) return undefined;
  switch (node.type as string) {
    case 'string':
    case 'number':
    case 'value': {
      const v = node.value as unknown;
      return () => v;
    }
    case 'variable': {
      const name = node.value as unknown;
      if (name === '') return (ctx) => ctx;
      if (typeof name !== 'string' || !boundNames.has(name)) return undefined;
      return (_ctx, b) => b[name];
    }
    case 'path': {
      const steps = node.steps as ExprNode[] | undefined;
      if (!steps || steps.length === 0 || !steps.every(plainKeys)) return undefined;
      const [first, ...rest] = steps;
      if (!first || !rest.every((s) => s.type === 'name' && typeof s.value === 'string')) return undefined;
      const names = rest.map((s) => s.value as string);
      let head: FastFn | undefined;
      if (first.type === 'name' && typeof first.value === 'string') {
        const key = first.value;
        head = (ctx) => (isPlainObject(ctx) ? ctx[key] : FALLBACK);
      } else if (first.type === 'variable' || first.type === 'function') {
        head = compileFast(first, helpers, boundNames);
      }
      if (!head) return undefined;
      const h = head;
      return (ctx, b) => {
        let v = h(ctx, b);
        if (v === FALLBACK) return FALLBACK;
        for (const name of names) {
          if (v === undefined) return undefined;
          if (!isPlainObject(v)) return FALLBACK;
          v = v[name];
        }
        return Array.isArray(v) ? FALLBACK : v;
      };
    }
    case 'function': {
      const proc = node.procedure;
      if (!proc || proc.type !== 'variable' || typeof proc.value !== 'string' || !plainKeys(proc as ExprNode)) return undefined;
      const args = ((node.arguments ?? []) as ExprNode[]).map((a) => compileFast(a, helpers, boundNames));
      if (args.some((a) => a === undefined)) return undefined;
      const argFns = args as FastFn[];
      const position = node.position;
      if (proc.value === 'exists' && argFns.length === 1) {
        const a = argFns[0] as FastFn;
        return (ctx, b) => {
          const v = a(ctx, b);
          return v === FALLBACK ? FALLBACK : v !== undefined;
        };
      }
      const impl = helpers.get(proc.value);
      if (!impl) return undefined;
      return (ctx, b) => {
        const values: unknown[] = [];
        for (const a of argFns) {
          const v = a(ctx, b);
          if (v === FALLBACK) return FALLBACK;
          values.push(v);
        }
        try {
          return impl.apply({ environment: { lookup: (n: string) => b[n] }, input: ctx }, values);
        } catch (err) {
          // same as JSONata: the error carries the position of the call that raised it
          if (err !== null && typeof err === 'object' && (err as { position?: unknown }).position === undefined) (err as { position?: unknown }).position = position;
          throw err;
        }
      };
    }
    case 'condition': {
      const c = node.condition ? compileFast(node.condition as ExprNode, helpers, boundNames) : undefined;
      const t = node.then ? compileFast(node.then as ExprNode, helpers, boundNames) : undefined;
      const e = node.else === undefined ? () => undefined : compileFast(node.else as ExprNode, helpers, boundNames);
      if (!c || !t || !e) return undefined;
      return (ctx, b) => {
        const cv = c(ctx, b);
        if (cv === FALLBACK) return FALLBACK;
        const tv = truthy(cv);
        if (tv === FALLBACK) return FALLBACK;
        return tv ? t(ctx, b) : e(ctx, b);
      };
    }
    case 'binary': {
      const op = node.value as unknown;
      if (op !== '=' && op !== '!=' && op !== '&') return undefined;
      const l = node.lhs ? compileFast(node.lhs as ExprNode, helpers, boundNames) : undefined;
      const r = node.rhs ? compileFast(node.rhs as ExprNode, helpers, boundNames) : undefined;
      if (!l || !r) return undefined;
      if (op === '&') {
        return (ctx, b) => {
          const lv = l(ctx, b);
          if (lv === FALLBACK) return FALLBACK;
          const rv = r(ctx, b);
          if (rv === FALLBACK) return FALLBACK;
          if ((lv !== undefined && typeof lv !== 'string') || (rv !== undefined && typeof rv !== 'string')) return FALLBACK;
          return (lv ?? '') + (rv ?? '');
        };
      }
      return (ctx, b) => {
        const lv = l(ctx, b);
        if (lv === FALLBACK) return FALLBACK;
        const rv = r(ctx, b);
        if (rv === FALLBACK) return FALLBACK;
        if (lv === undefined || rv === undefined) return false;
        if (!isPrimitive(lv) || !isPrimitive(rv)) return FALLBACK;
        return op === '=' ? lv === rv : lv !== rv;
      };
    }
    default:
      return undefined;
  }
}
