import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import type { Config } from '../config/schema.js';
import type { CoreCheck, CoreSystem } from '../core/port.js';
import { errorMessage } from '../lib/errors.js';
import type { CompiledMapping } from '../mapping/compile.js';
import type { ConnectionCheck } from './check-result.js';

/**
 * `config check --connect`, the core's part: the core with these credentials, the products and custom
 * field sets the mapping set writes, the file core's batch folder, the customer extract.
 */
/** Core loan product ids the set can produce: the `productId` lookup and any default named *productId. */
export function mappedProductIds(
  mapping: CompiledMapping | undefined,
  bankDefaults: Readonly<Record<string, unknown>>,
): number[] {
  if (!mapping) return [];
  const values: unknown[] = [];
  const lookup = mapping.lookups.get('productId');
  if (lookup) {
    values.push(...lookup.values.values());
    if (lookup.fallback !== undefined) values.push(lookup.fallback);
  }
  const fromDefaults = (d: Readonly<Record<string, unknown>>): void => {
    for (const [k, v] of Object.entries(d)) if (/productid$/i.test(k)) values.push(v);
  };
  fromDefaults(mapping.defaults);
  for (const o of mapping.overrides.values()) fromDefaults(o.defaults);
  fromDefaults(bankDefaults);
  const ids = values.map((v) => Number(v)).filter((n) => Number.isSafeInteger(n) && n > 0);
  return [...new Set(ids)].sort((a, b) => a - b);
}

/**
 * Core loan product references the set can produce, as text (Mambu product ids or keys): lookups and defaults
 * named *productId / *productTypeKey.
 */
export function mappedProductRefs(
  mapping: CompiledMapping | undefined,
  bankDefaults: Readonly<Record<string, unknown>>,
): string[] {
  if (!mapping) return [];
  const values: unknown[] = [];
  for (const name of ['productId', 'productTypeKey']) {
    const lookup = mapping.lookups.get(name);
    if (!lookup) continue;
    values.push(...lookup.values.values());
    if (lookup.fallback !== undefined) values.push(lookup.fallback);
  }
  const fromDefaults = (d: Readonly<Record<string, unknown>>): void => {
    for (const [k, v] of Object.entries(d)) if (/(productid|producttypekey)$/i.test(k)) values.push(v);
  };
  fromDefaults(mapping.defaults);
  for (const o of mapping.overrides.values()) fromDefaults(o.defaults);
  fromDefaults(bankDefaults);
  return [
    ...new Set(
      values
        .filter((v): v is string | number => (typeof v === 'string' && v !== '') || typeof v === 'number')
        .map(String),
    ),
  ].sort();
}

/** Custom field sets (fields named `_<setId>`) the set's targets write, by record type. */
export function mappedCustomFieldSets(mapping: CompiledMapping | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const t of mapping?.targets ?? []) {
    for (const f of t.fields)
      if (f.name.startsWith('_')) out[t.type] = [...new Set([...(out[t.type] ?? []), f.name])];
  }
  return out;
}

/** The customer extract (`customers.extract`, when configured): readable. */
async function customerExtractCheck(config: Config): Promise<ConnectionCheck[]> {
  const path = config.customers.extract?.path;
  if (path === undefined) return [];
  try {
    const st = await stat(path);
    if (!st.isFile()) return [{ name: 'customers.extract', status: 'fail', detail: `${path}: not a file` }];
    await access(path, constants.R_OK);
    return [
      {
        name: 'customers.extract',
        status: 'ok',
        detail: `${path} readable (${st.size} bytes, modified ${st.mtime.toISOString()})`,
      },
    ];
  } catch (err) {
    return [{ name: 'customers.extract', status: 'fail', detail: `${path}: ${errorMessage(err)}` }];
  }
}

export async function coreChecks(
  config: Config,
  mapping: CompiledMapping | undefined,
  openCore: () => CoreSystem,
  signal: AbortSignal | undefined,
): Promise<ConnectionCheck[]> {
  let core: CoreSystem;
  try {
    core = openCore();
  } catch (err) {
    return [{ name: 'core', status: 'fail', detail: errorMessage(err) }];
  }
  try {
    let checks: CoreCheck[];
    if (core.checkConnection) {
      checks = await core.checkConnection({
        productIds: mappedProductIds(mapping, config.mappings.defaults),
        productRefs: mappedProductRefs(mapping, config.mappings.defaults),
        customFieldSets: mappedCustomFieldSets(mapping),
        ...(signal ? { signal } : {}),
      });
    } else {
      const h = await core.health();
      checks = [{ name: 'core', status: h.ok ? 'ok' : 'fail', detail: h.detail ?? core.name }];
    }
    // The file core's batches need the set's layout; the check above looked at packages only then.
    if (config.core.adapter === 'file' && config.core.file.csvBatches && mapping !== undefined) {
      const batches = `${config.core.file.dir}/batches`;
      const b = await dirWritable(batches);
      if (b !== null) checks.push({ name: 'core.batches', status: 'fail', detail: b });
    }
    return [...checks, ...(await customerExtractCheck(config))];
  } finally {
    await core.close();
  }
}

/** null when dir is writable, or missing and creatable. */
async function dirWritable(dir: string): Promise<string | null> {
  try {
    const st = await stat(dir);
    if (!st.isDirectory()) return `${dir}: not a directory`;
    await access(dir, constants.W_OK | constants.X_OK);
    return null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    return `${dir}: ${errorMessage(err)}`;
  }
}
