import { HelperIssue, describe } from './issue.js';

export interface LookupTable {
  readonly name: string;
  readonly values: ReadonlyMap<string, string>;
  readonly fallback: string | undefined;
  /** A key not in the table maps to the fallback with a review item (enums, roles). */
  readonly warnOnDefault?: boolean;
  /** Where the table is declared (for lint messages). */
  readonly file: string;
}

export type LookupTables = ReadonlyMap<string, LookupTable>;

function keyOf(key: unknown): string | undefined {
  if (key === undefined || key === null || key === '') return undefined;
  if (typeof key === 'string') return key;
  if (typeof key === 'number' || typeof key === 'boolean') return String(key);
  throw new HelperIssue('mapping', `lookup key must be text, got ${describe(key)}`, 1);
}

/**
 * `$lookup(table, key[, default])`. A key absent from the table gives the call's default, else the
 * table's default, else the issue lookup_missing naming table and key, so an unmapped product or
 * frequency stops that loan with a message a bank engineer can act on.
 */
export function lookupValue(
  tables: LookupTables,
  args: readonly unknown[],
  onDefault?: (message: string) => void,
): string | undefined {
  const [table, key] = args;
  if (typeof table !== 'string')
    throw new HelperIssue('mapping', `lookup table name must be text, got ${describe(table)}`, 0);
  const t = tables.get(table);
  if (!t)
    throw new HelperIssue(
      'mapping',
      `unknown lookup table "${table}" (known: ${[...tables.keys()].join(', ') || 'none'})`,
      0,
    );
  const k = keyOf(key);
  if (k !== undefined) {
    const v = t.values.get(k);
    if (v !== undefined) return v;
  }
  if (args.length >= 3) {
    const d = args[2];
    if (d === undefined || d === null) return undefined;
    if (typeof d === 'string' || typeof d === 'number' || typeof d === 'boolean') return String(d);
    throw new HelperIssue('mapping', `lookup default must be text, got ${describe(d)}`, 2);
  }
  if (t.fallback !== undefined) {
    if (t.warnOnDefault === true && k !== undefined)
      onDefault?.(
        `lookup table "${table}" has no key ${describe(k)}: mapped to its default ${describe(t.fallback)}`,
      );
    return t.fallback;
  }
  if (k === undefined)
    throw new HelperIssue(
      'lookup_missing',
      `lookup table "${table}": the key is missing (no input value) and no default is given`,
      1,
    );
  throw new HelperIssue('lookup_missing', `lookup table "${table}" has no key ${describe(k)}`, 1);
}
