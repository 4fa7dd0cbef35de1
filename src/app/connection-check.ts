import { constants, existsSync, statSync } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import type { Config } from '../config/schema.js';
import { configNotes } from '../config/load.js';
import { adminHostWarning } from '../http/allowed-hosts.js';
import { hideSecrets, redactUrl } from '../lib/redact.js';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { listenErrorMessage } from '../http/server.js';
import { createCore, createDocumentFetcher } from './core.js';
import type { CoreCheck } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { CompiledMapping } from '../mapping/compile.js';
import { formatProblem, lintMappingDir } from '../mapping-sets/loader.js';
import { checkEndpoints } from '../platform/endpoint/endpoint-check.js';
import { isPlatformError } from '../platform/errors.js';
import { dispositionOf } from '../pipeline/failures.js';
import { type PlatformClient } from '../platform/client.js';
import { platformClientFromConfig } from './platform.js';
import type { Entities, QueueItem } from '../contract/schemas.js';
import { describeStoreTls, openStore } from '../store/open.js';
import type { StoreDb } from '../store/sql.js';
import { storeTarget, storeTargetName } from './store-target.js';
import { mapperOptionsFromConfig } from './runtime.js';
import { describeOffset, measureClockOffset } from '../observability/clock-skew.js';
import { commandHint } from '../lib/shell.js';

/**
 * `config check [--connect]`: one line per check, the way dbt debug or a "check connection" does
 * it. Without --connect only local checks run (config, mapping dir, lint). With it: the platform
 * answers, the key is accepted and what its tax-id permissions mean for boarding, the webhook
 * endpoint, the core with these credentials, and the state database takes a write.
 *
 * Cheap on the rate budget and through it: the platform calls go through the client on the state
 * database (the budget a running daemon shares), at most one queue page of 5, three entity reads,
 * two document lists and one download address (then one download, which spends no API budget),
 * and one webhook-endpoint list.
 */
export type CheckStatus = 'ok' | 'fail' | 'warn' | 'skip';

export interface ConnectionCheck {
  name: string;
  status: CheckStatus;
  detail: string;
}

export interface ConnectionCheckDeps {
  logger: Logger;
  clock: Clock;
  signal?: AbortSignal;
}

/** Entity reads spent looking for a business and a person whose tax ids show the key's permissions. */
const MAX_ENTITY_READS = 3;
/** Document lists read looking for a loan with a document to fetch (then one download-address read). */
const MAX_DOCUMENT_LISTS = 2;
const QUEUE_SAMPLE = 5;

export function localChecks(
  config: Config,
  source: string,
): { checks: ConnectionCheck[]; mapping: CompiledMapping | undefined } {
  const checks: ConnectionCheck[] = [{ name: 'config', status: 'ok', detail: `${source} is valid` }];
  if (config.webhooks.secrets.length === 0) {
    checks.push({
      name: 'webhooks.secrets',
      status: 'warn',
      detail:
        'empty: the webhook receiver refuses every delivery (401), so boarding waits for the scheduled drain; ' +
        'set webhooks.secrets or BOARDING_WEBHOOK_SECRETS to the secret `webhooks register` printed',
    });
  }
  const adminHost = adminHostWarning(config.admin);
  if (adminHost !== null) checks.push({ name: 'admin.host', status: 'warn', detail: adminHost });
  const dir = config.mappings.dir;
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    checks.push({
      name: 'mappings.dir',
      status: 'fail',
      detail:
        `${dir} is not a directory (mappings.dir; a relative ` +
        `path is from the working directory ${process.cwd()})`,
    });
    checks.push({ name: 'mappings', status: 'skip', detail: 'no mapping directory to lint' });
    return { checks, mapping: undefined };
  }
  const note = configNotes(config).find((n) => n.startsWith('mappings.dir: '));
  checks.push({
    name: 'mappings.dir',
    status: 'ok',
    detail: note === undefined ? dir : note.slice('mappings.dir: '.length),
  });
  try {
    const r = lintMappingDir(dir, mapperOptionsFromConfig(config));
    if (r.problems.length === 0 && r.mapping) {
      checks.push({
        name: 'mappings',
        status: 'ok',
        detail: `mapping set ${r.version ?? r.mapping.name} lints clean`,
      });
      return { checks, mapping: r.mapping };
    }
    const shown = r.problems.slice(0, 3).map(formatProblem).join('; ');
    checks.push({
      name: 'mappings',
      status: 'fail',
      detail:
        `${r.problems.length} lint problem(s): ` +
        `${shown}${r.problems.length > 3 ? '; … (mappings lint lists them all)' : ''}`,
    });
    return { checks, mapping: r.mapping };
  } catch (err) {
    checks.push({ name: 'mappings', status: 'fail', detail: errorMessage(err) });
    return { checks, mapping: undefined };
  }
}

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

async function storeCheck(db: StoreDb, path: string, config: Config): Promise<ConnectionCheck> {
  // SQLite: BEGIN IMMEDIATE then ROLLBACK: waits busy_timeout behind a daemon's write, changes nothing.
  const blocker = await db.writeBlocker();
  if (blocker !== null) return { name: 'store', status: 'fail', detail: `${path}: ${blocker}` };
  // PostgreSQL: the TLS actually negotiated, not the one configured (issue 33).
  const tls = await describeStoreTls(db, config.store.postgres.ssl);
  return { name: 'store', status: 'ok', detail: `${path} takes a write${tls !== null ? `; ${tls}` : ''}` };
}

/** PostgreSQL: this host's clock against the database's (store.maxClockSkewMs). */
async function clockCheck(db: StoreDb, config: Config, clock: Clock): Promise<ConnectionCheck[]> {
  if (!db.dialect.hasServerClock) return [];
  const max = config.store.maxClockSkewMs;
  try {
    const o = await measureClockOffset(db, clock);
    if (o === null) return [];
    const what = `${describeOffset(o)} (±${Math.ceil(o.rttMs / 2)} ms)`;
    if (Math.abs(o.offsetMs) >= max) {
      return [
        {
          name: 'store.clock',
          status: 'fail',
          detail:
            `${what}: at or above store.maxClockSkewMs (${max} ms); batch cut-offs, webhook timestamps and ` +
            `retry times follow this host's clock: fix its time sync (NTP)`,
        },
      ];
    }
    if (Math.abs(o.offsetMs) >= max / 2)
      return [
        {
          name: 'store.clock',
          status: 'warn',
          detail: `${what}: over half of store.maxClockSkewMs (${max} ms)`,
        },
      ];
    return [{ name: 'store.clock', status: 'ok', detail: what }];
  } catch (err) {
    return [
      {
        name: 'store.clock',
        status: 'fail',
        detail: `could not read the database's clock: ${errorMessage(err)}`,
      },
    ];
  }
}

function describePlatformError(err: unknown): string {
  if (isPlatformError(err)) return `${err.code}: ${err.describe()}`;
  return errorMessage(err);
}

const FULL_TIN = /\d{9}/;

function hasFullTin(value: unknown): boolean {
  return typeof value === 'string' && FULL_TIN.test(value.replace(/\D/g, ''));
}

interface TinObservation {
  business: 'full' | 'masked' | null;
  person: 'full' | 'masked' | null;
}

function observeTins(e: Entities, seen: TinObservation): void {
  for (const b of e.businesses) {
    if (seen.business === 'full') break;
    if (hasFullTin(b.ein)) seen.business = 'full';
    else if (b.einLast4 !== undefined || b.ein !== undefined) seen.business = 'masked';
  }
  for (const p of e.people) {
    if (seen.person === 'full') break;
    if (hasFullTin(p.ssn)) seen.person = 'full';
    else if (p.ssnLast4 !== undefined || p.ssn !== undefined) seen.person = 'masked';
  }
}

function tinCheck(
  name: string,
  what: 'business' | 'person',
  seen: 'full' | 'masked' | null,
  config: Config,
  sampled: number,
): ConnectionCheck {
  const permission = what === 'business' ? 'read:businesses:ein' : 'read:people:ssn';
  const kind = what === 'business' ? 'EINs' : 'SSNs';
  if (seen === null) {
    return {
      name,
      status: 'skip',
      detail: `no ${what} in the ${sampled} loan(s) sampled: cannot tell whether the key has ${permission}`,
    };
  }
  if (seen === 'full') return { name, status: 'ok', detail: `the key reads full ${kind} (${permission})` };
  const consequence =
    `without ${permission} every loan with a ${what} ` +
    `quarantines as tin_incomplete unless mappings.allowLast4Tin`;
  if (config.mappings.allowLast4Tin) {
    return {
      name,
      status: 'warn',
      detail:
        `the key sees only the last 4 digits of ${kind}; ` +
        `mappings.allowLast4Tin is true, so those loans board with masked ids`,
    };
  }
  return {
    name,
    status: 'fail',
    detail:
      `the key sees only the last 4 digits of ${kind}: ${consequence}. Ask the platform for a key with ` +
      `${permission}, or set mappings.allowLast4Tin: true`,
  };
}

async function platformChecks(
  platform: PlatformClient,
  config: Config,
  deps: ConnectionCheckDeps,
): Promise<ConnectionCheck[]> {
  const checks: ConnectionCheck[] = [];
  const at = redactUrl(config.platform.baseUrl);
  const signal = deps.signal;
  let items: QueueItem[] = [];
  const started = Date.now();
  try {
    items = await firstPage(platform, false, signal);
    if (items.length === 0) items = await firstPage(platform, true, signal);
  } catch (err) {
    const disposition = dispositionOf(err);
    if (disposition === 'fatal') {
      checks.push({ name: 'platform', status: 'ok', detail: `answers at ${at}` });
      checks.push({
        name: 'platform.key',
        status: 'fail',
        detail: `the platform refused the key: ${describePlatformError(err)}`,
      });
    } else if (disposition === 'stop-cycle') {
      checks.push({
        name: 'platform',
        status: 'fail',
        detail: `not called: ${errorMessage(err)} (see \`platform status\`)`,
      });
      checks.push({ name: 'platform.key', status: 'skip', detail: 'the platform was not called' });
    } else {
      checks.push({
        name: 'platform',
        status: 'fail',
        detail: `no answer from ${at}: ${describePlatformError(err)}`,
      });
      checks.push({ name: 'platform.key', status: 'skip', detail: 'the platform did not answer' });
    }
    checks.push({ name: 'platform.ein', status: 'skip', detail: 'the platform did not answer' });
    checks.push({ name: 'platform.ssn', status: 'skip', detail: 'the platform did not answer' });
    checks.push(...(await endpointCheck(platform, config, deps, false)));
    return checks;
  }
  checks.push({ name: 'platform', status: 'ok', detail: `answers at ${at} (${Date.now() - started} ms)` });
  checks.push({
    name: 'platform.key',
    status: 'ok',
    detail:
      `accepted (${config.platform.environment}; reads the boarding queue). Writes (acknowledgements) are ` +
      `not tried: a check never writes`,
  });
  const seen: TinObservation = { business: null, person: null };
  let sampled = 0;
  let entityError: string | null = null;
  for (const item of items) {
    if (sampled >= MAX_ENTITY_READS || (seen.business !== null && seen.person !== null)) break;
    sampled += 1;
    try {
      observeTins(await platform.getEntities(item.id, signal ? { signal } : {}), seen);
    } catch (err) {
      entityError = describePlatformError(err);
      break;
    }
  }
  if (entityError !== null) {
    const status: CheckStatus = 'fail';
    checks.push({ name: 'platform.ein', status, detail: `reading a loan's entities failed: ${entityError}` });
    checks.push({ name: 'platform.ssn', status, detail: `reading a loan's entities failed: ${entityError}` });
  } else if (items.length === 0) {
    const detail =
      'no loan in the boarding queue (nor boarded) to see whether ' +
      'tax ids come masked; run this again once a loan is released';
    checks.push({ name: 'platform.ein', status: 'skip', detail });
    checks.push({ name: 'platform.ssn', status: 'skip', detail });
  } else {
    checks.push(tinCheck('platform.ein', 'business', seen.business, config, sampled));
    checks.push(tinCheck('platform.ssn', 'person', seen.person, config, sampled));
  }
  checks.push(await documentCheck(platform, config, items, deps));
  checks.push(...(await endpointCheck(platform, config, deps, true)));
  return checks;
}

/** A sink that keeps nothing: the check only needs to know the bytes arrive. */
function discard(): Writable {
  return new Writable({
    write(_chunk, _enc, cb) {
      cb();
    },
  });
}

/**
 * One document fetched the way boarding fetches it (download address from the platform, then the
 * presigned address through the document-host policy, no API key), so a bank's network policy
 * that would quarantine every loan with documents (`download_refused`) shows before the first sync.
 */
async function documentCheck(
  platform: PlatformClient,
  config: Config,
  items: readonly QueueItem[],
  deps: ConnectionCheckDeps,
): Promise<ConnectionCheck> {
  const name = 'platform.documents';
  const signal = deps.signal;
  let doc: Awaited<ReturnType<PlatformClient['listDocuments']>>[number] | undefined;
  try {
    for (const item of items.slice(0, MAX_DOCUMENT_LISTS)) {
      const docs = await platform.listDocuments(item.id, signal ? { signal } : {});
      // The smallest listed one: a check is not worth a large download.
      doc = [...docs].sort(
        (a, b) =>
          (typeof a.size === 'number' ? a.size : Infinity) - (typeof b.size === 'number' ? b.size : Infinity),
      )[0];
      if (doc !== undefined) break;
    }
  } catch (err) {
    return {
      name,
      status: 'fail',
      detail: `listing a loan's documents failed: ${describePlatformError(err)}`,
    };
  }
  if (doc === undefined)
    return {
      name,
      status: 'skip',
      detail: `no document on the ${Math.min(items.length, MAX_DOCUMENT_LISTS)} loan(s) sampled: no download tried`,
    };
  const fetch = createDocumentFetcher(platform, {
    maxBytes: config.boarding.documentMaxBytes,
    deadlineMs: config.boarding.documentDeadlineMs,
    logger: deps.logger,
  });
  try {
    const r = await fetch(doc, discard(), signal);
    return {
      name,
      status: 'ok',
      detail: `document ${doc.id} downloaded from its presigned address (${r.bytes} bytes; the address is not shown)`,
    };
  } catch (err) {
    if (isPlatformError(err) && err.code === 'download.refused') {
      // The bank's policy, possibly on purpose (a sandbox on loopback under staging): a warning
      // that says what boarding will do and which key to change.
      const refused = err.message.includes(' (GET ')
        ? err.message.slice(0, err.message.lastIndexOf(' (GET '))
        : err.message;
      return {
        name,
        status: 'warn',
        detail:
          `download refused: ${refused}. ` +
          `Boarding quarantines the loans whose documents lead there as download_refused`,
      };
    }
    return { name, status: 'fail', detail: `document ${doc.id}: ${describePlatformError(err)}` };
  }
}

async function firstPage(
  platform: PlatformClient,
  boarded: boolean,
  signal: AbortSignal | undefined,
): Promise<QueueItem[]> {
  const walk = platform.boardingQueue({
    limit: QUEUE_SAMPLE,
    ...(boarded ? { boarded: true } : {}),
    ...(signal ? { signal } : {}),
  });
  try {
    const first = await walk.next();
    return first.done === true ? [] : first.value.items;
  } finally {
    await walk.return(undefined);
  }
}

async function endpointCheck(
  platform: PlatformClient,
  config: Config,
  deps: ConnectionCheckDeps,
  reachable: boolean,
): Promise<ConnectionCheck[]> {
  const name = 'webhooks.endpoint';
  if (!config.webhooks.publicUrl)
    return [
      {
        name,
        status: 'skip',
        detail: 'webhooks.publicUrl not set (webhooks are optional: the scheduled cycles board everything)',
      },
    ];
  if (!reachable) return [{ name, status: 'skip', detail: 'the platform did not answer' }];
  const r = await checkEndpoints(platform, config, deps.logger, {
    clock: deps.clock,
    ...(deps.signal ? { signal: deps.signal } : {}),
  });
  switch (r.state) {
    case 'active':
      return [{ name, status: 'ok', detail: `${r.detail} for ${redactUrl(config.webhooks.publicUrl)}` }];
    case 'failing':
      return [
        {
          name,
          status: 'warn',
          detail: `${r.detail}: deliveries fail; the platform may disable it (webhooks list)`,
        },
      ];
    case 'disabled': {
      const id = r.endpoint?.id;
      const enableHint = id !== undefined ? commandHint('webhooks enable', [id]) : 'webhooks enable ID';
      return [
        {
          name,
          status: 'fail',
          detail: `${r.detail}: no pushes arrive; fix the cause, then \`${enableHint}\``,
        },
      ];
    }
    case 'missing':
      return [
        {
          name,
          status: 'fail',
          detail:
            `no endpoint registered for ${redactUrl(config.webhooks.publicUrl)}: \`webhooks register --url ` +
            `${redactUrl(config.webhooks.publicUrl)}\``,
        },
      ];
    default:
      return [{ name, status: 'fail', detail: `could not list the webhook endpoints: ${r.detail}` }];
  }
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

async function coreChecks(
  config: Config,
  mapping: CompiledMapping | undefined,
  db: StoreDb,
  deps: ConnectionCheckDeps,
): Promise<ConnectionCheck[]> {
  let core;
  try {
    core = createCore(config, { logger: deps.logger, clock: deps.clock, db, layout: () => undefined });
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
        ...(deps.signal ? { signal: deps.signal } : {}),
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

/** The listeners `run` opens, by the config keys of their address. */
const LISTENERS = [
  { name: 'webhooks.port', what: 'the webhook receiver', host: 'webhooks.host', section: 'webhooks' },
  {
    name: 'admin.port',
    what: 'the admin listener (ops pages, console)',
    host: 'admin.host',
    section: 'admin',
  },
] as const;

/** Binds host:port for a moment: null when it could be bound, else the listen error. */
async function tryListen(host: string, port: number): Promise<Error | null> {
  const srv = createServer();
  return new Promise((resolveTry) => {
    srv.once('error', (err) => resolveTry(err));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolveTry(null)));
  });
}

/** Whether a running connector's admin listener answers at host:port (then a taken port is its own). */
async function connectorAnswers(host: string, port: number): Promise<boolean> {
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  try {
    const res = await fetch(`http://${shown}:${port}/healthz`, { signal: AbortSignal.timeout(1_000) });
    const body = (await res.json()) as { status?: unknown };
    return res.ok && body.status === 'ok';
  } catch {
    return false;
  }
}

/**
 * One line per listener `run` opens: its address can be bound now (local, so without --connect
 * too). A port a running connector holds is a warning (expected beside a daemon), any other a
 * failure that names the key to change (issue 42: a taken port surfaced only at `run`, unnamed).
 */
export async function portChecks(config: Pick<Config, 'webhooks' | 'admin'>): Promise<ConnectionCheck[]> {
  const checks: ConnectionCheck[] = [];
  const same =
    config.webhooks.port !== 0 &&
    config.webhooks.port === config.admin.port &&
    config.webhooks.host === config.admin.host;
  for (const l of LISTENERS) {
    const { host, port } = config[l.section];
    const at = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    if (port === 0) {
      checks.push({ name: l.name, status: 'ok', detail: `${l.what}: port 0, any free port at start` });
      continue;
    }
    if (same && l.section === 'admin') {
      checks.push({
        name: l.name,
        status: 'fail',
        detail: `${l.what}: ${at} is also webhooks.port: the two listeners need two ports; change admin.port`,
      });
      continue;
    }
    const err = await tryListen(host, port);
    if (err === null) {
      checks.push({ name: l.name, status: 'ok', detail: `${l.what}: ${at} is free` });
      continue;
    }
    const mine =
      (err as NodeJS.ErrnoException).code === 'EADDRINUSE' &&
      (await connectorAnswers(config.admin.host, config.admin.port));
    checks.push(
      mine
        ? {
            name: l.name,
            status: 'warn',
            detail:
              `${l.what}: ${at} is in use, apparently by a running connector (a connector's /healthz answers ` +
              `on admin.port); a second \`run\` here would fail: change ${l.name} for it`,
          }
        : {
            name: l.name,
            status: 'fail',
            detail: `${l.what}: ${listenErrorMessage(err, host, port, { host: l.host, port: l.name })}`,
          },
    );
  }
  return checks;
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

/** Every check, local and remote. Never throws for a failed check: each says what failed. */
export async function connectionChecks(
  config: Config,
  source: string,
  deps: ConnectionCheckDeps,
): Promise<ConnectionCheck[]> {
  const { checks, mapping } = localChecks(config, source);
  let db: StoreDb;
  const where = storeTargetName(config);
  try {
    db = await openStore(storeTarget(config), { onWarning: (m) => deps.logger.warn(m) });
  } catch (err) {
    checks.push({ name: 'store', status: 'fail', detail: `${where}: ${errorMessage(err)}` });
    checks.push({
      name: 'platform',
      status: 'skip',
      detail: 'the platform client keeps its rate budget in the state database, which did not open',
    });
    return checks;
  }
  try {
    checks.push(await storeCheck(db, where, config));
    checks.push(...(await clockCheck(db, config, deps.clock)));
    // A check is not worth a long wait: one retry, through the shared budget.
    const checkConfig: Config = {
      ...config,
      platform: { ...config.platform, maxRetries: Math.min(1, config.platform.maxRetries) },
    };
    const platform = platformClientFromConfig(checkConfig, { logger: deps.logger, db, clock: deps.clock });
    try {
      checks.push(...(await platformChecks(platform, config, deps)));
    } finally {
      await platform.close();
    }
    checks.push(...(await coreChecks(config, mapping, db, deps)));
  } finally {
    await db.close();
  }
  return checks;
}

export function formatCheck(c: ConnectionCheck): string {
  const tag = { ok: 'ok  ', fail: 'FAIL', warn: 'warn', skip: 'skip' }[c.status];
  return `${tag}  ${c.name.padEnd(18)} ${c.detail}`;
}

/**
 * The config as `config check` prints it: every secret hidden (lib/redact.ts isSecretPath: a key
 * added later is hidden too), the API key's prefix kept (live or test), URLs without credentials
 * or query strings.
 */
export function shownConfig(c: Config): unknown {
  const hidden = hideSecrets(c, (path, v) =>
    path === 'platform.apiKey' && typeof v === 'string' ? `${v.slice(0, 8)}…` : '(hidden)',
  ) as Config;
  return {
    ...hidden,
    platform: { ...hidden.platform, baseUrl: redactUrl(c.platform.baseUrl) },
    webhooks: {
      ...hidden.webhooks,
      ...(c.webhooks.publicUrl !== undefined ? { publicUrl: redactUrl(c.webhooks.publicUrl) } : {}),
    },
    core: hidden.core.http
      ? { ...hidden.core, http: { ...hidden.core.http, baseUrl: redactUrl(hidden.core.http.baseUrl) } }
      : hidden.core,
  };
}
