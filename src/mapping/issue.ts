import type { MappingIssueCode } from './types.js';
import { maskTins } from '../lib/redact.js';

/**
 * Thrown by a helper when the data cannot be mapped. The engine catches it per field and turns it
 * into a MappingIssue (errors are data), so one bad field never hides the others.
 * `argIndex` names the argument that was wrong, so the issue can point at its input path.
 */
export class HelperIssue extends Error {
  override readonly name = 'HelperIssue';
  constructor(
    readonly code: MappingIssueCode,
    message: string,
    readonly argIndex: number | null = null,
  ) {
    super(message);
  }
}

/**
 * Where helpers report an approximation (a review item): the engine binds one per mapped loan as
 * the variable `__review`, so concurrent loans never share it, and attributes what a helper
 * reported to the field being evaluated.
 */
export const REVIEW_BINDING = '__review';
export type ReviewSink = (code: MappingIssueCode, message: string) => void;

/** Reports a review item through the evaluation's environment (JSONata's `this` for helpers). */
export function review(
  focus: { environment: { lookup(name: string): unknown } } | undefined,
  code: MappingIssueCode,
  message: string,
): void {
  const sink = focus?.environment.lookup(REVIEW_BINDING);
  if (typeof sink === 'function') (sink as ReviewSink)(code, message);
}

/** Short, safe rendering of a value for an issue message. */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string')
    return maskTins(JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value));
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (typeof value === 'function') return 'a function';
  return 'an object';
}
