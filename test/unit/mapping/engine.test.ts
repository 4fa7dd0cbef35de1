import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileMapping, DEFAULT_MAPPER_OPTIONS, type MapperOptions } from '../../../src/mapping/compile.js';
import { createMapper } from '../../../src/mapping/engine.js';
import { loadMapper } from '../../../src/mapping-sets/loader.js';
import type { Mapper, MappingInput } from '../../../src/mapping/types.js';

/** Engine tests read made-up input fields on purpose (name, x…): input paths are lint's concern (lint.test.ts). */
function mapperOf(yaml: string, opts: Partial<MapperOptions> = {}): Mapper {
  const r = compileMapping((p) => (p === 'mapping.yaml' ? yaml : undefined), {
    ...DEFAULT_MAPPER_OPTIONS,
    allowUnknownInput: true,
    ...opts,
  });
  if (!r.mapping) throw new Error(r.problems.map((p) => p.message).join('\n'));
  return createMapper(r.mapping, 'test');
}

const input = (
  loan: Record<string, unknown>,
  entities: Record<string, unknown> = {},
  documents: unknown[] = [],
): MappingInput =>
  ({
    loan: { id: 'L1', ...loan },
    entities: { businesses: [], people: [], ...entities },
    documents,
  }) as unknown as MappingInput;

describe('mapping engine', () => {
  it('turns a helper failure into an issue naming file, line, column, field and input path', async () => {
    const m = mapperOf(`version: 1
name: t
lookups:
  freq: { values: { monthly: M } }
targets:
  loan:
    for: loan
    externalId: id
    fields:
      principal: { expr: $centsToDecimal(centsAmount), type: decimal, required: true }
      frequency: { expr: '"x" & $lookup("freq", paymentFrequency)', onError: quarantine }
`);
    const out = await m.map(input({ centsAmount: 12.5, paymentFrequency: 'daily' }));
    expect(out).toEqual({
      ok: false,
      mappingVersion: 'test',
      issues: [
        {
          code: 'mapping',
          file: 'mapping.yaml',
          line: 10,
          column: 26,
          target: 'loan',
          field: 'principal',
          inputPath: 'loan.centsAmount',
          message: 'amount in cents must be a whole number, got 12.5',
        },
        {
          code: 'lookup_missing',
          file: 'mapping.yaml',
          line: 11,
          column: 33,
          target: 'loan',
          field: 'frequency',
          inputPath: 'loan.paymentFrequency',
          message: 'lookup table "freq" has no key "daily"',
        },
      ],
    });
  });

  it('validates the output schema after evaluation', async () => {
    const m = mapperOf(`version: 1
name: t
targets:
  loan:
    for: loan
    externalId: id
    fields:
      a: { expr: name, type: string, required: true }
      b: { expr: '"toolong"', type: string, maxLength: 3, onError: quarantine }
      c: { expr: '"Z"', type: enum, values: [X, Y], onError: quarantine }
      d: { expr: '1.5', type: integer, onError: quarantine }
      e: { expr: '"1.5"', type: decimal, scale: 2, onError: quarantine }
      f: { expr: '"2025-02-30"', type: date, onError: quarantine }
      g: { expr: '"ok"', type: string, pattern: '^\\d+$', onError: quarantine }
`);
    const out = await m.map(input({}));
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.issues.map((i) => `${i.field}: ${i.message}`)).toEqual([
      'a: required field is missing (the expression produced nothing)',
      'b: longer than 3 characters (7)',
      'c: "Z" is not one of X, Y',
      'd: expected an integer, got 1.5',
      'e: expected exactly 2 decimals, got "1.5"',
      'f: expected a date formatted yyyy-MM-dd, got "2025-02-30"',
      'g: "ok" does not match ^\\d+$',
    ]);
    expect(out.issues.every((i) => i.code === 'validation')).toBe(true);
  });

  it('three outcomes: an optional field never quarantines (left out or fallback, a review item); null ≡ absent', async () => {
    const m = mapperOf(`version: 1
name: t
lookups:
  role: { values: { borrower: PRI }, default: REL, warnOnDefault: true }
targets:
  loan:
    for: loan
    externalId: id
    fields:
      short: { expr: name, type: string, maxLength: 3 }
      code: { expr: naics, type: string, pattern: '^\\d+$', fallback: "000" }
      hasNaics: $exists(naics)
      role: $lookup("role", role)
      io: $interestOnlyPeriods(monthsInterestOnly, paymentFrequency, monthsTerm)
`);
    const out = await m.map(
      input({
        name: 'toolong',
        naics: 'abc',
        role: 'co-signer',
        monthsInterestOnly: 3,
        paymentFrequency: 'biweekly',
        monthsTerm: 36,
      }),
    );
    expect(out.ok).toBe(true);
    if (!out.ok) return;
    expect(out.records[0]!.fields).toEqual({ code: '000', hasNaics: true, role: 'REL', io: 7 });
    expect(out.warnings?.map((w) => [w.code, w.field])).toEqual([
      ['optional_field', 'short'],
      ['optional_field', 'code'],
      ['defaulted', 'role'],
      ['approximated', 'io'],
    ]);
    const nulls = await m.map(
      input({
        name: null,
        naics: null,
        role: null,
        monthsInterestOnly: null,
        paymentFrequency: 'monthly',
        monthsTerm: 12,
      }),
    );
    expect(nulls).toMatchObject({ ok: true, warnings: [] });
    if (nulls.ok) expect(nulls.records[0]!.fields).toEqual({ hasNaics: false, role: 'REL', io: 0 });
  });

  it('applies per-product overrides and defaults (file < config < product)', async () => {
    const yaml = `version: 1
name: t
defaults: { branch: "001", officer: A }
overrides:
  p_special:
    defaults: { officer: S }
    fields:
      loan:
        code: '"SPECIAL"'
targets:
  loan:
    for: loan
    externalId: id
    fields:
      code: '"STD"'
      branch: $defaults.branch
      officer: $defaults.officer
`;
    const m = mapperOf(yaml, { defaults: { branch: '0099' } });
    const std = await m.map(input({ product: { id: 'p_other' } }));
    const special = await m.map(input({ product: { id: 'p_special' } }));
    expect(std).toMatchObject({
      ok: true,
      records: [{ fields: { code: 'STD', branch: '0099', officer: 'A' } }],
    });
    expect(special).toMatchObject({
      ok: true,
      records: [{ fields: { code: 'SPECIAL', branch: '0099', officer: 'S' } }],
    });
  });

  it('reports a failed let once and skips what reads it; checks stop a loan without writing a field', async () => {
    const m = mapperOf(`version: 1
name: t
targets:
  loan:
    for: loan
    externalId: id
    let:
      n: $numberOfRepayments(monthsTerm, paymentFrequency)
    checks:
      positive: centsAmount > 0
    fields:
      n: $n
      twice: $n * 2
      other: '"x"'
`);
    const out = await m.map(input({ monthsTerm: 0, paymentFrequency: 'monthly', centsAmount: 0 }));
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.issues.map((i) => [i.code, i.field])).toEqual([
      ['mapping', '$n'],
      ['validation', '(check positive)'],
    ]);
  });

  it('stops a runaway expression with the timeout and reports it as an issue', async () => {
    const m = mapperOf(
      `version: 1
name: t
targets:
  loan:
    for: loan
    externalId: id
    fields:
      spin: { expr: '($f := function($n) { $n > 0 ? $f($n - 1) + $f($n - 1) : 0 }; $f(40))', onError: quarantine }
`,
      { timeoutMs: 50 },
    );
    const out = await m.map(input({}));
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.issues[0]?.message).toMatch(/D1012|timeout|Stack overflow|D1011/i);
  });

  it('refuses two records with the same type and external id', async () => {
    const m = mapperOf(`version: 1
name: t
targets:
  party:
    for: '[entities.businesses, entities.businesses]'
    externalId: id
    fields: {}
`);
    const out = await m.map(input({}, { businesses: [{ id: 'B1' }] }));
    expect(out).toMatchObject({
      ok: false,
      issues: [
        { code: 'validation', field: 'externalId', message: 'two party records have the external id "B1"' },
      ],
    });
  });

  it('never throws and never leaks a full tax id, whatever the platform sends (property, generic set)', async () => {
    const mapper = await loadMapper(join(import.meta.dirname, '../../../mappings/generic'), {});
    const anyValue = fc.oneof(
      fc.constant(null),
      fc.constant(undefined),
      fc.string({ maxLength: 12 }),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.array(fc.integer(), { maxLength: 2 }),
      fc.object({ maxDepth: 1 }),
    );
    const loanArb = fc.record(
      {
        centsAmount: anyValue,
        bpsRate: anyValue,
        monthsTerm: anyValue,
        monthsInterestOnly: anyValue,
        paymentFrequency: fc.oneof(
          anyValue,
          fc.constantFrom(
            'weekly',
            'biweekly',
            'monthly',
            'quarterly',
            'semi-annual',
            'annual',
            'lump sum',
            'irregular payments',
          ),
        ),
        rateType: fc.oneof(anyValue, fc.constantFrom('fixed', 'variable')),
        type: fc.oneof(anyValue, fc.constantFrom('business', 'personal')),
        closeDate: fc.oneof(anyValue, fc.constant('2025-03-14T03:30:00Z')),
        product: fc.oneof(anyValue, fc.record({ id: fc.string() })),
      },
      { requiredKeys: [] },
    );
    const entity = fc.record(
      {
        id: fc.string({ minLength: 1, maxLength: 5 }),
        name: anyValue,
        ein: fc.oneof(anyValue, fc.constant('12-3456789')),
        einLast4: anyValue,
        role: anyValue,
      },
      { requiredKeys: ['id'] },
    );
    await fc.assert(
      fc.asyncProperty(
        loanArb,
        fc.array(entity, { maxLength: 3 }),
        fc.array(entity, { maxLength: 2 }),
        async (loan, businesses, people) => {
          const out = await mapper.map(input(loan, { businesses, people }));
          expect(typeof out.ok).toBe('boolean');
          if (!out.ok) {
            for (const i of out.issues) {
              expect(i.line).toBeGreaterThan(0);
              expect(i.message).not.toContain('123456789');
              expect(i.message).not.toContain('12-3456789');
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  }, 120_000);
});

describe('regressions', () => {
  it('fineract document description: a null period or requirement is left out, not a $join error', async () => {
    const mapper = await loadMapper(join(import.meta.dirname, '../../../mappings/fineract'), {
      allowLast4Tin: true,
    });
    const out = await mapper.map(
      input(
        {
          type: 'business',
          centsAmount: 100,
          monthsTerm: 12,
          paymentFrequency: 'monthly',
          rateType: 'fixed',
          bpsRate: 500,
          closeDate: '2025-03-14T15:00:00Z',
          applicationDate: '2025-03-01T15:00:00Z',
        },
        { businesses: [{ id: 'B1', name: 'Acme', einLast4: '1234', role: 'borrower' }] },
        [{ id: 'D1', name: 'a.pdf', category: 'legal', period: null, requirement: null }],
      ),
    );
    expect(out).toMatchObject({ ok: true });
    if (out.ok) expect(out.records.find((r) => r.type === 'document')?.fields['description']).toBe('legal');
  });
});
