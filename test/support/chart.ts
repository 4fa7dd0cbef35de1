/**
 * Renders deploy/helm/boarding-connector as `helm template` would, for the chart's tests and the
 * rollout test. With a `helm` binary (BOARDING_HELM, else on PATH) it runs `helm template`; without
 * one (this project's machines reach npm and Debian only, and Debian ships no helm) it runs
 * scripts/chart-render, Go's text/template (helm's own engine) with the helm functions the chart
 * uses, built by scripts/ci-setup.sh into ~/.cache/boarding-connector/bin. Values are merged here as
 * helm merges them (maps deep, anything else replaced, null deletes).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';

export const CHART_DIR = join(process.cwd(), 'deploy/helm/boarding-connector');
const CACHE_BIN = join(homedir(), '.cache/boarding-connector/bin');

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [key: string]: unknown;
}

export type Renderer = { kind: 'helm' | 'chart-render'; bin: string } | { kind: 'none'; reason: string };

function onPath(name: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** The renderer this machine has: helm, else the Go renderer (built now if Go is there), else why not. */
export function chartRenderer(): Renderer {
  const helm =
    process.env['BOARDING_HELM'] ??
    onPath('helm') ??
    (existsSync(join(CACHE_BIN, 'helm')) ? join(CACHE_BIN, 'helm') : null);
  if (helm) return { kind: 'helm', bin: helm };
  const bin = join(CACHE_BIN, 'chart-render');
  if (existsSync(bin)) return { kind: 'chart-render', bin };
  if (onPath('go')) {
    const b = spawnSync('go', ['build', '-o', bin, '.'], {
      cwd: join(process.cwd(), 'scripts/chart-render'),
      encoding: 'utf8',
      env: { ...process.env, GOPROXY: 'off', GOFLAGS: '-mod=mod' },
    });
    if (b.status === 0) return { kind: 'chart-render', bin };
    return { kind: 'none', reason: `building scripts/chart-render failed: ${b.stderr}` };
  }
  return {
    kind: 'none',
    reason:
      'neither helm nor Go (to build scripts/chart-render) is installed; scripts/ci-setup.sh installs Go',
  };
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Helm's coalescing: maps merge key by key, a null removes the key, anything else replaces. */
export function mergeValues(base: Json, over: Json): Json {
  if (!isMap(base) || !isMap(over)) return structuredClone(over);
  const out: { [k: string]: Json } = structuredClone(base);
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else out[k] = k in out ? mergeValues(out[k] as Json, v) : structuredClone(v);
  }
  return out;
}
const isMap = (v: Json): v is { [k: string]: Json } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export interface RenderOptions {
  /** Values files, relative to the chart (e.g. values-sqlite.yaml) or absolute; in order. */
  files?: string[];
  /** Like --set / a last -f: merged last. */
  values?: Record<string, unknown>;
  name?: string;
  namespace?: string;
}

export interface Rendered {
  objects: K8sObject[];
  text: string;
}

/** Renders the chart; throws the renderer's error text (helm's `fail`/`required` message) on refusal. */
export function renderChart(r: Renderer, o: RenderOptions = {}): Rendered {
  if (r.kind === 'none') throw new Error(r.reason);
  const name = o.name ?? 'bc';
  const namespace = o.namespace ?? 'boarding';
  const files = (o.files ?? []).map((f) => (f.startsWith('/') ? f : join(CHART_DIR, f)));
  const dir = mkdtempSync(join(tmpdir(), 'chart-'));
  const overrides = join(dir, 'overrides.yaml');
  writeFileSync(overrides, stringify(o.values ?? {}));
  let res;
  if (r.kind === 'helm') {
    const args = ['template', name, CHART_DIR, '--namespace', namespace];
    for (const f of [...files, overrides]) args.push('-f', f);
    res = spawnSync(r.bin, args, { encoding: 'utf8' });
  } else {
    let merged = parse(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as Json;
    for (const f of [...files, overrides])
      merged = mergeValues(merged, (parse(readFileSync(f, 'utf8')) ?? {}) as Json);
    const valuesJson = join(dir, 'values.json');
    writeFileSync(valuesJson, JSON.stringify(merged));
    res = spawnSync(
      r.bin,
      ['-chart', CHART_DIR, '-values', valuesJson, '-name', name, '-namespace', namespace],
      {
        encoding: 'utf8',
      },
    );
  }
  if (res.status !== 0) throw new Error(`chart refused: ${res.stderr.trim()}`);
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(res.stdout)) {
    if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors[0]?.message}`);
    const obj = doc.toJS() as K8sObject | null;
    if (obj) objects.push(obj);
  }
  return { objects, text: res.stdout };
}

export function find(objects: K8sObject[], kind: string, nameSuffix = ''): K8sObject {
  const hit = objects.find((o) => o.kind === kind && o.metadata.name.endsWith(nameSuffix));
  if (!hit) throw new Error(`no ${kind}${nameSuffix ? ` named …${nameSuffix}` : ''} rendered`);
  return hit;
}
