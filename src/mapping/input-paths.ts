import type { z } from 'zod';
import {
  boardingSchema,
  businessSchema,
  documentSchema,
  loanSchema,
  personSchema,
  refSchema,
  requirementSchema,
} from '../contract/schemas.js';
import { pictureProblem } from '../lib/calendar.js';
import type { AnalysisProblem, ExpressionInfo, ExprNode } from './expression.js';
import { HELPER_ARITY, JSONATA_BUILTINS } from './helpers.js';
import { didYouMean } from '../lib/did-you-mean.js';

/**
 * What lint knows of the input a mapping reads: the platform's documented fields (the zod schemas
 * in platform/schemas.ts follow ../shared/platform-api.md). A path the platform does not document
 * is almost always a typo (`monthTerm`, `purpse`) that would silently drop an optional field, so
 * lint refuses it with a did-you-mean; `mappings.allowUnknownInput` lets a bank read fields a
 * platform adds later.
 */
export interface InputShape {
  /** How a bank names it in mappings.allowUnknownInput, e.g. loan, person, document.requirement. */
  name: string;
  /** Field → its shape when it is an object (or a list of objects), null when it is a value. */
  fields: ReadonlyMap<string, InputShape | null>;
  /** The spec does not list the object's fields (e.g. the boarding object): nothing to check. */
  open: boolean;
}

const keysOf = (s: z.ZodObject): string[] => Object.keys(s.shape);

function shape(
  name: string,
  values: string[],
  nested: Record<string, InputShape> = {},
  open = false,
): InputShape {
  const fields = new Map<string, InputShape | null>(values.map((k) => [k, null]));
  for (const [k, v] of Object.entries(nested)) fields.set(k, v);
  return { name, fields, open };
}

const REF_KEYS = keysOf(refSchema);
export const LOAN_SHAPE = shape('loan', keysOf(loanSchema), {
  product: shape('loan.product', REF_KEYS),
  stage: shape('loan.stage', REF_KEYS),
  // "Fields of the boarding object: not shown" in the spec: any field may be read.
  boarding: shape('loan.boarding', keysOf(boardingSchema), {}, true),
});
export const BUSINESS_SHAPE = shape('business', keysOf(businessSchema));
export const PERSON_SHAPE = shape('person', keysOf(personSchema));
export const DOCUMENT_SHAPE = shape('document', keysOf(documentSchema), {
  requirement: shape('document.requirement', keysOf(requirementSchema)),
});
const ENTITIES_SHAPE = shape('entities', [], { businesses: BUSINESS_SHAPE, people: PERSON_SHAPE });
/** The mapping input: what `for:` reads, and what $root, $loan, $entities and $documents name. */
export const ROOT_SHAPE = shape('input', [], {
  loan: LOAN_SHAPE,
  entities: ENTITIES_SHAPE,
  documents: DOCUMENT_SHAPE,
});

/** What the expression's context may be: one or more shapes (a union such as business or person), or unknown. */
export type InputContext = readonly InputShape[] | null;

export interface InputCheckOptions {
  /** true: every unknown path passes; a list: these extra fields pass ("person.middleName", "loan.*"). */
  allowUnknown: boolean | readonly string[];
  /** The whole expression is a field's value: an object there is a mistake (loan.product, not loan.product.id). */
  valueExpected: boolean;
}

const isFunctionName = (v: string): boolean => v in HELPER_ARITY || JSONATA_BUILTINS.has(v);
const MONEY = /^(cents|bps)[A-Z]/;
const ARITHMETIC = new Set(['+', '-', '*', '/', '%']);

function nameOffset(n: ExprNode): number {
  return Math.max(0, (n.position ?? 0) - String(n.value).length);
}

function union(shapes: readonly InputShape[]): string {
  return shapes.map((s) => s.name).join(' or ');
}

/** The shapes an expression yields (for `for:` and for the value check); null when lint cannot tell. */
export function typeOf(node: ExprNode | undefined, ctx: InputContext): InputContext {
  if (!node || ctx === null) return null;
  if ((node.type as string) === 'unary' && node.value === '[' && Array.isArray(node.expressions)) {
    const parts = (node.expressions as ExprNode[]).map((e) => typeOf(e, ctx));
    if (parts.some((p) => p === null)) return null;
    return [...new Set(parts.flatMap((p) => p ?? []))];
  }
  if ((node.type as string) !== 'path' || !Array.isArray(node.steps)) return null;
  let cur: InputContext = ctx;
  for (const [i, step] of (node.steps as ExprNode[]).entries()) {
    if (i === 0 && step.type === 'variable') {
      cur =
        step.value === ''
          ? ctx
          : step.value === 'root'
            ? [ROOT_SHAPE]
            : ['loan', 'entities', 'documents'].includes(String(step.value))
              ? [ROOT_SHAPE.fields.get(String(step.value)) as InputShape]
              : null;
      continue;
    }
    if (i === 0 && (step.type as string) === 'unary') {
      cur = typeOf(step, ctx);
      continue;
    }
    if (step.type !== 'name' || cur === null) return null;
    const next: InputShape[] = [];
    for (const s of cur) {
      const f = s.fields.get(String(step.value));
      if (f === undefined) {
        if (s.open) return null;
        continue;
      }
      if (f === null) return i === (node.steps as ExprNode[]).length - 1 ? [] : null;
      next.push(f);
    }
    cur = next.length > 0 ? next : null;
  }
  return cur;
}

function allowed(opt: boolean | readonly string[], shapes: readonly InputShape[], field: string): boolean {
  if (opt === true) return true;
  if (opt === false) return false;
  return shapes.some((s) => opt.includes(`${s.name}.${field}`) || opt.includes(`${s.name}.*`));
}

/**
 * Input paths against the documented fields, a helper named where its value is meant
 * (`$borrower.id`), date pictures with letters `$date` does not know, and arithmetic on cents or
 * basis points (floating point loses a cent: `$centsToDecimal` is exact).
 */
export function checkInputs(
  info: ExpressionInfo,
  ctx: InputContext,
  opts: InputCheckOptions,
): AnalysisProblem[] {
  const problems: AnalysisProblem[] = [];
  const seen = new Set<object>();

  const walkPath = (node: ExprNode, context: InputContext): void => {
    const steps = node.steps as ExprNode[];
    let cur: InputContext = context;
    for (const [i, step] of steps.entries()) {
      if (i === 0 && step.type === 'variable') {
        const v = String(step.value);
        if (isFunctionName(v) && steps.length > 1) {
          const next = steps[1];
          const tail = next?.type === 'name' ? `.${String(next.value)}` : '';
          problems.push({
            offset: Math.max(0, (step.position ?? 0) - v.length - 1),
            message: `$${v} is a function: call it ($${v}()${tail}); without parentheses the path reads nothing`,
          });
          cur = null;
        } else
          cur =
            v === ''
              ? context
              : v === 'root'
                ? [ROOT_SHAPE]
                : ['loan', 'entities', 'documents'].includes(v)
                  ? [ROOT_SHAPE.fields.get(v) as InputShape]
                  : null;
      } else if (step.type === 'name' && cur !== null) {
        const field = String(step.value);
        const next: InputShape[] = [];
        let known = false;
        let open = false;
        for (const s of cur) {
          const f = s.fields.get(field);
          if (s.open && f === undefined) open = true;
          if (f === undefined) continue;
          known = true;
          if (f !== null) next.push(f);
        }
        if (!known && !open && cur.length > 0 && !allowed(opts.allowUnknown, cur, field)) {
          const candidates = new Set(cur.flatMap((s) => [...s.fields.keys()]));
          problems.push({
            offset: nameOffset(step),
            message:
              `unknown input field "${field}" on ${union(cur)}${didYouMean(field, candidates)}: the ` +
              `platform does not document it, so it would always be empty (a field the platform added ` +
              `later: list "${cur[0]?.name ?? ''}.${field}" in config mappings.allowUnknownInput)`,
          });
        }
        cur = known && next.length > 0 ? next : null;
      } else {
        if (i > 0 || step.type !== 'name') walk(step, cur);
        cur = null;
      }
      for (const key of ['stages', 'predicate'] as const) {
        const st = step[key];
        if (Array.isArray(st)) for (const s of st as ExprNode[]) walk(s.expr as ExprNode | undefined, cur);
      }
    }
  };

  const walk = (node: ExprNode | undefined, context: InputContext): void => {
    if (!node || typeof node !== 'object' || seen.has(node)) return;
    seen.add(node);
    if ((node.type as string) === 'path' && Array.isArray(node.steps)) {
      walkPath(node, context);
      return;
    }
    if (node.type === 'lambda') {
      // A lambda's context is wherever it is applied: lint cannot tell.
      walk(node.body as ExprNode | undefined, null);
      return;
    }
    if ((node.type as string) === 'binary' && ARITHMETIC.has(String(node.value))) {
      for (const side of [node.lhs, node.rhs] as Array<ExprNode | undefined>) {
        const steps = side?.steps;
        const last = Array.isArray(steps) ? (steps as ExprNode[]).at(-1) : undefined;
        if (last?.type === 'name' && MONEY.test(String(last.value))) {
          const helper = String(last.value).startsWith('cents')
            ? '$centsToDecimal'
            : '$bpsToPercent (or $bpsToRate)';
          problems.push({
            offset: nameOffset(last),
            message:
              `arithmetic on ${String(last.value)} in floating point can lose a cent ` +
              `(9007199254740993 cents, 0.1 + 0.2): use ${helper}, which is exact`,
          });
        }
      }
    }
    for (const [k, child] of Object.entries(node)) {
      if (k === 'slot' || k === 'tuple' || k === 'procedure') continue;
      if (Array.isArray(child)) for (const c of child) walkAny(c, context);
      else walkAny(child, context);
    }
  };
  const walkAny = (v: unknown, context: InputContext): void => {
    if (v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const x of v) walkAny(x, context);
      return;
    }
    if (typeof (v as ExprNode).type === 'string') walk(v as ExprNode, context);
  };

  walk(info.ast, ctx);

  for (const call of info.calls.values()) {
    if (call.name !== 'date' || call.args.length < 2) continue;
    const pic = call.args[1];
    if (pic?.type !== 'string') continue;
    const problem = pictureProblem(String(pic.value));
    if (problem)
      problems.push({
        offset: Math.max(0, (pic.position ?? 0) - String(pic.value).length - 2),
        message: `$date: ${problem}`,
      });
  }

  if (opts.valueExpected && ctx !== null && info.simplePath !== undefined) {
    const t = typeOf(info.ast, ctx);
    if (t !== null && t.length > 0) {
      const first = t[0] as InputShape;
      const fields = [...first.fields.keys()].slice(0, 4).map((f) => `${info.simplePath ?? ''}.${f}`);
      problems.push({
        offset: 0,
        message:
          `${info.simplePath} is an object (${union(t)}), not a value: pick one ` +
          `of its fields${fields.length > 0 ? `, e.g. ${fields.join(', ')}` : ''}`,
      });
    }
  }
  return problems;
}
