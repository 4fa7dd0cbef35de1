import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Issue 44 item 1: ops/ is the only application layer. Every operator action has its rules in one
 * file under src/ops/; the faces (src/cli/, src/console/) call it; src/app/ only wires. This test
 * holds the inventory of the actions and derives, by reading the imports of src/, which faces reach
 * each one, so that a move (or a twin) shows here rather than in a review.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');
const SRC = join(ROOT, 'src');

type Face = 'cli' | 'console';

interface Action {
  action: string;
  /** The one file that holds the action's rules. */
  file: string;
  /** The functions a face calls: they must be exported by `file` and imported from nowhere else. */
  entry: string[];
  /** The faces that must reach it (derived from imports, see facesOf). */
  faces: Face[];
  /** Set only for the entries another branch is moving into ops/ this round. */
  todo?: string;
}

const ACTIONS: Action[] = [
  { action: 'retry', file: 'src/ops/retry.ts', entry: ['planRetry', 'retryLoan'], faces: ['cli', 'console'] },
  { action: 'skip', file: 'src/ops/skip.ts', entry: ['planSkip', 'skipLoan'], faces: ['cli', 'console'] },
  {
    action: 'bulk',
    file: 'src/ops/bulk.ts',
    entry: ['planLoans', 'applyLoanAction', 'bulkTargets'],
    faces: ['cli', 'console'],
  },
  {
    action: 'reboard',
    file: 'src/ops/reboard.ts',
    entry: ['previewReboard', 'reboardLoan'],
    faces: ['cli', 'console'],
  },
  { action: 'seal', file: 'src/ops/seal.ts', entry: ['sealEarly'], faces: ['cli', 'console'] },
  {
    action: 'strike clear',
    file: 'src/ops/strike-clear.ts',
    entry: ['clearStrikes'],
    faces: ['cli', 'console'],
  },
  {
    action: 'unlock',
    file: 'src/ops/unlock.ts',
    entry: ['planUnlock', 'applyUnlock'],
    faces: ['cli', 'console'],
  },
  {
    action: 'sign-off',
    file: 'src/ops/signoff.ts',
    entry: ['planSignOff', 'applySignOff'],
    faces: ['console'],
  },
  {
    action: 'connection check',
    file: 'src/ops/connection-check.ts',
    entry: ['localChecks', 'portChecks', 'connectionChecks'],
    faces: ['cli'],
  },
  {
    action: 'state migrate',
    file: 'src/ops/state.ts',
    entry: ['planMigration', 'applyMigration'],
    faces: ['cli'],
  },
  { action: 'state backup', file: 'src/ops/state.ts', entry: ['planBackup', 'applyBackup'], faces: ['cli'] },
  { action: 'state verify', file: 'src/ops/state.ts', entry: ['verifyState'], faces: ['cli'] },
  {
    action: 'reconcile now',
    file: 'src/ops/reconcile.ts',
    entry: ['reconcileNow'],
    faces: ['cli', 'console'],
  },
  // Reloaded by the daemon `run` starts (SIGHUP, mappings.watch).
  {
    action: 'mapping reload',
    file: 'src/ops/mapping-reload.ts',
    entry: ['createReloadableMapper'],
    faces: ['cli'],
  },
  {
    action: 'mapping preview',
    file: 'src/ops/mapping-preview.ts',
    entry: ['previewMapping'],
    faces: ['cli'],
  },
];

/**
 * Store methods that carry an action's rule: a loan's state or history changed, an audit line written.
 * A face or app/ calling one is doing an action's work outside ops/.
 */
const RULE_WRITES = ['transition', 'recordEvent', 'amend', 'appendAudit'] as const;
/** The loan store's insert/update are named too generically to grep; they are only called as store.loans.X. */
const LOAN_WRITES = /\bloans\.(insert|update|transition|recordEvent|amend)\s*\(/;
/** A loop that walks a list in slices: bulk chunking, which is ops/bulk.ts's rule. */
const CHUNK_LOOP = /for\s*\(\s*let\s+\w+\s*=\s*0\s*;[^;]+;\s*\w+\s*\+=\s*\w+/;

interface Imported {
  from: string;
  /** Resolved path under src/ (relative to the repository root), or null for a package. */
  file: string | null;
  names: string[];
  reexport: boolean;
  /** `import type` / `export type`, or every name type-only: a type is not a call. */
  typeOnly: boolean;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

function resolveSpec(fromFile: string, spec: string): string | null {
  if (!spec.startsWith('.')) return null;
  const abs = resolve(dirname(fromFile), spec.replace(/\.js$/, '.ts'));
  return relative(ROOT, abs);
}

/** Static imports, `export … from` and `import('…')`, with the names each brings in. */
function importsOf(file: string, text: string): Imported[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: Imported[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const names: string[] = [];
      const clause = node.importClause;
      if (clause?.name) names.push(clause.name.text);
      const nb = clause?.namedBindings;
      // `import type {…}`, or `import { type A, type B }`: a type is not a call.
      let allTypes = clause?.name === undefined && nb !== undefined && ts.isNamedImports(nb);
      if (nb && ts.isNamedImports(nb)) {
        for (const el of nb.elements) names.push((el.propertyName ?? el.name).text);
        allTypes &&= nb.elements.length > 0 && nb.elements.every((el) => el.isTypeOnly);
      }
      const typeOnly = clause?.isTypeOnly === true || allTypes;
      const spec = node.moduleSpecifier.text;
      out.push({ from: spec, file: resolveSpec(file, spec), names, reexport: false, typeOnly });
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const names: string[] = [];
      if (node.exportClause && ts.isNamedExports(node.exportClause))
        for (const el of node.exportClause.elements) names.push((el.propertyName ?? el.name).text);
      const spec = node.moduleSpecifier.text;
      out.push({
        from: spec,
        file: resolveSpec(file, spec),
        names,
        reexport: true,
        typeOnly: node.isTypeOnly,
      });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      const spec = node.arguments[0].text;
      out.push({ from: spec, file: resolveSpec(file, spec), names: [], reexport: false, typeOnly: false });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** Exported function names (and `export const x = …`) of a source file. */
function exportedFunctions(text: string): string[] {
  return [...text.matchAll(/^export\s+(?:async\s+)?(?:function\s*\*?\s*|const\s+)(\w+)/gm)].map(
    (m) => m[1] as string,
  );
}

const FILES = new Map<string, { text: string; imports: Imported[] }>();
for (const abs of sources(SRC)) {
  const text = readFileSync(abs, 'utf8');
  FILES.set(relative(ROOT, abs), { text, imports: importsOf(abs, text) });
}
const files = (prefix: string): string[] => [...FILES.keys()].filter((f) => f.startsWith(prefix)).sort();

function faceOf(file: string): Face | null {
  if (file.startsWith('src/cli/')) return 'cli';
  if (file.startsWith('src/console/')) return 'console';
  // The console's wiring: what the daemon's console is handed (e.g. "Run reconciliation now").
  if (file === 'src/app/console.ts') return 'console';
  return null;
}

/**
 * The ops/ and app/ files a face file reaches by imports: directly, through app/ (the wiring it asks),
 * and through other ops/ files (one action composed of another, e.g. bulk of retry). Never further.
 */
function reached(face: string): Set<string> {
  const seen = new Set<string>();
  const queue = [face];
  while (queue.length > 0) {
    const f = queue.pop() as string;
    for (const imp of FILES.get(f)?.imports ?? []) {
      const to = imp.file;
      if (to === null || imp.typeOnly || seen.has(to) || !FILES.has(to)) continue;
      if (!to.startsWith('src/ops/') && !to.startsWith('src/app/')) continue;
      // app/ reached from ops/ would be a folder cycle; app/ → app/ is wiring depth we follow once.
      if (f.startsWith('src/ops/') && to.startsWith('src/app/')) continue;
      seen.add(to);
      queue.push(to);
    }
  }
  return seen;
}

/** For each action file: the face files that reach it. */
const FACE_FILES = [...FILES.keys()].filter((f) => faceOf(f) !== null).sort();
const REACH = new Map(FACE_FILES.map((f) => [f, reached(f)]));
function facesOf(actionFile: string): string[] {
  return FACE_FILES.filter((f) => REACH.get(f)?.has(actionFile));
}

/** file:line of each match of `re` in `file`, comments left out. */
function matches(file: string, re: RegExp): string[] {
  const text = FILES.get(file)?.text ?? '';
  const out: string[] = [];
  text.split('\n').forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, '');
    if (/^\s*\*/.test(code)) return;
    if (re.test(code)) out.push(`${file}:${i + 1}: ${code.trim().slice(0, 100)}`);
  });
  return out;
}

const ruleWriteCall = new RegExp(`\\.(${RULE_WRITES.join('|')})\\s*\\(`);

describe('operator actions: one ops/ file each, called by the faces, never defined in app/ or console/', () => {
  it('the inventory names every action the issue lists, once', () => {
    expect(ACTIONS.map((a) => a.action).sort()).toEqual(
      [
        'retry',
        'skip',
        'bulk',
        'reboard',
        'seal',
        'strike clear',
        'unlock',
        'sign-off',
        'connection check',
        'state migrate',
        'state backup',
        'state verify',
        'reconcile now',
        'mapping reload',
        'mapping preview',
      ].sort(),
    );
  });

  for (const a of ACTIONS) {
    const title = `${a.action}: ${a.file} exports ${a.entry.join(', ') || '(its entry)'}; faces: ${
      a.todo ? '(pending)' : facesOf(a.file).join(', ') || 'none'
    }`;
    if (a.todo) {
      it.todo(`${title} — TODO: ${a.todo}`);
      continue;
    }
    it(title, () => {
      expect(existsSync(join(ROOT, a.file)), `${a.file} is missing`).toBe(true);
      const exported = exportedFunctions(FILES.get(a.file)?.text ?? '');
      for (const name of a.entry) expect(exported, `${a.file} does not export ${name}`).toContain(name);
      const reachedBy = facesOf(a.file);
      for (const face of a.faces)
        expect(
          reachedBy.filter((f) => faceOf(f) === face),
          `no ${face} face reaches ${a.file} (${a.action})`,
        ).not.toEqual([]);
    });
  }

  it('no face imports an action rule from anywhere but its ops/ file, and no other file exports one', () => {
    const owner = new Map<string, string>();
    for (const a of ACTIONS) if (!a.todo) for (const n of a.entry) owner.set(n, a.file);
    const wrong: string[] = [];
    for (const f of FACE_FILES) {
      for (const imp of FILES.get(f)?.imports ?? []) {
        for (const n of imp.names) {
          const home = owner.get(n);
          if (home !== undefined && imp.file !== home)
            wrong.push(`${f} imports ${n} from ${imp.from} (its rule is ${home})`);
        }
      }
    }
    for (const [f, { text }] of FILES) {
      for (const n of exportedFunctions(text)) {
        const home = owner.get(n);
        if (home !== undefined && home !== f) wrong.push(`${f} exports ${n}, a twin of ${home}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('app/ holds no action: no plan/apply, no loan or audit writes, no re-exports for the faces', () => {
    const found: string[] = [];
    for (const f of files('src/app/')) {
      found.push(...matches(f, ruleWriteCall), ...matches(f, LOAN_WRITES));
      for (const n of exportedFunctions(FILES.get(f)?.text ?? ''))
        if (/^(plan|apply)[A-Z]/.test(n)) found.push(`${f}: exports ${n}, an action's plan/apply`);
      for (const imp of FILES.get(f)?.imports ?? [])
        if (imp.reexport) found.push(`${f}: re-exports ${imp.names.join(', ') || '*'} from ${imp.from}`);
    }
    expect(found).toEqual([]);
  });

  it('console/ holds no rule: no loan writes, no bulk chunking', () => {
    const found: string[] = [];
    for (const f of files('src/console/')) {
      found.push(...matches(f, LOAN_WRITES), ...matches(f, CHUNK_LOOP));
      found.push(...matches(f, /\.(transition|recordEvent|amend)\s*\(/));
    }
    expect(found).toEqual([]);
  });

  it('console/ writes audit lines only where listed (a ratchet: a new one, or one moved out, fails)', () => {
    const audit: Record<string, number> = {};
    for (const f of files('src/console/')) {
      const n = matches(f, /\.appendAudit\s*\(/).length;
      if (n > 0) audit[f] = n;
    }
    // The sign-in log only (auth's, the console's own): the unlock is ops/unlock.ts's, "run
    // reconciliation now" ops/reconcile.ts's (operatorReconcileNow).
    expect(audit).toEqual({ 'src/console/audit.ts': 1 });
  });

  it('ops/ renders no text: its actions return plain data, the CLI words it (cli/)', () => {
    const found: string[] = [];
    for (const f of files('src/ops/'))
      for (const n of exportedFunctions(FILES.get(f)?.text ?? ''))
        if (/(Text|Lines|render[A-Z]\w*)$/.test(n)) found.push(`${f}: exports ${n}`);
    expect(found).toEqual([]);
    // Not vacuous: the CLI's renderers match the same names.
    expect(exportedFunctions(FILES.get('src/cli/bulk-text.ts')?.text ?? '')).toContain('bulkRunLines');
  });

  it('the store write methods these checks look for still exist (a rename must not make them vacuous)', () => {
    const store = files('src/store/')
      .map((f) => FILES.get(f)?.text ?? '')
      .join('\n');
    for (const m of RULE_WRITES)
      expect(store, `no ${m}( in src/store/`).toMatch(new RegExp(`\\b${m}\\s*\\(`));
  });
});
