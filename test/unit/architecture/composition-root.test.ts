import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Issue 25: adapters are built in one place. Outside src/app/ (the composition root) and
 * src/store/ (which owns the state store), no module opens a state database or builds a store,
 * platform client or core from config: CLI commands ask src/app for what they need. (The sandbox
 * is a separate program: it has no state store.)
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');
const SRC = join(ROOT, 'src');
const BUILDERS =
  /\b(openDatabase|openStore|openPgPool|createBoardingStore|createConsoleStore|createDaemonStatusStore|platformClientFromConfig|fileBatchesFromConfig|createWebhookInbox|createCore)\s*\(|\b(sqliteStore|openSqliteStore|pgStore)\s*\(/;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('the composition root', () => {
  it('no adapter is built outside src/app/ and src/store/', () => {
    const offenders: string[] = [];
    for (const file of sources(SRC)) {
      const rel = relative(ROOT, file);
      if (rel.startsWith('src/app/') || rel.startsWith('src/store/') || rel.startsWith('src/sandbox/'))
        continue;
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const m = BUILDERS.exec(line);
          // A local helper of the same name (`async function openStore(ctx)`) declares, it does not build.
          if (m && !/\bfunction\s+\w+\s*\(/.test(line)) offenders.push(`${rel}:${i + 1}: ${m[0]}`);
        });
    }
    expect(offenders).toEqual([]);
  });
});
