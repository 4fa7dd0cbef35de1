import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { shellQuote } from '../../../src/lib/shell.js';

describe('shellQuote', () => {
  it.each(['ln_1', 'ln 7', "it's", "a'b'c", '$(touch pwned) `x` "q" \\ ;|&', ''])(
    'a POSIX shell reads %j back as exactly one argument',
    (id) => {
      const out = execFileSync('sh', ['-c', `printf '%s|' ${shellQuote(id)}`], { encoding: 'utf8' });
      expect(out).toBe(`${id}|`);
    },
  );
});
