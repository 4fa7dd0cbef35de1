import type { z } from 'zod';
import { configSchema } from '../../src/config/schema.js';
import { isSecretPath } from '../../src/lib/redact.js';

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  valueType?: z.ZodType;
}

/** Every key path of a zod schema (`core.http.password`); a list's items and a record's values add no segment. */
export function schemaKeyPaths(schema: z.ZodType, prefix = ''): string[] {
  const def = (schema as unknown as { def: Def }).def;
  switch (def.type) {
    case 'object': {
      const out: string[] = [];
      for (const [k, v] of Object.entries(def.shape ?? {})) {
        const path = prefix === '' ? k : `${prefix}.${k}`;
        out.push(path, ...schemaKeyPaths(v, path));
      }
      return out;
    }
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'catch':
    case 'readonly':
    case 'nonoptional':
      return schemaKeyPaths(def.innerType as z.ZodType, prefix);
    case 'pipe':
      return schemaKeyPaths(def.in as z.ZodType, prefix);
    case 'array':
      return schemaKeyPaths(def.element as z.ZodType, prefix);
    case 'record':
      return schemaKeyPaths(def.valueType as z.ZodType, prefix);
    case 'union':
      return [...new Set((def.options ?? []).flatMap((o) => schemaKeyPaths(o, prefix)))];
    default:
      return [];
  }
}

/** The config keys that hold secrets (the first of a path that reads like one), as the config schema declares them. */
export function secretConfigKeys(): string[] {
  return schemaKeyPaths(configSchema).filter(
    (p) => isSecretPath(p) && !isSecretPath(p.split('.').slice(0, -1).join('.')),
  );
}
