import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  compileMapping,
  DEFAULT_MAPPER_OPTIONS,
  formatProblem,
  type LintProblem,
} from '../../../src/mapping/compile.js';
import { JSONATA_BUILTINS } from '../../../src/mapping/helpers.js';
import { lintMappingDir, loadMapper } from '../../../src/mapping-sets/loader.js';
import { mappingJsonSchema } from '../../../src/mapping/spec.js';
import jsonata from 'jsonata';

/** Lints an in-memory mapping set: mapping.yaml plus optional other files. */
function lint(yaml: string, files: Record<string, string> = {}): string[] {
  const all: Record<string, string> = { 'mapping.yaml': yaml, ...files };
  return compileMapping((p) => all[p]).problems.map(formatProblem);
}

const head = `version: 1
name: t
lookups:
  freq:
    values:
      monthly: M
      weekly: W
targets:
  loan:
    for: loan
    externalId: id
    fields:
`;

describe('mappings lint', () => {
  it('accepts a valid mapping', () => {
    expect(lint(`${head}      a: '$lookup("freq", paymentFrequency)'\n`)).toEqual([]);
  });

  it('reports a JSONata syntax error with file:line:column', () => {
    // line 13, the expression starts at column 11; the missing ")" is found at its end (column 37)
    expect(lint(`${head}      a: '$centsToDecimal(centsAmount'\n`)).toEqual([
      'mapping.yaml:13:37: targets.loan.fields.a: JSONata syntax error: Expected ")" before end of expression',
    ]);
  });

  it('reports an unknown helper with file:line:column', () => {
    const p = lint(
      `${head}      a: '$centsToDecimal(centsAmount)'\n      b:\n        expr: $string($frobnicate($))\n        type: string\n`,
    );
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(
      /^mapping\.yaml:15:23: targets\.loan\.fields\.b\.expr: unknown function \$frobnicate/,
    );
  });

  it('reports a literal lookup key missing from the table with file:line:column', () => {
    expect(lint(`${head}      a: '$lookup("freq", "fortnightly")'\n`)).toEqual([
      'mapping.yaml:13:27: targets.loan.fields.a: lookup table "freq" has no key "fortnightly"',
    ]);
    // with a default, a missing key is not an error
    expect(lint(`${head}      a: '$lookup("freq", "fortnightly", "X")'\n`)).toEqual([]);
  });

  it('reports unknown tables, variables, defaults, arity and non-deterministic functions', () => {
    const p = lint(
      `${head}      a: '$lookup("nope", $)'\n      b: $whatever\n      c: $defaults.branch\n      d: $centsToDecimal()\n      e: $now()\n      f: '$lookup($, $)'\n`,
    );
    expect(p).toEqual([
      'mapping.yaml:13:19: targets.loan.fields.a: unknown lookup table "nope" (known: freq)',
      expect.stringMatching(/^mapping\.yaml:14:10: targets\.loan\.fields\.b: unknown variable \$whatever/),
      expect.stringMatching(/^mapping\.yaml:15:20: targets\.loan\.fields\.c: unknown default "branch"/),
      'mapping.yaml:16:10: targets.loan.fields.d: $centsToDecimal takes 1 to 2 arguments, got 0',
      'mapping.yaml:17:10: targets.loan.fields.e: $now() is not allowed: a mapping must give the same records for the same input',
      'mapping.yaml:18:11: targets.loan.fields.f: $lookup: the table name must be a quoted string so lint can check it',
    ]);
  });

  it('locates errors inside literal block expressions', () => {
    const p = lint(
      `${head}      a:\n        expr: |\n          (\n            $x := 1;\n            $foo($x)\n          )\n`,
    );
    expect(p).toEqual([expect.stringMatching(/^mapping\.yaml:17:13: .*unknown function \$foo/)]);
  });

  it('reports schema problems at the offending key or value', () => {
    const p = lint(
      `${head}      a: { expr: $, type: strin }\n      b: { expr: $, type: enum }\n    extra: 1\n`,
    );
    expect(p).toEqual([
      expect.stringMatching(/^mapping\.yaml:13:27: targets\.loan\.fields\.a\.type: Invalid option/),
      expect.stringMatching(
        /^mapping\.yaml:14:\d+: targets\.loan\.fields\.b\.values: type enum needs values/,
      ),
      'mapping.yaml:15:5: targets.loan.extra: unknown key',
    ]);
  });

  it('reports YAML syntax errors with line and column', () => {
    const p = lint('version: 1\nname: t\ntargets:\n  loan: [unclosed\n');
    expect(p[0]).toMatch(/^mapping\.yaml:\d+:\d+: /);
  });

  it('keeps lookup values and defaults as written: 0012 stays "0012"', async () => {
    const yaml = `version: 1\nname: t\ndefaults:\n  branch: 0012\n  rate: 1.50\nlookups:\n  gl:\n    values:\n      0012: 000123\n      a: 7.10\ntargets:\n  x:\n    externalId: '"id"'\n    fields:\n      branch: $defaults.branch\n      rate: $defaults.rate\n      gl: '$lookup("gl", "0012")'\n      a: '$lookup("gl", "a")'\n`;
    const r = compileMapping((p) => (p === 'mapping.yaml' ? yaml : undefined));
    expect(r.problems).toEqual([]);
    const { createMapper } = await import('../../../src/mapping/engine.js');
    const out = await createMapper(r.mapping!, 'v').map({
      loan: { id: 'L' },
      entities: { businesses: [], people: [] },
      documents: [],
    });
    expect(out).toMatchObject({
      ok: true,
      records: [{ fields: { branch: '0012', rate: '1.50', gl: '000123', a: '7.10' } }],
    });
  });

  it('reads CSV lookups and reports CSV problems at csv:line:column', () => {
    const yaml = `${head}      a: '$lookup("prod", "p1")'\n`.replace(
      'lookups:\n',
      'lookups:\n  prod:\n    csv: lookups/p.csv\n    key: id\n    value: code\n',
    );
    expect(lint(yaml, { 'lookups/p.csv': 'id,code\np1,0012\n"p,2",X\n' })).toEqual([]);
    expect(lint(yaml, { 'lookups/p.csv': 'id,code\np1,1\np1,2\n' })).toEqual([
      'lookups/p.csv:3:1: lookup prod: duplicate key "p1"',
    ]);
    expect(lint(yaml, { 'lookups/p.csv': 'key,value\n' })).toEqual([
      expect.stringMatching(/^lookups\/p\.csv:1:1: lookup prod: header needs columns "id" and "code"/),
    ]);
    expect(lint(yaml)).toEqual([
      expect.stringMatching(/^mapping\.yaml:\d+:\d+: lookups\.prod: cannot read lookups\/p\.csv/),
    ]);
  });

  it('checks overrides name existing targets and fields', () => {
    const p = lint(
      `${head}      a: $\noverrides:\n  prod_1:\n    fields:\n      loan:\n        nope: '1'\n      other:\n        a: '1'\n`,
    );
    expect(p).toEqual([
      expect.stringMatching(
        /^mapping\.yaml:18:9: overrides\.prod_1\.fields\.loan\.nope: target "loan" has no field "nope"/,
      ),
      expect.stringMatching(/^mapping\.yaml:19:7: overrides\.prod_1\.fields: unknown target "other"/),
    ]);
  });
});

describe('mappings lint: mistakes that change output silently', () => {
  it('refuses input paths the platform does not document, with a did-you-mean, unless allowed', () => {
    const yaml = `${head}      a: monthTerm\n      b: '$fit(purpse, 10)'\n      c: product.nmae\n      d: boarding.anythingGoes\n`;
    expect(lint(yaml)).toEqual([
      expect.stringMatching(
        /^mapping\.yaml:13:10: targets\.loan\.fields\.a: unknown input field "monthTerm" on loan \(did you mean "monthsTerm"\?\)/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:14:16: targets\.loan\.fields\.b: unknown input field "purpse" on loan \(did you mean "purpose"\?\)/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:15:18: targets\.loan\.fields\.c: unknown input field "nmae" on loan\.product \(did you mean "name"\?\)/,
      ),
    ]);
    const all = { 'mapping.yaml': yaml };
    expect(
      compileMapping((p) => all[p as 'mapping.yaml'], {
        ...DEFAULT_MAPPER_OPTIONS,
        allowUnknownInput: ['loan.monthTerm', 'loan.purpse', 'loan.product.*'],
      }).problems,
    ).toEqual([]);
    expect(
      compileMapping((p) => all[p as 'mapping.yaml'], { ...DEFAULT_MAPPER_OPTIONS, allowUnknownInput: true })
        .problems,
    ).toEqual([]);
  });

  it('knows each target item: businesses, people, documents, unions; $loan and $entities from the root', () => {
    const yaml = `version: 1\nname: t\ntargets:\n  party:\n    for: '[entities.businesses, entities.people]'\n    externalId: '$loan.id & ":" & id'\n    fields:\n      a: name\n      b: firstName\n      c: ssnLast4\n      d: emial\n      e: $loan.monthsTerm\n      f: $loan.monthTerm\n  doc:\n    for: documents[requirement.period != null]\n    externalId: id\n    fields:\n      g: requirement.period\n      h: requirment.period\n`;
    expect(lint(yaml)).toEqual([
      expect.stringMatching(
        /^mapping\.yaml:11:10: targets\.party\.fields\.d: unknown input field "emial" on business or person/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:13:16: targets\.party\.fields\.f: unknown input field "monthTerm" on loan/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:19:10: targets\.doc\.fields\.h: unknown input field "requirment" on document \(did you mean "requirement"\?\)/,
      ),
    ]);
    expect(lint(yaml.replace('documents[requirement.period', 'documents[requirement.perod'))).toContainEqual(
      expect.stringMatching(/targets\.doc\.for: unknown input field "perod" on document\.requirement/),
    );
  });

  it('refuses a helper named without parentheses, an object where a value belongs, unknown date letters and float arithmetic on cents', () => {
    const p = lint(
      `${head}      a: $borrower.id\n      b: product\n      c: '$date(closeDate, "yyyyDDD")'\n      d: centsAmount / 100\n      e: bpsRate * 0.01\n      f: { expr: closeDate, type: date, format: yyyyDDD }\n`,
    );
    expect(p).toEqual([
      expect.stringMatching(
        /^mapping\.yaml:13:10: targets\.loan\.fields\.a: \$borrower is a function: call it \(\$borrower\(\)\.id\)/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:14:10: targets\.loan\.fields\.b: product is an object \(loan\.product\), not a value/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:15:\d+: targets\.loan\.fields\.c: \$date: picture "yyyyDDD": "D" is not a picture letter/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:16:10: targets\.loan\.fields\.d: arithmetic on centsAmount .* use \$centsToDecimal/,
      ),
      expect.stringMatching(
        /^mapping\.yaml:17:10: targets\.loan\.fields\.e: arithmetic on bpsRate .* use \$bpsToPercent/,
      ),
      expect.stringMatching(/^mapping\.yaml:18:\d+: targets\.loan\.fields\.f: format: picture "yyyyDDD"/),
    ]);
  });

  it('reports every problem in one pass: schema problems do not hide expression problems', () => {
    const p = lint(
      `${head}      a: { expr: $, type: strin }\n      b: monthTerm\n      c: $frobnicate(1)\n    extra: 1\n`,
    );
    expect(p).toEqual([
      expect.stringMatching(/^mapping\.yaml:13:27: targets\.loan\.fields\.a\.type: Invalid option/),
      expect.stringMatching(/^mapping\.yaml:14:10: .*unknown input field "monthTerm"/),
      expect.stringMatching(/^mapping\.yaml:15:10: .*unknown function \$frobnicate/),
      'mapping.yaml:16:5: targets.loan.extra: unknown key',
    ]);
  });
});

describe('mapping directory', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const makeDir = (yaml: string): string => {
    const d = mkdtempSync(join(tmpdir(), 'mapping-'));
    dirs.push(d);
    mkdirSync(join(d, 'lookups'));
    writeFileSync(join(d, 'mapping.yaml'), yaml);
    return d;
  };

  it('refuses to load a broken set, listing every problem with file:line:column', async () => {
    const d = makeDir(`${head}      a: '$frobnicate(1)'\n      b: '$lookup("freq", "daily")'\n`);
    await expect(loadMapper(d)).rejects.toThrow(
      /mapping\.yaml:13:11: .*unknown function \$frobnicate[\s\S]*mapping\.yaml:14:27: .*has no key "daily"/,
    );
  });

  it('versions a set by content: same files, same version; any change, a new one', () => {
    const yaml = `${head}      a: $\n`;
    const a = lintMappingDir(makeDir(yaml)).version;
    const b = lintMappingDir(makeDir(yaml)).version;
    const c = lintMappingDir(makeDir(`${yaml}      b: $.id\n`)).version;
    expect(a).toBe(b);
    expect(a).not.toBe(c);
  });

  it('does not read files outside the mapping directory', () => {
    const d = makeDir(
      `${head}      a: $\n`.replace('lookups:\n', 'lookups:\n  p:\n    csv: ../../etc/passwd\n'),
    );
    expect(lintMappingDir(d).problems.map((p: LintProblem) => p.message)).toEqual([
      expect.stringContaining('cannot read ../../etc/passwd'),
    ]);
  });
});

describe('shipped schema and built-ins', () => {
  it('mappings/schema.json is generated from the zod schema (run `mappings schema --out mappings/schema.json`)', () => {
    const shipped: unknown = JSON.parse(
      readFileSync(join(import.meta.dirname, '../../../mappings/schema.json'), 'utf8'),
    );
    expect(shipped).toEqual(mappingJsonSchema());
  });

  it('every mapping file references the schema for editors', () => {
    for (const set of ['generic', 'fineract', 'mambu']) {
      const text = readFileSync(join(import.meta.dirname, `../../../mappings/${set}/mapping.yaml`), 'utf8');
      expect(text.split('\n')[0]).toBe('# yaml-language-server: $schema=../schema.json');
    }
  });

  it('the JSONata built-in list matches the installed jsonata', async () => {
    for (const name of JSONATA_BUILTINS) {
      expect(typeof (await jsonata(`$${name}`).evaluate({})), name).toBe('object');
    }
  });
});
