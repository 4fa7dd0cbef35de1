/**
 * A synchronous evaluator for the commonest mapping expressions, with JSONata's own result: a
 * literal (`"business"`, `12`, `null`), a path of plain names (`state`, `product.id`), a variable
 * with names after it (`$defaults.branch`, `$loan.id`, `$`), text joined with `&`, `=` and `!=`
 * (JSONata's deep equality), `<` `<=` `>` `>=`, the built-ins `$exists`, `$trim`, `$length`,
 * `$substring` and `$number`, a condition (`a ? b : c`, a helper's call as the condition too:
 * JSONata's truth of any value), parentheses around one expression, calls of our helpers
 * over any of these, nested too (`$fit(name, 100, "business " & id)`, `$lookup("roleCode",
 * $roleOf($))`), and names after a helper's call (`$borrower().id`).
 *
 * Why: JSONata 2 evaluates every node as an async function, so a field as plain as `state` costs a
 * dozen promises, and on Node 20 every promise also runs the AsyncLocalStorage hooks the store's
 * transactions need. Most fields of a mapping are of these shapes.
 *
 * It is exact, or it declines: whatever JSONata would treat as a sequence (an array anywhere on
 * the path or in a result, an array input), or a value our operators and built-ins leave to
 * JSONata (`&` of a number, `<` of a number and a text, `$length` of a number: JSONata raises its
 * own error), returns SLOW, always before any helper is called (every part that can decline is
 * checked first: an operator or built-in that may decline takes operands that call no helper, and
 * both branches of a condition a helper decides are checked before it runs),
 * and the caller evaluates with JSONata instead: a helper never runs twice. Helpers return plain
 * values (helpers.ts), which pass to an enclosing call as they are; names after a helper's call
 * walk its result here unless JSONata would map over it (an array on the way), which JSONata then
 * walks from the result already computed. Any other shape (another operator, a predicate, another
 * built-in function, a binding) gives no evaluator at all; a binding by a helper's or built-in's
 * name declines at run time. `test/unit/mapping/fast-eval.test.ts` holds it to JSONata's results,
 * error positions and order of helper calls.
 */
import jsonata from 'jsonata';
import type { HelperFn } from './helpers.js';

/** The evaluator could not give JSONata's answer for this input: evaluate with JSONata. */
export const SLOW: unique symbol = Symbol('evaluate with JSONata');

type Node = Record<string, unknown>;
type Bindings = Readonly<Record<string, unknown>>;

export type FastEvaluator = (input: unknown, bindings: Bindings) => unknown;

/**
 * A compiled node. Pure nodes call no helper: run may return SLOW. A node that calls helpers has
 * `ready`, true when run will not return SLOW (checked without calling anything), and its run is
 * only made after ready said so.
 */
interface Compiled {
  readonly run: FastEvaluator;
  readonly ready?: (input: unknown, bindings: Bindings) => boolean;
}

const own = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** Exactly these keys (JSONata marks predicates, stages, grouping and the like with more). */
function shaped(n: unknown, type: string, keys: readonly string[]): n is Node {
  if (n === null || typeof n !== 'object' || (n as Node)['type'] !== type) return false;
  for (const k of Object.keys(n)) if (!keys.includes(k)) return false;
  return true;
}

const LEAF = ['type', 'value', 'position'] as const;
const CALL = ['type', 'name', 'value', 'position', 'arguments', 'procedure'] as const;

/** JSONata's lookup of one name in one (non-sequence) value. */
function step(value: unknown, name: string): unknown {
  if (Array.isArray(value)) return SLOW;
  if (value !== null && typeof value === 'object' && own(value, name)) return (value as Node)[name];
  return undefined;
}

/** Values JSONata passes through untouched; an array or a function would need its sequence rules. */
const plain = (v: unknown): unknown => (Array.isArray(v) || typeof v === 'function' ? SLOW : v);

const isReady = (c: Compiled, input: unknown, bindings: Bindings): boolean =>
  c.ready ? c.ready(input, bindings) : c.run(input, bindings) !== SLOW;

function variable(name: string): FastEvaluator {
  if (name === '') return (input) => plain(input);
  // A name that is not a binding may be a built-in or a helper: JSONata's to resolve.
  return (_input, bindings) => (own(bindings, name) ? plain(bindings[name]) : SLOW);
}

/** A binding name no mapping uses: the fallback of callPath holds the helper's result in it. */
const RESULT = '__fastEvalResult';

/**
 * A path that starts with a helper's call (`$borrower().id`): the helper runs once; a plain result
 * is walked here, and one JSONata walks differently (an array, a function on the way) is handed to
 * JSONata with the result already computed (a function that returns it), so the helper never runs
 * twice and the answer is JSONata's own.
 */
function callPath(
  first: Node,
  rest: unknown[],
  helpers: ReadonlyMap<string, HelperFn>,
): Compiled | undefined {
  const head = call(first, helpers);
  const names: string[] = [];
  for (const s of rest) {
    if (!shaped(s, 'name', LEAF) || typeof s['value'] !== 'string' || s['value'].includes('`'))
      return undefined;
    names.push(s['value']);
  }
  if (head === undefined || head.ready === undefined) return undefined; // a built-in: JSONata's
  let fallback: jsonata.Expression | undefined;
  const viaJsonata = (result: unknown): Promise<unknown> => {
    fallback ??= jsonata(`$${RESULT}()${names.map((n) => `.\`${n}\``).join('')}`);
    return fallback.evaluate(undefined, { [RESULT]: () => result });
  };
  const walk = (result: unknown): unknown => {
    let v = result;
    for (const name of names) {
      if (v === undefined) return undefined;
      if (plain(v) === SLOW) return viaJsonata(result);
      v = step(v, name);
    }
    return plain(v) === SLOW ? viaJsonata(result) : v;
  };
  return {
    ready: head.ready,
    run: (input, bindings) => {
      const r = head.run(input, bindings);
      return r instanceof Promise ? r.then(walk) : walk(r);
    },
  };
}

function path(n: Node, helpers: ReadonlyMap<string, HelperFn>): Compiled | undefined {
  const steps = n['steps'];
  if (!Array.isArray(steps) || steps.length === 0) return undefined;
  const first: unknown = steps[0];
  if (shaped(first, 'function', CALL)) return callPath(first, steps.slice(1), helpers);
  const start = shaped(first, 'variable', LEAF) ? variable(String(first['value'])) : null;
  const names: string[] = [];
  for (const s of start === null ? steps : steps.slice(1)) {
    if (!shaped(s, 'name', LEAF) || typeof s['value'] !== 'string') return undefined;
    names.push(s['value']);
  }
  return {
    run: (input, bindings) => {
      // A path that starts with a name maps over an array input; one that starts with a variable does not.
      let v: unknown = start === null ? (Array.isArray(input) ? SLOW : input) : start(input, bindings);
      for (const name of names) {
        if (v === SLOW || v === undefined) return v;
        v = step(v, name);
      }
      return v === SLOW ? v : plain(v);
    },
  };
}

/**
 * JSONata's effective boolean value (fn.boolean): arrays by their items, a function false. SLOW
 * for a number out of range, which JSONata refuses with its own error (see truthOf).
 */
function truthy(v: unknown): boolean | typeof SLOW {
  if (v === undefined || v === null) return false;
  if (typeof v === 'string') return v.length > 0;
  if (typeof v === 'number') return Number.isFinite(v) ? v !== 0 : SLOW;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'function') return false;
  if (Array.isArray(v)) {
    if (v.length === 1) return truthy(v[0]);
    let any = false;
    for (const x of v) {
      const t = truthy(x);
      if (t === SLOW) return SLOW;
      any ||= t;
    }
    return any;
  }
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return SLOW;
}

let truthExpr: jsonata.Expression | undefined;

/** A value's truth as a condition takes it, by JSONata itself (its error for a number out of range). */
function truthOf(v: unknown): Promise<boolean> {
  truthExpr ??= jsonata(`$${RESULT}() ? true : false`);
  return truthExpr.evaluate(undefined, { [RESULT]: () => v }) as Promise<boolean>;
}

/** JSONata's isDeepEqual (`=` and `!=`): arrays item by item, objects by the same own names and values. */
function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  const ak = Object.getOwnPropertyNames(a).sort();
  const bk = Object.getOwnPropertyNames(b).sort();
  if (ak.length !== bk.length || ak.some((k, i) => k !== bk[i])) return false;
  return ak.every((k) => deepEqual((a as Node)[k], (b as Node)[k]));
}

const COMPARISONS: Readonly<Record<string, (a: string | number, b: string | number) => boolean>> = {
  '<': (a, b) => a < b,
  '<=': (a, b) => a <= b,
  '>': (a, b) => a > b,
  '>=': (a, b) => a >= b,
};

/** JSONata's operator over two settled operands, or SLOW where it would raise (its error, its position). */
function operator(op: string): ((a: unknown, b: unknown) => unknown) | undefined {
  if (op === '&')
    // $string of a string is itself, of nothing ''; of a number or an object it has rules: JSONata's.
    return (a, b) => {
      const ta = a === undefined ? '' : typeof a === 'string' ? a : SLOW;
      const tb = b === undefined ? '' : typeof b === 'string' ? b : SLOW;
      return ta === SLOW || tb === SLOW ? SLOW : ta + tb;
    };
  if (op === '=' || op === '!=')
    // JSONata: nothing equals nothing (false either way); else deep equality. Never raises.
    return (a, b) => (a === undefined || b === undefined ? false : deepEqual(a, b) !== (op === '!='));
  const compare = own(COMPARISONS, op) ? COMPARISONS[op] : undefined;
  if (compare === undefined) return undefined;
  return (a, b) => {
    const ta = typeof a;
    const tb = typeof b;
    const comparable = (t: string): boolean => t === 'undefined' || t === 'string' || t === 'number';
    if (!comparable(ta) || !comparable(tb)) return SLOW; // T2010
    if (a === undefined || b === undefined) return undefined;
    if (ta !== tb) return SLOW; // T2009
    return compare(a as string | number, b as string | number);
  };
}

function binary(n: Node, helpers: ReadonlyMap<string, HelperFn>): Compiled | undefined {
  const op = n['value'];
  const apply = typeof op === 'string' ? operator(op) : undefined;
  if (apply === undefined) return undefined;
  const l = compile(n['lhs'], helpers);
  const r = compile(n['rhs'], helpers);
  if (l === undefined || r === undefined) return undefined;
  const pure = !l.ready && !r.ready;
  // An operator that may decline (SLOW) takes pure operands only: it must decline before any helper ran.
  if (!pure && op !== '=' && op !== '!=') return undefined;
  // JSONata evaluates the left operand, then the right, then applies the operator.
  const withRight = (a: unknown, input: unknown, bindings: Bindings): unknown => {
    const b = r.run(input, bindings);
    if (b === SLOW) return SLOW;
    return b instanceof Promise ? b.then((bv: unknown) => apply(a, bv)) : apply(a, b);
  };
  const run: FastEvaluator = (input, bindings) => {
    const a = l.run(input, bindings);
    if (a === SLOW) return SLOW;
    return a instanceof Promise
      ? a.then((av: unknown) => withRight(av, input, bindings))
      : withRight(a, input, bindings);
  };
  if (pure) return { run };
  return { run, ready: (input, bindings) => isReady(l, input, bindings) && isReady(r, input, bindings) };
}

function condition(n: Node, helpers: ReadonlyMap<string, HelperFn>): Compiled | undefined {
  const cond = compile(n['condition'], helpers);
  const then = compile(n['then'], helpers);
  const otherwise = n['else'] === undefined ? null : compile(n['else'], helpers);
  if (cond === undefined || then === undefined || otherwise === undefined) return undefined;
  const branch = (t: boolean): Compiled | null => (t ? then : otherwise);
  const runBranch = (b: Compiled | null, input: unknown, bindings: Bindings): unknown =>
    b === null ? undefined : b.run(input, bindings);
  if (cond.ready) {
    // A helper decides: both branches are checked before it runs (neither may decline after it),
    // and its value's truth is JSONata's (a number out of range: JSONata's own error).
    const decide = (c: unknown, input: unknown, bindings: Bindings): unknown => {
      const t = truthy(c);
      if (t !== SLOW) return runBranch(branch(t), input, bindings);
      return truthOf(c).then((tt) => runBranch(branch(tt), input, bindings));
    };
    return {
      ready: (input, bindings) =>
        isReady(cond, input, bindings) &&
        isReady(then, input, bindings) &&
        (otherwise === null || isReady(otherwise, input, bindings)),
      run: (input, bindings) => {
        const c = cond.run(input, bindings);
        return c instanceof Promise
          ? c.then((cv: unknown) => decide(cv, input, bindings))
          : decide(c, input, bindings);
      },
    };
  }
  /** The branch the condition picks (null: no else), or SLOW. */
  const pick = (input: unknown, bindings: Bindings): Compiled | null | typeof SLOW => {
    const c = cond.run(input, bindings);
    if (c === SLOW) return SLOW;
    const t = truthy(c);
    return t === SLOW ? SLOW : branch(t);
  };
  const run: FastEvaluator = (input, bindings) => {
    const b = pick(input, bindings);
    return b === SLOW ? SLOW : runBranch(b, input, bindings);
  };
  if (!then.ready && !otherwise?.ready) return { run };
  return {
    run,
    ready: (input, bindings) => {
      const b = pick(input, bindings);
      return b !== SLOW && (b === null || isReady(b, input, bindings));
    },
  };
}

/** A helper's result as JSONata's apply and evaluate leave it: a generator's first value, a sequence unwrapped. */
function settled(r: unknown): unknown {
  if (r === null || typeof r !== 'object') return r;
  if (Symbol.iterator in r && typeof (r as { next?: unknown }).next === 'function')
    return (r as unknown as Iterator<unknown>).next().value;
  if (
    Array.isArray(r) &&
    (r as { sequence?: unknown }).sequence === true &&
    !('tupleStream' in r && r.tupleStream)
  ) {
    const keep = (r as { keepSingleton?: unknown }).keepSingleton === true;
    return r.length === 0 ? undefined : r.length === 1 && !keep ? r[0] : r;
  }
  return r;
}

/** What a helper sees as `this`: the bindings by name, and the input, as JSONata's focus gives them. */
function focusOf(input: unknown, bindings: Bindings): jsonata.Focus {
  return {
    environment: { lookup: (name: string): unknown => (own(bindings, name) ? bindings[name] : undefined) },
    input,
  } as unknown as jsonata.Focus;
}

/** JSONata's code points of a string (its stringToArray): what $length counts and $substring cuts. */
const codePoints = (v: string): string[] => Array.from(v);

const isNumberOrNothing = (v: unknown): v is number | undefined => v === undefined || typeof v === 'number';

/**
 * JSONata built-ins a mapping uses most, where no helper or binding takes the name: their argument
 * counts, and each as JSONata computes it, SLOW where its signature would raise (or would take the
 * input in place of a missing text: JSONata's to decide).
 */
const BUILT_INS: Readonly<
  Record<string, { min: number; max: number; fn: (args: unknown[]) => unknown; total?: true }>
> = {
  // total: never declines, so its argument may call a helper.
  exists: { min: 1, max: 1, total: true, fn: ([v]) => v !== undefined },
  number: {
    min: 1,
    max: 1,
    // JSONata's $number of a number, decimal text or a boolean; other text (0x… included) and values: JSONata's.
    fn: ([v]) => {
      if (v === undefined || typeof v === 'number') return v;
      if (v === true) return 1;
      if (v === false) return 0;
      if (typeof v !== 'string') return SLOW;
      if (/^-?[0-9]+(\.[0-9]+)?([Ee][-+]?[0-9]+)?$/.test(v) && Number.isFinite(Number(v)))
        return parseFloat(v);
      return SLOW;
    },
  },
  trim: {
    min: 1,
    max: 1,
    fn: ([v]) => {
      if (v === undefined) return undefined;
      if (typeof v !== 'string') return SLOW; // its signature's error: JSONata's to raise
      let t = v.replace(/[ \t\n\r]+/gm, ' ');
      if (t.startsWith(' ')) t = t.substring(1);
      if (t.endsWith(' ')) t = t.substring(0, t.length - 1);
      return t;
    },
  },
  length: {
    min: 1,
    max: 1,
    fn: ([v]) => (v === undefined ? undefined : typeof v === 'string' ? codePoints(v).length : SLOW),
  },
  substring: {
    min: 2,
    max: 3,
    fn: ([str, start, length]) => {
      if (str !== undefined && typeof str !== 'string') return SLOW;
      if (!isNumberOrNothing(start) || !isNumberOrNothing(length)) return SLOW;
      if (str === undefined) return undefined;
      // JSONata's substring, step by step (an absent start or length behaves as it does there).
      const chars = codePoints(str);
      let from = start as number;
      if (chars.length + from < 0) from = 0;
      if (length !== undefined) {
        if (length <= 0) return '';
        const end = from >= 0 ? from + length : chars.length + from + length;
        return chars.slice(from, end).join('');
      }
      return chars.slice(from).join('');
    },
  },
};

function call(n: Node, helpers: ReadonlyMap<string, HelperFn>): Compiled | undefined {
  const proc = n['procedure'];
  const rawArgs = n['arguments'];
  if (n['name'] !== undefined || !shaped(proc, 'variable', LEAF) || typeof proc['value'] !== 'string')
    return undefined;
  if (!Array.isArray(rawArgs)) return undefined;
  const name = proc['value'];
  const args = rawArgs.map((a) => compile(a, helpers));
  if (args.some((a) => a === undefined)) return undefined;
  const compiled = args as Compiled[];
  const helper = helpers.get(name);
  const builtIn = own(BUILT_INS, name) ? BUILT_INS[name] : undefined;
  if (helper === undefined) {
    if (builtIn === undefined || compiled.length < builtIn.min || compiled.length > builtIn.max)
      return undefined;
    if (!compiled.some((a) => a.ready))
      return {
        run: (input, bindings) => {
          if (own(bindings, name)) return SLOW; // a binding by the name shadows the built-in
          const values: unknown[] = [];
          for (const a of compiled) {
            const v = a.run(input, bindings);
            if (v === SLOW) return SLOW;
            values.push(v);
          }
          return builtIn.fn(values);
        },
      };
    if (builtIn.total !== true) return undefined; // one that may decline takes helper-free arguments only
    return {
      ready: (input, bindings) => !own(bindings, name) && compiled.every((a) => isReady(a, input, bindings)),
      run: (input, bindings) => {
        const values = compiled.map((a) => a.run(input, bindings));
        return values.some((v) => v instanceof Promise)
          ? Promise.all(values).then((vs) => builtIn.fn(vs))
          : builtIn.fn(values);
      },
    };
  }
  const position = n['position'];
  // As JSONata's apply marks a helper's error: the call's position, the helper's name.
  const mark = (err: unknown): never => {
    if (err !== null && typeof err === 'object') {
      const e = err as { token?: unknown; position?: unknown };
      if (e.token === undefined) e.token = name;
      e.position = position;
    }
    throw err;
  };
  return {
    // JSONata wraps an array input in a sequence; a binding by the helper's name shadows the helper.
    ready: (input, bindings) =>
      !Array.isArray(input) && !own(bindings, name) && compiled.every((a) => isReady(a, input, bindings)),
    run: (input, bindings) => {
      const values = compiled.map((a) => a.run(input, bindings));
      try {
        const r = settled(helper.apply(focusOf(input, bindings), values));
        return r instanceof Promise ? r.then(settled, mark) : r;
      } catch (err) {
        return mark(err);
      }
    },
  };
}

function compile(n: unknown, helpers: ReadonlyMap<string, HelperFn>): Compiled | undefined {
  if (shaped(n, 'string', LEAF) || shaped(n, 'number', LEAF) || shaped(n, 'value', LEAF)) {
    const v = n['value'];
    return { run: () => v };
  }
  if (shaped(n, 'variable', LEAF)) return { run: variable(String(n['value'])) };
  if (shaped(n, 'path', ['type', 'steps'])) return path(n, helpers);
  if (shaped(n, 'binary', ['type', 'value', 'position', 'lhs', 'rhs'])) return binary(n, helpers);
  if (shaped(n, 'condition', ['type', 'position', 'condition', 'then', 'else'])) return condition(n, helpers);
  if (shaped(n, 'function', CALL)) return call(n, helpers);
  // Parentheses around one expression: JSONata's block, a new frame that only a binding would use.
  if (shaped(n, 'block', ['type', 'position', 'expressions'])) {
    const inner: unknown = n['expressions'];
    return Array.isArray(inner) && inner.length === 1 ? compile(inner[0], helpers) : undefined;
  }
  return undefined;
}

/**
 * The evaluator for a compiled expression's AST, or undefined when the expression is not one of
 * the shapes above. Its result is the value, a promise of it (a helper that returns one), or SLOW.
 */
export function fastEvaluator(
  ast: unknown,
  helpers: ReadonlyMap<string, HelperFn>,
): FastEvaluator | undefined {
  const c = compile(ast, helpers);
  if (c === undefined) return undefined;
  const { run, ready } = c;
  // An array input: JSONata wraps it in a sequence.
  if (ready === undefined) return (input, bindings) => (Array.isArray(input) ? SLOW : run(input, bindings));
  return (input, bindings) => (Array.isArray(input) || !ready(input, bindings) ? SLOW : run(input, bindings));
}
