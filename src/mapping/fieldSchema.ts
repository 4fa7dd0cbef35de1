import { formatPattern, isFormattedDate, pictureProblem } from '../lib/calendar.js';
import { describe } from './issue.js';
import type { FieldObject, FieldType } from './spec.js';

/** The output schema of one field, checked after its expression ran. */
export interface FieldCheck {
  type: FieldType;
  required: boolean;
  maxLength?: number;
  values?: ReadonlySet<string>;
  pattern?: RegExp;
  scale?: number;
  datePattern?: RegExp;
  format?: string;
  min?: number;
  max?: number;
}

const DECIMAL = /^-?\d+(\.\d+)?$/;

export function buildFieldCheck(spec: FieldObject | string): FieldCheck {
  if (typeof spec === 'string') return { type: 'any', required: false };
  const c: FieldCheck = { type: spec.type, required: spec.required };
  if (spec.maxLength !== undefined) c.maxLength = spec.maxLength;
  if (spec.values !== undefined) c.values = new Set(spec.values);
  if (spec.pattern !== undefined) c.pattern = new RegExp(spec.pattern);
  if (spec.scale !== undefined) c.scale = spec.scale;
  if (spec.min !== undefined) c.min = spec.min;
  if (spec.max !== undefined) c.max = spec.max;
  if (spec.type === 'date') {
    c.format = spec.format ?? 'yyyy-MM-dd';
    const bad = pictureProblem(c.format);
    if (bad) throw new Error(`format: ${bad}`);
    c.datePattern = formatPattern(c.format);
  }
  return c;
}

/** null when the value fits; otherwise why not. `value` is already plain JSON (no sequences). */
export function checkField(value: unknown, c: FieldCheck): string | null {
  if (value === undefined || value === null)
    return c.required ? 'required field is missing (the expression produced nothing)' : null;
  const isString = typeof value === 'string';
  switch (c.type) {
    case 'any':
      break;
    case 'string':
    case 'enum':
      if (!isString)
        return `expected ${c.type === 'enum' ? 'one of the values' : 'a string'}, got ${describe(value)}`;
      break;
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value))
        return `expected an integer, got ${describe(value)}`;
      if (c.min !== undefined && value < c.min) return `expected an integer ≥ ${c.min}, got ${value}`;
      if (c.max !== undefined && value > c.max) return `expected an integer ≤ ${c.max}, got ${value}`;
      break;
    case 'decimal':
      if (!isString || !DECIMAL.test(value))
        return `expected a decimal string such as "1250.00", got ${describe(value)}`;
      if (c.scale !== undefined && (value.split('.')[1]?.length ?? 0) !== c.scale)
        return `expected exactly ${c.scale} decimals, got ${describe(value)}`;
      break;
    case 'date':
      if (!isString || !c.datePattern || !isFormattedDate(value, c.datePattern))
        return `expected a date formatted ${c.format ?? 'yyyy-MM-dd'}, got ${describe(value)}`;
      break;
    case 'boolean':
      if (typeof value !== 'boolean') return `expected true or false, got ${describe(value)}`;
      break;
    case 'object':
      if (typeof value !== 'object' || Array.isArray(value))
        return `expected an object, got ${describe(value)}`;
      break;
    case 'array':
      if (!Array.isArray(value)) return `expected a list, got ${describe(value)}`;
      break;
  }
  if (isString) {
    if (c.values && !c.values.has(value))
      return `${describe(value)} is not one of ${[...c.values].join(', ')}`;
    if (c.maxLength !== undefined && [...value].length > c.maxLength)
      return `longer than ${c.maxLength} characters (${[...value].length})`;
    if (c.pattern && !c.pattern.test(value)) return `${describe(value)} does not match ${c.pattern.source}`;
  }
  return null;
}
