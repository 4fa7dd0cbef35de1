/**
 * A synchronous evaluator for the commonest mapping expressions, with JSONata's own result: a
 * literal (`"business"`, `12`, `null`), a path of plain names (`state`, `product.id`), a variable
 * with names after it (`$defaults.branch`, `$loan.id`, `$`), and a call of one of our helpers
 * whose arguments are all of those (`$fit(name, 100)`, `$lookup("loanType", type)`, `$cif($)`).
 *
 * Why: JSONata 2 evaluates every node as an async function, so a field as plain as `state` costs a
 * dozen promises, and on Node 20 every promise also runs the AsyncLocalStorage hooks the store's
 * transactions need. Most fields of a mapping are of these shapes.
 *
 * It is exact, or it declines: whatever JSONata would treat as a sequence (an array anywhere on
 * the path or in a result, an array input) returns SLOW before any helper is called, and the
 * caller evaluates with JSONata instead, so a helper never runs twice. Anything else in the
 * expression (an operator, a predicate, a built-in function, a binding that shadows a helper)
 * gives no evaluator at all. `test/unit/mapping/fast-eval.test.ts` holds it to JSONata's results
 * and error positions.
 */
import type jsonata from 'jsonata';
import type { HelperFn } from './helpers.js';

/** The evaluator could not give JSONata's answer for this input: evaluate with JSONata. */
export const SLOW: unique symbol = Symbol('evaluate with JSONata');

export type FastEvaluator = (input: unknown, bindings: Readonly<Record<string, unknown>>) => unknown;

type Node = Record<string, unknown>;
/** A pure operand: no helper is called to get its value. */
type Operand = (input: unknown, bindings: Readonly<Record<string, unknown>>) => unknown;

const own = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** Exactly these keys (JSONata marks predicates, stages, grouping and the like with more). */
function shaped(n: unknown, type: string, keys: readonly string[]): n is Node {
  if (n === null || typeof n !== 'object' || (n as Node)['type'] !== type) return false;
  for (const k of Object.keys(n)) if (!keys.includes(k)) return false;
  return true;
}

const LEAF = ['type', 'value', 'position'] as const;

/** JSONata's lookup of one name in one (non-sequence) value. */
function step(value: unknown, name: string): unknown {
  if (Array.isArray(value)) return SLOW;
  if (value !== null && typeof value === 'object' && own(value, name)) return (value as Node)[name];
  return undefined;
}

/** Values JSONata passes through untouched; an array or a function would need its sequence rules. */
const plain = (v: unknown): unknown => (Array.isArray(v) || typeof v === 'function' ? SLOW : v);

function operand(n: unknown): Operand | undefined {
  if (shaped(n, 'string', LEAF) || shaped(n, 'number', LEAF) || shaped(n, 'value', LEAF)) {
    const v = n['value'];
    return () => v;
  }
  if (shaped(n, 'variable', LEAF)) return variable(String(n['value']));
  if (!shaped(n, 'path', ['type', 'steps'])) return undefined;
  const steps = n['steps'];
  if (!Array.isArray(steps) || steps.length === 0) return undefined;
  const first: unknown = steps[0];
  const start = shaped(first, 'variable', LEAF) ? variable(String(first['value'])) : null;
  const names: string[] = [];
  for (const s of start === null ? steps : steps.slice(1)) {
    if (!shaped(s, 'name', LEAF) || typeof s['value'] !== 'string') return undefined;
    names.push(s['value']);
  }
  return (input, bindings) => {
    // A path that starts with a name maps over an array input; one that starts with a variable does not.
    let v: unknown = start === null ? (Array.isArray(input) ? SLOW : input) : start(input, bindings);
    for (const name of names) {
      if (v === SLOW || v === undefined) return v;
      v = step(v, name);
    }
    return v === SLOW ? v : plain(v);
  };
}

function variable(name: string): Operand {
  if (name === '') return (input) => plain(input);
  // A name that is not a binding may be a built-in or a helper: JSONata's to resolve.
  return (_input, bindings) => (own(bindings, name) ? plain(bindings[name]) : SLOW);
}

/** What a helper sees as `this`: the bindings by name, and the input, as JSONata's focus gives them. */
function focusOf(input: unknown, bindings: Readonly<Record<string, unknown>>): jsonata.Focus {
  return {
    environment: { lookup: (name: string): unknown => (own(bindings, name) ? bindings[name] : undefined) },
    input,
  } as unknown as jsonata.Focus;
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

function helperCall(n: Node, helpers: ReadonlyMap<string, HelperFn>): FastEvaluator | undefined {
  const proc = n['procedure'];
  if (!shaped(proc, 'variable', LEAF) || typeof proc['value'] !== 'string') return undefined;
  const name = proc['value'];
  const helper = helpers.get(name);
  const args = n['arguments'];
  if (helper === undefined || !Array.isArray(args)) return undefined;
  const operands = args.map(operand);
  if (operands.some((o) => o === undefined)) return undefined;
  const ops = operands as Operand[];
  const position = n['position'];
  return (input, bindings) => {
    // JSONata wraps an array input in a sequence; a binding by the helper's name shadows the helper.
    if (Array.isArray(input) || own(bindings, name)) return SLOW;
    const values: unknown[] = [];
    for (const op of ops) {
      const v = op(input, bindings);
      if (v === SLOW) return SLOW;
      values.push(v);
    }
    // As JSONata's apply marks a helper's error: the call's position, the helper's name.
    const mark = (err: unknown): never => {
      if (err !== null && typeof err === 'object') {
        const e = err as { token?: unknown; position?: unknown };
        if (e.token === undefined) e.token = name;
        e.position = position;
      }
      throw err;
    };
    try {
      const r = settled(helper.apply(focusOf(input, bindings), values));
      return r instanceof Promise ? r.then(settled, mark) : r;
    } catch (err) {
      return mark(err);
    }
  };
}

/**
 * The evaluator for a compiled expression's AST, or undefined when the expression is not one of
 * the shapes above. Its result is the value, a promise of it (a helper that returns one), or SLOW.
 */
export function fastEvaluator(
  ast: unknown,
  helpers: ReadonlyMap<string, HelperFn>,
): FastEvaluator | undefined {
  if (
    shaped(ast, 'function', ['type', 'name', 'value', 'position', 'arguments', 'procedure']) &&
    ast['name'] === undefined
  )
    return helperCall(ast, helpers);
  const op = operand(ast);
  if (op === undefined) return undefined;
  return (input, bindings) => (Array.isArray(input) ? SLOW : op(input, bindings));
}
