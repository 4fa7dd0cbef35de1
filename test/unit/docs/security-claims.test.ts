import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/security.md: every claim names the test that holds it. Each bullet names at least one test
 * file that exists, and a quoted title after a file (`file.test.ts ("title …")`) is the start of a
 * test in that file, so a renamed or removed test shows here.
 */
const repo = resolve(import.meta.dirname, '../../..');
const text = readFileSync(join(repo, 'docs/security.md'), 'utf8');
const bullets = text
  .split(/\n(?=- )/)
  .filter((b) => b.startsWith('- '))
  .map((b) => b.replace(/\s*\n\s*/g, ' '));

describe('docs/security.md', () => {
  it('has claims', () => {
    expect(bullets.length).toBeGreaterThan(10);
  });

  it.each(bullets.map((b) => [b.slice(0, 70), b]))('names a test that holds it: %s…', (_short, bullet) => {
    const files = [...bullet.matchAll(/test\/[\w./-]+\.test\.ts/g)].map((m) => m[0]);
    expect(files.length, 'a test file named').toBeGreaterThan(0);
    for (const f of files) expect(existsSync(join(repo, f)), f).toBe(true);
    for (const m of bullet.matchAll(/(test\/[\w./-]+\.test\.ts) \(([^)]*)\)/g)) {
      const source = readFileSync(join(repo, m[1] as string), 'utf8').replace(/\s*\n\s*/g, ' ');
      for (const title of (m[2] as string).split(/", "/)) {
        const words = title.replace(/^"|"$/g, '').replace(/ …$/, '');
        expect(source, `${m[1]}: a test titled "${words}"`).toContain(words);
      }
    }
  });
});
