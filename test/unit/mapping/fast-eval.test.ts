import fc from 'fast-check';
import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { SLOW, fastEvaluator } from '../../../src/mapping/fast-eval.js';
import type { HelperFn } from '../../../src/mapping/helpers.js';
import { registerHelpers } from '../../../src/mapping/helpers.js';
import { HelperIssue } from '../../../src/mapping/issue.js';

/** Helpers that record each call, so a test sees a helper run exactly once whichever path ran. */
function helpers(calls: string[]): Map<string, HelperFn> {
  return new Map<string, HelperFn>([
    [
      'echo',
      function (this: jsonata.Focus, ...args: unknown[]) {
        calls.push('echo');
        return { args, seen: this.environment.lookup('seen') ?? null };
      },
    ],
    [
      'fail',
      (v: unknown) => {
        calls.push('fail');
        throw new HelperIssue('mapping', `bad ${String(v)}`, 0);
      },
    ],
    [
      'twice',
      (v: unknown) => {
        calls.push('twice');
        return typeof v === 'number' ? v * 2 : undefined;
      },
    ],
  ]);
}

const FAST = [
  'a',
  'a.b',
  'a.b.c',
  '`a b`.c',
  '$',
  '$v',
  '$v.b',
  '$missing',
  '$missing.b',
  '"text"',
  '12',
  'null',
  'true',
  '$echo()',
  '$echo(a, 100, "x")',
  '$echo($, $v.b, a.b.c)',
  '$twice(a)',
  '$fail(a.b)',
  'constructor',
  'a.toString',
  'a & b',
  '"x" & a.b & $v.b',
  'a = "x"',
  'a != 1',
  'a = b',
  '$exists(a)',
  '$exists($v.b)',
  '$trim(a)',
  '$trim(a & " " & b)',
  'a ? b : c',
  'a ? b',
  'a = "x" ? $echo(a) : null',
  '$echo($twice(a))',
  '$echo(a ? $twice(b) : "no", $twice(c))',
  '$fail($twice(a))',
  '$twice($fail(a))',
  '$exists(a) ? a : 0',
  '$length(a)',
  '$substring(a, 0, 2)',
  '$substring(b, c)',
  '$substring(b, c, c)',
  '$substring("document " & a, 0, 3)',
  '$length(a) > 3 ? $twice($length(a)) : a',
  'a < b',
  'c <= 7',
  'a > b',
  'c >= "x"',
  '$echo().args',
  '$echo(a).args.b',
  '$echo().seen',
  '$twice(a).b',
  '$twice(a) = 1',
  '$echo(a).args = b',
  'a != $echo().seen',
  '$echo() = $echo()',
  '$echo($substring(a, 0, 1), $v.b)',
  '(a)',
  '$number(c)',
  '$number(b)',
  '$number(c) > 1',
  '$exists($echo())',
  '$exists($twice(a))',
  '$echo(a) ? b : c',
  '$twice(a) ? $echo(b) : "no"',
  '$echo().args ? 1 : 2',
  '$twice(a) ? b',
  'a ? ($length(a) > 1 ? $echo($substring(a, 0, 1), "cut") : a) : $echo($substring("document " & b, 0, 4))',
];

const NOT_FAST = [
  '$number($echo())',
  '$length($twice(a))',
  'a[0]',
  'a.b[c = 1]',
  'a + 1',
  'a and b',
  '$substring(a)',
  '$length()',
  '$length(a, b)',
  '$substring($echo(), 0, 1)',
  '$echo() < 1',
  '$twice(a) > b',
  '$echo(a)[0]',
  '$echo().b[0]',
  '$echo().`b`.*',
  '$echo() & "x"',
  '$exists(a, b)',
  '(a; b)',
  '($x := a)',
  'a{b: c}',
  '$echo(function($x){$x})',
  '**.a',
  'a.*',
  '$v[0]',
  'a^(b)',
];

interface Outcome {
  value?: unknown;
  error?: { position: unknown; token: unknown; message: unknown; code: unknown };
  calls: string[];
}

async function viaJsonata(
  source: string,
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<Outcome> {
  const calls: string[] = [];
  const expr = jsonata(source, { timeout: 1000, stack: 500 });
  registerHelpers(expr, helpers(calls));
  try {
    return { value: await expr.evaluate(input, bindings), calls };
  } catch (err) {
    const e = err as Record<string, unknown>;
    return {
      error: { position: e['position'], token: e['token'], message: e['message'], code: e['code'] },
      calls,
    };
  }
}

async function viaFast(
  source: string,
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<Outcome | typeof SLOW> {
  const calls: string[] = [];
  const fast = fastEvaluator(jsonata(source).ast(), helpers(calls));
  if (fast === undefined) throw new Error(`${source}: no fast evaluator`);
  try {
    const v = fast(input, bindings);
    if (v === SLOW) {
      expect(calls, `${source}: declined after calling a helper`).toEqual([]);
      return SLOW;
    }
    return { value: await v, calls };
  } catch (err) {
    const e = err as Record<string, unknown>;
    return {
      error: { position: e['position'], token: e['token'], message: e['message'], code: e['code'] },
      calls,
    };
  }
}

/** JSON-ish values with arrays (singletons too), nested objects, and keys that collide with Object's. */
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom('x', '', 'h\u00e9llo \u{1d4b3}y', 0, 2, 7, -1.5, true, false, null),
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('a', 'b', 'c', 'a b', 'toString', 'seen'), tie('v'), { maxKeys: 3 }),
  ),
})).v;

describe('mapping fast evaluator (JSONata without JSONata for the commonest shapes)', () => {
  it('takes the plain shapes and declines every other', () => {
    for (const s of FAST) expect(fastEvaluator(jsonata(s).ast(), helpers([])), s).toBeDefined();
    for (const s of NOT_FAST) expect(fastEvaluator(jsonata(s).ast(), helpers([])), s).toBeUndefined();
  });

  it('gives JSONata result, error position and token, or declines before any helper runs', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...FAST),
        value,
        fc.record({ v: value, seen: value }, { requiredKeys: [] }),
        async (source, input, bindings) => {
          const fast = await viaFast(source, input, bindings);
          if (fast === SLOW) return;
          expect(fast).toEqual(await viaJsonata(source, input, bindings));
        },
      ),
      { numRuns: 6000 },
    );
  });

  it('answers the inputs a loan gives without declining', async () => {
    // Nested objects for the paths, flat text and numbers for the operators: each shape answers one.
    const inputs = [
      { a: { b: { c: 'deep' } }, 'a b': { c: 3 } },
      { a: 'x', b: '  y \t z ', c: 2 },
    ];
    const bindings = { v: { b: 'bound' }, seen: 'yes' };
    for (const s of FAST.filter((x) => !x.includes('$missing'))) {
      let answered = 0;
      for (const input of inputs) {
        const fast = await viaFast(s, input, bindings);
        if (fast === SLOW) continue;
        answered += 1;
        expect(fast, s).toEqual(await viaJsonata(s, input, bindings));
      }
      expect(answered, s).toBeGreaterThan(0);
    }
  });

  it('declines what JSONata treats as a sequence, and a binding that shadows a helper', async () => {
    expect(await viaFast('a.b', { a: [{ b: 1 }, { b: 2 }] }, {})).toBe(SLOW);
    expect(await viaFast('a', { a: [1] }, {})).toBe(SLOW);
    expect(await viaFast('$v.b', {}, { v: [{ b: 1 }] })).toBe(SLOW);
    expect(await viaFast('a', [{ a: 1 }], {})).toBe(SLOW);
    expect(await viaFast('$missing', {}, {})).toBe(SLOW); // perhaps a built-in: JSONata's to resolve
    expect(await viaFast('$trim(a)', { a: ' x ' }, { trim: 1 })).toBe(SLOW);
    expect(await viaFast('a & b', { a: 'x', b: 1 }, {})).toBe(SLOW); // $string of a number: JSONata's
    expect(await viaFast('a < b', { a: 'x', b: 1 }, {})).toBe(SLOW); // T2009: JSONata's to raise
    expect(await viaFast('$length(a)', { a: 5 }, {})).toBe(SLOW); // its signature's error
    expect(await viaFast('$substring(a, "1")', { a: 'xyz' }, {})).toBe(SLOW);
    // A nested call that would decline is found before the outer helper or any other runs.
    expect(await viaFast('$echo($twice(a), $twice(b))', { a: 1, b: [2] }, {})).toBe(SLOW);
    expect(await viaFast('$twice(a)', { a: 2 }, { twice: 'mine' })).toBe(SLOW);
    expect(await viaJsonata('$twice(a)', { a: 2 }, { twice: 'mine' })).toMatchObject({
      error: { code: 'T1006' },
    });
  });

  it('compares objects and arrays as JSONata does, and walks a helper result JSONata would map over', async () => {
    const cases: Array<[string, unknown]> = [
      ['a = b', { a: { x: 1, y: [1, { z: 2 }] }, b: { y: [1, { z: 2 }], x: 1 } }],
      ['a = b', { a: { x: 1 }, b: { x: 1, y: null } }],
      ['a != b', { a: { x: [1, 2] }, b: { x: [1, 2] } }],
      ['$echo(a).args', { a: 'x' }],
      ['$echo(a, b).args', { a: 'x', b: { c: 1 } }],
      ['$echo(a).args.b', { a: { b: [2, 3] } }],
      ['$echo(a, b).args.b', { a: { b: 1 }, b: { b: [2, 3] } }],
      ['$echo(a).args = b', { a: 'x', b: 'x' }],
    ];
    for (const [source, input] of cases) {
      const fast = await viaFast(source, input, {});
      expect(fast, source).not.toBe(SLOW);
      expect(fast, source).toEqual(await viaJsonata(source, input, {}));
    }
  });

  it('raises JSONata’s own error for a condition on a number out of range, calling the helper once', async () => {
    const input = { a: 1e308, b: 'x' };
    const fast = await viaFast('$twice(a) ? b : "no"', input, {});
    expect(fast).toEqual(await viaJsonata('$twice(a) ? b : "no"', input, {}));
    expect(fast).toMatchObject({ error: { code: 'D1001' }, calls: ['twice'] });
  });

  it("marks a helper's failure where JSONata does (the call's position, the helper's name)", async () => {
    const fast = await viaFast('  $fail(a.b)', { a: { b: 'x' } }, {});
    expect(fast).toEqual(await viaJsonata('  $fail(a.b)', { a: { b: 'x' } }, {}));
    expect(fast).toMatchObject({ error: { position: 8, token: 'fail', message: 'bad x' }, calls: ['fail'] });
  });
});
