import type { CompiledExpression, CompiledMapping, CompiledTarget, LintProblem } from './compile.js';
import type { ExprNode } from './expression.js';
import type { LayoutColumnsView } from './types.js';

/**
 * Lint warnings (not errors: the set still loads) where a platform id flows into a place of
 * fixed size: a field with `maxLength`, or a column of a fixed-width file. The platform spec gives
 * ids no length or shape (the sandbox makes them up to 64 characters, UUIDs among them), so such
 * a loan is refused by the core or quarantined the day the platform's ids grow. The warning names
 * the bank's number to use instead: the loan's account number (`$accountNumber()`) or the
 * customer's CIF (`$cif(entity)`).
 */

/** What a platform id names, which decides the bank number to suggest. */
export type IdKind = 'loan' | 'entity' | 'other';

export interface IdRead {
  /** The expression text that reads the id, e.g. `$loan.id`, `$borrower().id`, `id`. */
  path: string;
  kind: IdKind;
}

/**
 * Helpers and built-ins whose result is their first argument's text, whole. ($fit and $substring
 * cut it: a mapping that cuts on purpose (a display name) has dealt with the length.)
 */
const PASS_THROUGH = new Set(['string', 'trim', 'uppercase', 'lowercase', 'pad', 'review']);

function forKind(target: CompiledTarget): IdKind {
  const src = target.forEach?.source.trim() ?? 'loan';
  if (src === 'loan' || src === '$loan') return 'loan';
  if (src.includes('entities')) return 'entity';
  return 'other';
}

function stepsOf(node: ExprNode): ExprNode[] | undefined {
  return (node.type as string) === 'path' && Array.isArray(node.steps)
    ? (node.steps as ExprNode[])
    : undefined;
}

/** The platform id an expression's value is (or carries, in a concatenation), if any. */
export function platformIdIn(node: ExprNode | undefined, target: CompiledTarget): IdRead | undefined {
  if (!node) return undefined;
  const type = node.type as string;
  if (type === 'binary' && node.value === '&')
    return platformIdIn(node.lhs as ExprNode, target) ?? platformIdIn(node.rhs as ExprNode, target);
  if (type === 'condition')
    return (
      platformIdIn(node.then as ExprNode, target) ?? platformIdIn(node.else as ExprNode | undefined, target)
    );
  if (type === 'block' && Array.isArray(node.expressions))
    return platformIdIn((node.expressions as ExprNode[]).at(-1), target);
  if (type === 'function') {
    const name: unknown = (node.procedure as ExprNode | undefined)?.value;
    if (typeof name === 'string' && PASS_THROUGH.has(name))
      return platformIdIn(((node.arguments ?? []) as ExprNode[])[0], target);
    return undefined;
  }
  const steps = stepsOf(node) ?? (type === 'name' ? [node] : undefined);
  if (!steps || steps.length === 0) return undefined;
  const last = steps[steps.length - 1] as ExprNode;
  if (last.type !== 'name' || last.value !== 'id') return undefined;
  const head = steps.slice(0, -1);
  if (head.length === 0) return { path: 'id', kind: forKind(target) };
  const first = head[0] as ExprNode;
  if (head.length === 1 && first.type === 'variable' && first.value === 'loan')
    return { path: '$loan.id', kind: 'loan' };
  if (head.length === 1 && first.type === 'function') {
    const fn: unknown = (first.procedure as ExprNode | undefined)?.value;
    if (fn === 'borrower') return { path: '$borrower().id', kind: 'entity' };
  }
  if (head.length === 1 && first.type === 'name' && first.value === 'loan')
    return { path: 'loan.id', kind: 'loan' };
  const text = head
    .map((s) => (s.type === 'variable' ? `$${String(s.value)}` : s.type === 'name' ? String(s.value) : '…'))
    .join('.');
  return {
    path: `${text}.id`,
    kind: head.some((s) => s.value === 'entities' || s.value === 'businesses' || s.value === 'people')
      ? 'entity'
      : 'other',
  };
}

export function bankNumberFor(kind: IdKind): string {
  if (kind === 'loan')
    return "use the loan's account number instead: $accountNumber() (identity.accountNumbers)";
  if (kind === 'entity')
    return "use the customer's CIF instead: $cif(entity), e.g. $cif($borrower()) (identity.customerNumbers)";
  return 'keep it out of columns of fixed size (a CSV column has none)';
}

const NO_LENGTH = 'platform ids have no fixed length or shape (UUIDs, opaque ids of 64 characters and more)';

/** Fields with maxLength fed by a platform id. */
export function idIntoLimitedFields(mapping: CompiledMapping): LintProblem[] {
  const out: LintProblem[] = [];
  for (const target of mapping.targets) {
    for (const field of target.fields) {
      const max = field.check.maxLength;
      if (max === undefined) continue;
      const read = platformIdIn(field.expr.info.ast, target);
      if (!read) continue;
      out.push(
        at(
          field.expr,
          `warning: ${target.name}.${field.name}: the platform id ${read.path} goes ` +
            `into a field of maxLength ${max}; ${NO_LENGTH}: ${bankNumberFor(read.kind)}`,
        ),
      );
    }
  }
  return out;
}

function at(ce: CompiledExpression, message: string): LintProblem {
  return { file: ce.file, line: ce.pos.line, column: ce.pos.column, message };
}

/**
 * For a layout: what a fixed-width column of record type `type` would carry, when that is a
 * platform id (source externalId / loanId, or a field fed by an id).
 */
export function idReadByColumn(
  mapping: CompiledMapping | undefined,
  type: string,
  column: { source?: string; field?: string },
): IdRead | undefined {
  if (column.source === 'loanId') return { path: 'the loan id (source: loanId)', kind: 'loan' };
  if (!mapping) return undefined;
  for (const target of mapping.targets) {
    if (target.type !== type) continue;
    if (column.source === 'externalId') {
      const read = platformIdIn(target.externalId.info.ast, target);
      if (read) return { path: `${read.path} (source: externalId)`, kind: read.kind };
    }
    if (column.field !== undefined) {
      const field = target.fields.find((f) => f.name === column.field);
      const read = field ? platformIdIn(field.expr.info.ast, target) : undefined;
      if (read) return { path: `${read.path} (field ${column.field})`, kind: read.kind };
    }
  }
  return undefined;
}

export function idIntoFixedColumnMessage(file: string, column: string, length: number, read: IdRead): string {
  return (
    `warning: ${file} ${column}: the platform id ${read.path} goes into a ` +
    `fixed-width column of ${length} bytes; ${NO_LENGTH}: ${bankNumberFor(read.kind)}`
  );
}

/**
 * Whether an expression's value is the loan's account number: `$accountNumber()` (possibly through a
 * pass-through helper).
 */
function isAccountNumber(node: ExprNode | undefined): boolean {
  if (!node || (node.type as string) !== 'function') return false;
  const name: unknown = (node.procedure as ExprNode | undefined)?.value;
  if (name === 'accountNumber') return true;
  return (
    typeof name === 'string' &&
    PASS_THROUGH.has(name) &&
    isAccountNumber(((node.arguments ?? []) as ExprNode[])[0])
  );
}

/** Where `$accountNumber()` goes into a place of fixed size: fields with maxLength, fixed-width columns. */
export function accountNumberSinks(
  mapping: CompiledMapping,
  layout: LayoutColumnsView | undefined,
): Array<{ where: string; size: number }> {
  const out: Array<{ where: string; size: number }> = [];
  const fieldsByType = new Map<string, Set<string>>();
  for (const target of mapping.targets) {
    for (const field of target.fields) {
      if (!isAccountNumber(field.expr.info.ast)) continue;
      const names = fieldsByType.get(target.type) ?? new Set<string>();
      names.add(field.name);
      fieldsByType.set(target.type, names);
      if (field.check.maxLength !== undefined)
        out.push({
          where:
            `${field.expr.file}:${field.expr.pos.line}:${field.expr.pos.column} ` +
            `${target.name}.${field.name} (maxLength)`,
          size: field.check.maxLength,
        });
    }
  }
  for (const file of layout?.files ?? []) {
    if (file.format !== 'fixed') continue;
    for (const c of file.columns) {
      if (c.field !== undefined && fieldsByType.get(file.record)?.has(c.field))
        out.push({ where: `layout.yaml ${file.name} ${c.name}`, size: c.length });
    }
  }
  return out;
}
