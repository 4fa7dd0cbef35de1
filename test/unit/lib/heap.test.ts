import { describe, expect, it } from 'vitest';
import { DEFAULT_HEAP_GROWTH_PERCENT, HEAP_GROWTH_ENV, applyHeapGrowth } from '../../../src/lib/heap.js';

function run(
  env: Record<string, string>,
  execArgv: string[] = [],
): { choice: ReturnType<typeof applyHeapGrowth>; flags: string[] } {
  const flags: string[] = [];
  const choice = applyHeapGrowth(env, execArgv, (f) => void flags.push(f));
  return { choice, flags };
}

describe('applyHeapGrowth', () => {
  it('sets the default growth when nothing says otherwise', () => {
    const r = run({});
    expect(r.flags).toEqual([`--heap-growing-percent=${DEFAULT_HEAP_GROWTH_PERCENT}`]);
    expect(r.choice).toEqual({ percent: DEFAULT_HEAP_GROWTH_PERCENT, source: 'default' });
  });

  it('takes the percentage from the environment, and 0 leaves V8 alone', () => {
    expect(run({ [HEAP_GROWTH_ENV]: ' 50 ' }).flags).toEqual(['--heap-growing-percent=50']);
    const off = run({ [HEAP_GROWTH_ENV]: '0' });
    expect(off.flags).toEqual([]);
    expect(off.choice.source).toBe('disabled');
  });

  it("leaves a --heap-growing-percent given to node itself alone (the operator's flag wins)", () => {
    for (const flag of ['--heap-growing-percent=80', '--heap_growing_percent=80']) {
      const r = run({ [HEAP_GROWTH_ENV]: '30' }, ['--enable-source-maps', flag]);
      expect(r.flags).toEqual([]);
      expect(r.choice.source).toBe('node-flag');
    }
  });

  it('refuses a value that is not a whole percentage, naming the variable', () => {
    for (const bad of ['abc', '-5', '12.5', '5000']) {
      expect(() => run({ [HEAP_GROWTH_ENV]: bad })).toThrow(
        `${HEAP_GROWTH_ENV}: expected a whole number of percent from 0 to 1000`,
      );
    }
  });
});
