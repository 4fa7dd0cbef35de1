import { existsSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Config } from '../config/schema.js';
import { configNotes } from '../config/load.js';
import type { CoreSystem } from '../core/port.js';
import { adminHostWarning } from '../http/allowed-hosts.js';
import { listenErrorMessage } from '../http/server.js';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { hideSecrets, redactUrl } from '../lib/redact.js';
import type { CompiledMapping } from '../mapping/compile.js';
import type { MapperOptions } from '../mapping/compile.js';
import { formatProblem, lintMappingDir } from '../mapping-sets/loader.js';
import { describeOffset, measureClockOffset } from '../observability/clock-skew.js';
import type { PlatformClient } from '../platform/client.js';
import { describeStoreTls } from '../store/open.js';
import type { StoreDb } from '../store/sql.js';
import type { ConnectionCheck } from './check-result.js';
import { coreChecks } from './connection-check-core.js';
import { platformChecks } from './connection-check-platform.js';

/**
 * `config check [--connect]`: the checks, as plain data (src/cli/config.ts renders one line each, the
 * way dbt debug or a "check connection" does it). Without --connect only local checks run (config,
 * mapping dir, lint, listener ports). With it: the state database takes a write, its clock, the
 * platform (connection-check-platform.ts), the core (connection-check-core.ts). A check never writes.
 */
export interface ConnectionCheckDeps {
  logger: Logger;
  clock: Clock;
  signal?: AbortSignal;
  /** How the set is linted (bank time zone, defaults): src/app/runtime.ts mapperOptionsFromConfig. */
  mapperOptions: MapperOptions;
  /** Where the state database is, for the lines (store.path, or the PostgreSQL URL without secrets). */
  storeName: string;
  /** Opens the state database (the one a daemon shares: the platform client keeps its budget there). */
  openStateDb: () => Promise<StoreDb>;
  /** The platform client on that database; a check is not worth a long wait: at most one retry. */
  platform: (db: StoreDb) => PlatformClient;
  /** The configured core on that database (closed by the check). */
  core: (db: StoreDb) => CoreSystem;
}

export function localChecks(
  config: Config,
  source: string,
  mapperOptions: MapperOptions,
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
    const r = lintMappingDir(dir, mapperOptions);
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

/** Every check, local and remote. Never throws for a failed check: each says what failed. */
export async function connectionChecks(
  config: Config,
  source: string,
  deps: ConnectionCheckDeps,
): Promise<ConnectionCheck[]> {
  const { checks, mapping } = localChecks(config, source, deps.mapperOptions);
  let db: StoreDb;
  const where = deps.storeName;
  try {
    db = await deps.openStateDb();
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
    const platform = deps.platform(db);
    try {
      checks.push(...(await platformChecks(platform, config, deps)));
    } finally {
      await platform.close();
    }
    checks.push(...(await remoteCoreChecks(config, mapping, db, deps)));
  } finally {
    await db.close();
  }
  return checks;
}

function remoteCoreChecks(
  config: Config,
  mapping: CompiledMapping | undefined,
  db: StoreDb,
  deps: ConnectionCheckDeps,
): Promise<ConnectionCheck[]> {
  return coreChecks(config, mapping, () => deps.core(db), deps.signal);
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
