import type jsonata from 'jsonata';
import { HELPER_ARITY, BOUND_VARIABLES, JSONATA_BUILTINS, NON_DETERMINISTIC } from './helpers.js';

/** A function call found in an expression: where it starts and which input paths its arguments read. */
export interface CallSite {
  name: string;
  /** 0-based offset of `$name` in the expression text. */
  start: number;
  args: ExprNode[];
  argPaths: Array<string | undefined>;
}

export type ExprNode = jsonata.ExprNode & Record<string, unknown>;

export interface ExpressionInfo {
  ast: ExprNode;
  /** Function calls keyed by the position JSONata reports for errors raised inside them. */
  calls: Map<number, CallSite>;
  /** The dotted path when the whole expression is one (e.g. loan.centsAmount). */
  simplePath: string | undefined;
  /** First input path the expression reads (for issues that are not tied to a call). */
  firstPath: string | undefined;
  /** Every $variable the expression reads. */
  variables: ReadonlySet<string>;
}

export interface AnalysisProblem {
  /** 0-based offset in the expression text. */
  offset: number;
  message: string;
}

export interface SyntaxProblem {
  offset: number;
  message: string;
}

/** JSONata errors carry `position` (1-based end of the token) and `token`. */
export function syntaxProblemOf(err: unknown): SyntaxProblem {
  const e = err as { position?: number; token?: string; message?: string };
  const token = typeof e.token === 'string' && e.token !== '(end)' ? e.token : '';
  const offset = typeof e.position === 'number' ? Math.max(0, e.position - Math.max(token.length, 1)) : 0;
  return { offset, message: e.message ?? String(err) };
}

/** Dotted path of a path node made only of names, e.g. loan.product.id. */
export function pathText(node: ExprNode | undefined): string | undefined {
  if (!node) return undefined;
  if (node.type === 'name' && typeof node.value === 'string') return node.value;
  if ((node.type as string) !== 'path' || !Array.isArray(node.steps)) return undefined;
  const names: string[] = [];
  for (const s of node.steps as ExprNode[]) {
    if (s.type === 'variable' && s.value === '' && names.length === 0) continue;
    // $loan.x, $entities.x, $documents.x read the input from its root: "$" marks the path absolute
    if (
      s.type === 'variable' &&
      names.length === 0 &&
      (s.value === 'loan' || s.value === 'entities' || s.value === 'documents')
    ) {
      names.push(`$${s.value}`);
      continue;
    }
    if (s.type !== 'name' || typeof s.value !== 'string') return undefined;
    names.push(s.value);
  }
  return names.length > 0 ? names.join('.') : undefined;
}

/** Visits every AST node once (the AST is a tree of plain objects). */
function visit(root: unknown, fn: (n: ExprNode) => void): void {
  const seen = new Set<object>();
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
      return;
    }
    const n = v as ExprNode;
    if (typeof n.type === 'string') fn(n);
    for (const [k, child] of Object.entries(n)) {
      if (k === 'slot' || k === 'tuple') continue;
      walk(child);
    }
  };
  walk(root);
}

function firstPathIn(node: unknown): string | undefined {
  let found: string | undefined;
  visit(node, (n) => {
    if (found === undefined && (n.type as string) === 'path') found = pathText(n);
  });
  return found;
}

export function analyzeExpression(ast: ExprNode): ExpressionInfo {
  const calls = new Map<number, CallSite>();
  visit(ast, (n) => {
    if (
      (n.type === 'function' || n.type === 'partial') &&
      n.procedure?.type === 'variable' &&
      typeof n.procedure.value === 'string'
    ) {
      const name = n.procedure.value;
      const args = (n.arguments ?? []) as ExprNode[];
      const procPos = n.procedure.position ?? 0;
      calls.set(n.position ?? 0, {
        name,
        start: Math.max(0, procPos - name.length - 1),
        args,
        argPaths: args.map((a) => pathText(a) ?? firstPathIn(a)),
      });
    }
  });
  const variables = new Set<string>();
  visit(ast, (n) => {
    if (n.type === 'variable' && typeof n.value === 'string' && n.value !== '') variables.add(n.value);
  });
  return { ast, calls, simplePath: pathText(ast), firstPath: firstPathIn(ast), variables };
}

export interface AnalysisContext {
  /** Table name → its keys (null: the table failed to load, already reported; skip key checks). */
  lookupTables: ReadonlyMap<string, ReadonlySet<string> | null>;
  /** Variables bound by the target (its `let` names). */
  extraVariables?: ReadonlySet<string>;
  /** Names available as $defaults.<name>; undefined disables the check. */
  defaultNames: ReadonlySet<string> | undefined;
}

/**
 * Static checks: unknown functions and variables, helper arity, lookup tables and literal keys,
 * unknown $defaults names, and non-deterministic built-ins.
 */
export function checkExpression(info: ExpressionInfo, ctx: AnalysisContext): AnalysisProblem[] {
  const problems: AnalysisProblem[] = [];
  const local = new Set<string>();
  const procedureNodes = new Set<object>();
  visit(info.ast, (n) => {
    if ((n.type as string) === 'bind' && (n.lhs as ExprNode | undefined)?.type === 'variable')
      local.add(String((n.lhs as ExprNode).value));
    if (n.type === 'lambda')
      for (const a of (n.arguments ?? []) as ExprNode[])
        if (a.type === 'variable') local.add(String(a.value));
    for (const k of ['index', 'focus'] as const) if (typeof n[k] === 'string') local.add(n[k]);
    if ((n.type === 'function' || n.type === 'partial') && n.procedure) procedureNodes.add(n.procedure);
  });
  const known = (name: string): boolean =>
    name === '' ||
    name === '$' ||
    local.has(name) ||
    ctx.extraVariables?.has(name) === true ||
    name in HELPER_ARITY ||
    JSONATA_BUILTINS.has(name) ||
    (BOUND_VARIABLES as readonly string[]).includes(name);

  for (const call of info.calls.values()) {
    const { name, start, args } = call;
    if (local.has(name)) continue;
    if (NON_DETERMINISTIC.has(name)) {
      problems.push({
        offset: start,
        message: `$${name}() is not allowed: a mapping must give the same records for the same input`,
      });
      continue;
    }
    const arity = HELPER_ARITY[name];
    if (!arity && !JSONATA_BUILTINS.has(name)) {
      problems.push({
        offset: start,
        message: `unknown function $${name}: not a helper nor a JSONata built-in (see docs/mapping-guide.md, Helpers)`,
      });
      continue;
    }
    if (arity && (args.length < arity[0] || args.length > arity[1])) {
      const want = arity[0] === arity[1] ? `${arity[0]}` : `${arity[0]} to ${arity[1]}`;
      problems.push({
        offset: start,
        message: `$${name} takes ${want} argument${arity[1] === 1 ? '' : 's'}, got ${args.length}`,
      });
      continue;
    }
    if (name === 'lookup' && args.length >= 2) {
      const [table, key] = args;
      if (table?.type !== 'string') {
        problems.push({
          offset: start,
          message: '$lookup: the table name must be a quoted string so lint can check it',
        });
      } else {
        const keys = ctx.lookupTables.get(String(table.value));
        if (keys === null) {
          // the table's own problem is reported where it is declared
        } else if (keys === undefined) {
          problems.push({
            offset: (table.position ?? start) - String(table.value).length - 2,
            message:
              `unknown lookup table "${String(table.value)}" (known: ` +
              `${[...ctx.lookupTables.keys()].join(', ') || 'none'})`,
          });
        } else if (
          key &&
          (key.type === 'string' || key.type === 'number') &&
          args.length === 2 &&
          !keys.has(String(key.value))
        ) {
          problems.push({
            offset: Math.max(
              0,
              (key.position ?? start) - String(key.value).length - (key.type === 'string' ? 2 : 0),
            ),
            message: `lookup table "${String(table.value)}" has no key "${String(key.value)}"`,
          });
        }
      }
    }
  }
  visit(info.ast, (n) => {
    if (n.type !== 'variable' || procedureNodes.has(n) || typeof n.value !== 'string') return;
    if (!known(n.value)) {
      problems.push({
        offset: Math.max(0, (n.position ?? 0) - n.value.length - 1),
        message: `unknown variable $${n.value} (bound: ${BOUND_VARIABLES.map((v) => `$${v}`).join(', ')})`,
      });
    }
  });
  if (ctx.defaultNames) {
    visit(info.ast, (n) => {
      if ((n.type as string) !== 'path' || !Array.isArray(n.steps)) return;
      const steps = n.steps as ExprNode[];
      for (let i = 0; i + 1 < steps.length; i++) {
        const s = steps[i];
        const next = steps[i + 1];
        if (
          s?.type === 'variable' &&
          s.value === 'defaults' &&
          next?.type === 'name' &&
          typeof next.value === 'string' &&
          !ctx.defaultNames?.has(next.value)
        ) {
          problems.push({
            offset: Math.max(0, (next.position ?? 0) - next.value.length),
            message:
              `unknown default "${next.value}": declare it under defaults: ` +
              `in the mapping file or in config mappings.defaults`,
          });
        }
      }
    });
  }
  return problems;
}
