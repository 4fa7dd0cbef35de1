/**
 * Issue 43 F8: every command hint goes through the one shell quoter. A platform id
 * `ln_1 $(touch x) & echo`, pasted from `mappings preview`'s unquoted `loans reboard …` hint (or
 * report.html's `loans show …`), ran the command. Each hint is parsed by a real `sh`: `sh -n`
 * accepts it, and the argv it gives is exactly the intended one; nothing is executed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commandHint } from '../../../src/lib/shell.js';

const HOSTILE = [
  'ln_1 $(touch x) & echo',
  'ln_\'quoted\'"double"',
  'ln_2\nrm -rf /tmp/never',
  'ln_3; touch x #',
  '`touch x`',
  '',
  'ln_4 \\ \t*',
];

/** The argv `sh` makes of a hint's text (set -- HINT; one argument a line, NUL-separated). */
function argvOf(hint: string, cwd: string): string[] {
  execFileSync('sh', ['-n', '-c', hint]);
  const out = execFileSync('sh', ['-c', `set -- ${hint}; printf '%s\\0' "$@"`], { cwd }).toString();
  return out.split('\0').slice(0, -1);
}

describe('command hints (issue 43 F8)', () => {
  it('a hint with a hostile id parses to exactly the intended argv and runs nothing', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'hints-'));
    for (const id of HOSTILE) {
      expect(argvOf(commandHint('loans show', [id]), cwd), JSON.stringify(id)).toEqual(['loans', 'show', id]);
      expect(argvOf(commandHint('loans reboard', [id], '--reason …'), cwd)).toEqual([
        'loans',
        'reboard',
        id,
        '--reason',
        '…',
      ]);
      expect(argvOf(commandHint('webhooks enable', [id]), cwd)).toEqual(['webhooks', 'enable', id]);
    }
    expect(existsSync(join(cwd, 'x'))).toBe(false);
  });

  it('no hint in src/ interpolates an id unquoted (the places the audit found, and any new one)', () => {
    const files: string[] = [];
    const walk = (d: string): void => {
      for (const f of readdirSync(d)) {
        const p = join(d, f);
        if (statSync(p).isDirectory()) walk(p);
        else if (p.endsWith('.ts')) files.push(p);
      }
    };
    walk('src');
    const unquoted =
      /`?(loans|webhooks|mappings|batches|customers|state) (show|retry|skip|reboard|enable|preview|release|migrate) \$\{(?!shellQuote\(|commandHint\()/;
    const found = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((line, i) => [f, i + 1, line] as const)
        .filter(([, , line]) => unquoted.test(line) && !/^\s*(\*|\/\/)/.test(line)),
    );
    expect(found.map(([f, n, l]) => `${f}:${n}: ${l.trim()}`)).toEqual([]);
  });
});
