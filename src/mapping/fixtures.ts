import { z } from 'zod';
import { documentSchema, entitiesSchema, queueItemSchema } from '../contract/schemas.js';
import { DEFAULT_MAPPER_OPTIONS, type MapperOptions } from './compile.js';
import {
  formatIssue,
  type MappedRecord,
  type Mapper,
  type MappingInput,
  type MappingIssue,
  type MappingOutcome,
} from './types.js';
import { diffRecordLists } from './record-diff.js';

/**
 * Mapping fixtures: `fixtures/<case>/input.json` (loan, entities, documents as the platform sends
 * them) → `expected.json`, either `{ "records": [...] }` or `{ "issues": [...] }`. An expected
 * issue matches an actual one when every key it lists is equal (`message`: contained in).
 * `options.json` (optional) sets timeZone, allowLast4Tin, defaults for the case; fixtures do not
 * depend on the bank's config, so they mean the same on every machine.
 */
export interface FixtureCase {
  name: string;
  /** Directory of the case, relative to the mapping directory. */
  dir: string;
  input: unknown;
  expected: unknown;
  options: unknown;
  /**
   * `expected-lines/<file>`: the loan's lines in that layout file, in its encoding
   * (core/file/layout/expected-lines.ts).
   */
  expectedLines?: Record<string, Uint8Array>;
  /**
   * `expected-imaging/<layout>.txt`: the index records the loan's documents get in the set's
   * `imaging/<layout>.yaml`, as `mappings preview` prints them (tax ids masked; docs/imaging.md).
   */
  expectedImaging?: Record<string, string>;
}

export interface FixtureResult {
  name: string;
  ok: boolean;
  /** Field-level differences or setup problems, one line each. */
  diffs: string[];
  outcome?: MappingOutcome;
}

const optionsSchema = z.strictObject({
  timeZone: z.string().optional(),
  allowLast4Tin: z.boolean().optional(),
  defaults: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
  timeoutMs: z.number().int().min(1).optional(),
  description: z.string().optional(),
});

const inputSchema = z.strictObject({
  description: z.string().optional(),
  loan: queueItemSchema,
  entities: entitiesSchema.prefault({}),
  documents: z.array(documentSchema).default([]),
  /** The bank's numbers the pipeline gives the mapping ($accountNumber(), $cif(...)); absent: none. */
  identity: z
    .strictObject({
      accountNumber: z.string().nullable().default(null),
      customers: z
        .record(
          z.string(),
          z.strictObject({
            cif: z.string().nullable(),
            matchedBy: z.enum(['crossref', 'tin', 'created']),
            existing: z.boolean(),
          }),
        )
        .default({}),
    })
    .optional(),
});

const expectedIssueSchema = z.looseObject({
  code: z.string().optional(),
  target: z.string().optional(),
  field: z.string().optional(),
  message: z.string().optional(),
  inputPath: z.string().optional(),
});
const expectedSchema = z.union([
  z.strictObject({
    description: z.string().optional(),
    records: z.array(
      z.looseObject({ type: z.string(), externalId: z.string(), fields: z.record(z.string(), z.unknown()) }),
    ),
    // The review items the loan boards with (board with warnings); absent means none.
    warnings: z.array(expectedIssueSchema).optional(),
  }),
  z.strictObject({ description: z.string().optional(), issues: z.array(expectedIssueSchema).min(1) }),
]);

const zodText = (e: z.ZodError): string =>
  e.issues.map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`).join('; ');

export function fixtureOptions(raw: unknown): MapperOptions | string {
  if (raw === undefined) return DEFAULT_MAPPER_OPTIONS;
  const r = optionsSchema.safeParse(raw);
  if (!r.success) return `options.json: ${zodText(r.error)}`;
  const o = r.data;
  return {
    timeZone: o.timeZone ?? DEFAULT_MAPPER_OPTIONS.timeZone,
    allowLast4Tin: o.allowLast4Tin ?? DEFAULT_MAPPER_OPTIONS.allowLast4Tin,
    defaults: o.defaults ?? DEFAULT_MAPPER_OPTIONS.defaults,
    timeoutMs: o.timeoutMs ?? DEFAULT_MAPPER_OPTIONS.timeoutMs,
  };
}

/**
 * The bank time zone a case runs in (its options.json, else the default): its mapping, and the dates of its
 * expected-lines.
 */
export function fixtureTimeZone(c: Pick<FixtureCase, 'options'>): string {
  const o = fixtureOptions(c.options);
  return typeof o === 'string' ? DEFAULT_MAPPER_OPTIONS.timeZone : o.timeZone;
}

/** A case's input.json as the mapping takes it (undefined when it does not match the platform's shapes). */
export function fixtureInput(raw: unknown): z.infer<typeof inputSchema> | undefined {
  const r = inputSchema.safeParse(raw);
  return r.success ? r.data : undefined;
}

export async function runFixture(
  c: FixtureCase,
  mapperFor: (opts: MapperOptions) => Promise<Mapper>,
): Promise<FixtureResult> {
  const options = fixtureOptions(c.options);
  if (typeof options === 'string') return { name: c.name, ok: false, diffs: [options] };
  const input = inputSchema.safeParse(c.input);
  if (!input.success)
    return {
      name: c.name,
      ok: false,
      diffs: [`input.json does not match the platform's shapes: ${zodText(input.error)}`],
    };
  const expected = expectedSchema.safeParse(c.expected);
  if (!expected.success)
    return {
      name: c.name,
      ok: false,
      diffs: [`expected.json must be {"records": [...]} or {"issues": [...]}: ${zodText(expected.error)}`],
    };
  const mapper = await mapperFor(options);
  const mappingInput: MappingInput = {
    loan: input.data.loan,
    entities: input.data.entities,
    documents: input.data.documents,
    ...(input.data.identity ? { identity: input.data.identity } : {}),
  };
  const outcome = await mapper.map(mappingInput);
  const diffs =
    'records' in expected.data
      ? [
          ...diffRecords(expected.data.records, outcome),
          ...(outcome.ok ? diffWarnings(expected.data.warnings ?? [], outcome.warnings ?? []) : []),
        ]
      : diffIssues(expected.data.issues, outcome);
  return { name: c.name, ok: diffs.length === 0, diffs, outcome };
}

/** What `mappings test --update` writes: the outcome in expected.json form. */
export function expectedFromOutcome(outcome: MappingOutcome): unknown {
  const brief = (i: MappingIssue) => ({
    code: i.code,
    target: i.target,
    field: i.field,
    message: i.message,
    ...(i.inputPath ? { inputPath: i.inputPath } : {}),
  });
  if (outcome.ok)
    return {
      records: outcome.records,
      ...(outcome.warnings?.length ? { warnings: outcome.warnings.map(brief) } : {}),
    };
  return { issues: outcome.issues.map(brief) };
}

export function diffRecords(expected: MappedRecord[], outcome: MappingOutcome): string[] {
  if (!outcome.ok)
    return ['expected records, got issues:', ...outcome.issues.map((i) => `  ${i.code} ${formatIssue(i)}`)];
  return diffRecordLists(expected, outcome.records);
}

function issueMatches(e: Record<string, unknown>, a: MappingIssue): boolean {
  for (const [k, v] of Object.entries(e)) {
    if (v === undefined) continue;
    const actual = (a as unknown as Record<string, unknown>)[k];
    if (
      k === 'message'
        ? typeof actual !== 'string' || typeof v !== 'string' || !actual.includes(v)
        : actual !== v
    )
      return false;
  }
  return true;
}

export function diffIssues(expected: Array<Record<string, unknown>>, outcome: MappingOutcome): string[] {
  if (outcome.ok) return [`expected ${expected.length} issue(s), got ${outcome.records.length} record(s)`];
  return diffIssueLists(expected, outcome.issues, 'issue');
}

/** A fixture that boards also says which review items it boards with. */
export function diffWarnings(
  expected: Array<Record<string, unknown>>,
  actual: readonly MappingIssue[],
): string[] {
  return diffIssueLists(expected, actual, 'warning');
}

function diffIssueLists(
  expected: Array<Record<string, unknown>>,
  actual: readonly MappingIssue[],
  what: string,
): string[] {
  const out: string[] = [];
  const left = [...actual];
  for (const e of expected) {
    const i = left.findIndex((a) => issueMatches(e, a));
    if (i < 0) out.push(`expected ${what} not raised: ${JSON.stringify(e)}`);
    else left.splice(i, 1);
  }
  for (const a of left) out.push(`unexpected ${what}: ${a.code} ${formatIssue(a)}`);
  return out;
}
