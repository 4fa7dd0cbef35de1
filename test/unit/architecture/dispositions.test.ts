import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Issue 44: one failure taxonomy everywhere. A command or face decides what to do about an error
 * by its disposition (src/pipeline/failures.ts dispositionOf, the words of src/lib/disposition.ts),
 * never by reading an error's `fatal` or `retryable` flag: those flags are the platform client's
 * own shorthand (src/platform/) and the loans table's JSON.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');
const SRC = join(ROOT, 'src');
const FLAG_READ = /\b(?:err|e|error|cause)\.(fatal|retryable)\b/;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('the failure taxonomy everywhere', () => {
  it('no module outside src/platform/ reads an error’s fatal or retryable flag', () => {
    const offenders: string[] = [];
    for (const file of sources(SRC)) {
      const rel = relative(ROOT, file);
      if (rel.startsWith('src/platform/')) continue;
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const m = FLAG_READ.exec(line);
          if (m) offenders.push(`${rel}:${i + 1}: ${m[0]}`);
        });
    }
    expect(offenders).toEqual([]);
  });

  it('only one type is named Disposition for failures (reports keep their sign-off word apart)', () => {
    const declared: string[] = [];
    for (const file of sources(SRC)) {
      const rel = relative(ROOT, file);
      for (const m of readFileSync(file, 'utf8').matchAll(/export type (\w*Disposition)\b\s*=/g))
        declared.push(`${rel}: ${m[1]}`);
    }
    // Every other *Disposition is a narrowing of the one type (Extract/Exclude of Disposition).
    for (const file of sources(SRC)) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/export type (\w+Disposition) =\s*([^;]+);/g))
        if (m[1] !== 'ExceptionDisposition') expect(m[2], m[1]).toMatch(/^(Extract|Exclude)<\s*Disposition,/);
    }
    expect(declared.filter((d) => d.endsWith(': Disposition'))).toEqual([
      'src/lib/disposition.ts: Disposition',
      'src/reports/dispositions.ts: Disposition',
    ]);
  });
});
