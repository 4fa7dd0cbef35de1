#!/usr/bin/env node
// `npm run check:cycles`, second half: import cycles between the folders of src/ (one concept per
// folder, dependencies in one direction). File-level cycles are dpdm's job; this collapses dpdm's
// graph, type-only imports included, to folders and fails on any strongly connected component.
import { execFileSync } from 'node:child_process';
/* global console */
import process from 'node:process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'folder-cycles-'));
const out = join(dir, 'deps.json');
try {
  execFileSync(
    'npx',
    ['dpdm', '--no-warning', '--no-tree', '--no-circular', '--output', out, 'src/main.ts'],
    { stdio: 'ignore' },
  );
  const { tree } = JSON.parse(readFileSync(out, 'utf8'));
  const folderOf = (file) => /^src\/([^/]+)\//.exec(file)?.[1];
  /** folder → folder → one example edge (file → file), for the message. */
  const graph = new Map();
  for (const [file, deps] of Object.entries(tree)) {
    const from = folderOf(file);
    if (!from || !deps) continue;
    if (!graph.has(from)) graph.set(from, new Map());
    for (const dep of deps) {
      const to = folderOf(dep.id ?? '');
      if (!to || to === from) continue;
      if (!graph.get(from).has(to)) graph.get(from).set(to, `${file} → ${dep.id}`);
    }
  }
  // Tarjan's strongly connected components.
  let index = 0;
  const idx = new Map(),
    low = new Map(),
    stack = [],
    on = new Set(),
    sccs = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) sccs.push(scc);
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  if (sccs.length === 0) {
    console.log(`folder import cycles: 0 (${graph.size} folders)`);
  } else {
    for (const scc of sccs) {
      console.error(`folder import cycle: ${scc.sort().join(' ↔ ')}`);
      for (const a of scc)
        for (const [b, edge] of graph.get(a) ?? [])
          if (scc.includes(b)) console.error(`  ${a} → ${b}: ${edge}`);
    }
    process.exitCode = 1;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
