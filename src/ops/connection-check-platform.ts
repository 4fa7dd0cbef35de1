import { Writable } from 'node:stream';
import type { Config } from '../config/schema.js';
import type { Entities, QueueItem } from '../contract/schemas.js';
import { createDocumentFetcher } from '../core/documents.js';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { redactUrl } from '../lib/redact.js';
import { commandHint } from '../lib/shell.js';
import { dispositionOf } from '../pipeline/failures.js';
import type { PlatformClient } from '../platform/client.js';
import { checkEndpoints } from '../platform/endpoint/endpoint-check.js';
import { isPlatformError } from '../platform/errors.js';
import type { CheckStatus, ConnectionCheck } from './check-result.js';

/**
 * `config check --connect`, the platform's part: the platform answers, the key is accepted, what its
 * tax-id permissions mean for boarding, one document download, the webhook endpoint. Cheap on the
 * rate budget and through it: at most one queue page of 5, three entity reads, two document lists and
 * one download address (then one download, which spends no API budget), and one webhook-endpoint list.
 */
export interface PlatformCheckDeps {
  logger: Logger;
  clock: Clock;
  signal?: AbortSignal;
}

/** Entity reads spent looking for a business and a person whose tax ids show the key's permissions. */
const MAX_ENTITY_READS = 3;
/** Document lists read looking for a loan with a document to fetch (then one download-address read). */
const MAX_DOCUMENT_LISTS = 2;
const QUEUE_SAMPLE = 5;

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

export async function platformChecks(
  platform: PlatformClient,
  config: Config,
  deps: PlatformCheckDeps,
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
  deps: PlatformCheckDeps,
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
  deps: PlatformCheckDeps,
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
