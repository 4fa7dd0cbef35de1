import { z } from 'zod';

/**
 * The mapping file format (mapping.yaml). `mappings/schema.json` is generated from this schema
 * (`z.toJSONSchema`) so editors autocomplete and flag typos. Values under `lookups` and `defaults`
 * reach this schema as the text written in the file (see lib/yaml-source.ts): `0012` stays "0012".
 */

const name = (what: string) =>
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
    error: `${what} must be a name (letters, digits, _; not starting with a digit)`,
  });
const expr = z
  .string({ error: 'expected a JSONata expression (a string)' })
  .min(1, { error: 'expected a JSONata expression' });
const scalar = z.union([z.string(), z.number(), z.boolean()]);

export const FIELD_TYPES = [
  'any',
  'string',
  'enum',
  'integer',
  'decimal',
  'date',
  'boolean',
  'object',
  'array',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const fieldObjectSchema = z
  .strictObject({
    expr: expr.describe("JSONata expression evaluated with the record's item as context"),
    type: z.enum(FIELD_TYPES).default('any').describe('output type checked after evaluation'),
    required: z.boolean().default(false).describe('an absent (null/undefined) value is a validation issue'),
    maxLength: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('maximum length of string, enum, decimal and date values'),
    values: z.array(z.string()).min(1).optional().describe('allowed values (required for type enum)'),
    pattern: z.string().optional().describe('regular expression a string value must match'),
    scale: z.number().int().min(0).max(18).optional().describe('decimal: exact number of decimals'),
    format: z.string().optional().describe('date: picture the value must match (default yyyy-MM-dd)'),
    min: z.number().optional().describe('integer: minimum'),
    max: z.number().optional().describe('integer: maximum'),
    onError: z
      .enum(['warn', 'quarantine'])
      .optional()
      .describe(
        'when the expression fails or the value does not fit: warn (leave it out, or use ' +
          'fallback; the default for optional fields) or quarantine (the default for required ones)',
      ),
    fallback: scalar
      .optional()
      .describe(
        'value used, with a review item, when the expression fails, produces nothing or does not fit',
      ),
    description: z.string().optional(),
  })
  .refine((f) => f.type !== 'enum' || f.values !== undefined, {
    error: 'type enum needs values: [...]',
    path: ['values'],
  });
export type FieldObject = z.infer<typeof fieldObjectSchema>;

export const fieldSchema = z
  .union([expr, fieldObjectSchema])
  .describe('an expression, or {expr, type, required, …}');

export const targetSchema = z.strictObject({
  type: z.string().min(1).optional().describe('record type written to the core (default: the target name)'),
  description: z.string().optional(),
  for: expr
    .optional()
    .describe(
      'iteration: one record per item (an array, an object or ' +
        'nothing); default: one record with the whole input as context',
    ),
  externalId: expr.describe('the platform id the record is idempotent by'),
  let: z
    .record(name('let name'), expr)
    .optional()
    .describe(
      'values computed once per record, in order, available to later lets, checks and fields as $name',
    ),
  checks: z
    .record(z.string().min(1), expr)
    .optional()
    .describe(
      'conditions that must hold (not written): false, or an issue raised by a helper, stops the loan',
    ),
  fields: z.record(z.string().min(1), fieldSchema),
});
export type TargetSpec = z.infer<typeof targetSchema>;

export const inlineLookupSchema = z.strictObject({
  description: z.string().optional(),
  values: z.record(z.string(), scalar).describe('key → value; every value is kept as the text written'),
  default: scalar.optional().describe('value for keys not in the table'),
  warnOnDefault: z
    .boolean()
    .optional()
    .describe(
      'a key not in the table (an unknown role or enum value) maps to the default with a review item',
    ),
});

export const csvLookupSchema = z.strictObject({
  description: z.string().optional(),
  csv: z.string().min(1).describe('CSV file relative to the mapping directory, with a header row'),
  key: z.string().min(1).default('key').describe('column holding the keys'),
  value: z.string().min(1).default('value').describe('column holding the values'),
  default: scalar.optional().describe('value for keys not in the table'),
});

export const lookupSchema = z.union([inlineLookupSchema, csvLookupSchema]);
export type LookupSpec = z.infer<typeof lookupSchema>;

export const overrideSchema = z.strictObject({
  description: z.string().optional(),
  defaults: z.record(z.string(), scalar).optional().describe('$defaults entries for loans of this product'),
  fields: z
    .record(z.string(), z.record(z.string(), z.union([expr, z.strictObject({ expr })])))
    .optional()
    .describe("target name → field name → expression used instead of the target's for this product"),
});

export const frequencySpecSchema = z.strictObject({
  every: z.number().int().min(1),
  unit: z.enum(['days', 'weeks', 'months', 'years']),
  review: z
    .string()
    .optional()
    .describe(
      'a review item each loan of this frequency gets (a schedule ' +
        'the core may need to adjust, e.g. irregular payments)',
    ),
});

export const mappingFileSchema = z
  .strictObject({
    version: z
      .union([z.string().min(1), z.number()])
      .describe('your label for this mapping (the mapping version adds a hash of the files)'),
    name: name('name').describe('name of the mapping set'),
    description: z.string().optional(),
    defaults: z
      .record(z.string(), scalar)
      .default({})
      .describe('$defaults: bank values (branch, officer, GL codes); config mappings.defaults wins'),
    frequencies: z
      .record(z.string(), frequencySpecSchema)
      .default({})
      .describe('extra or replaced payment frequencies, e.g. irregular payments'),
    lookups: z.record(z.string(), lookupSchema).default({}),
    overrides: z.record(z.string(), overrideSchema).default({}).describe('per platform product id'),
    targets: z
      .record(name('target name'), targetSchema)
      .refine((t) => Object.keys(t).length > 0, { error: 'at least one target' }),
  })
  .describe('boarding-connector mapping file');
export type MappingFile = z.infer<typeof mappingFileSchema>;

/** JSON Schema for editors (yaml-language-server), written to mappings/schema.json. */
export function mappingJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(mappingFileSchema, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return { ...schema, title: 'boarding-connector mapping file' };
}
