/**
 * Issue 23 acceptance for customer match, runnable: BENCH_LOANS sandbox loans (default 3,000) with
 * 40 % repeat borrowers (half under a new entity id), mixed id shapes, through
 *   1. the file core with the generic set and a bank customer extract holding 30 % of the borrowers,
 *   2. the fake Fineract (fineract set), with some borrowers already clients (a teller's),
 *   3. the fake Mambu (mambu set), with some business borrowers already groups (a teller's).
 * Prints per run: loans boarded / quarantined, distinct tax ids on boarded loans, and how many new
 * customer records (file core: customer records across packages; Fineract: clients created) each
 * tax id got — exactly 1, or 0 where the extract / Fineract already had it — with the violations
 * counted, and Fineract's refused writes. Never fails on figures: it prints them.
 *
 *   npm run bench -- repeat          (BENCH_LOANS=300 for a quick run)
 */
import { systemClock } from '../src/lib/clock.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRuntime } from '../src/app/runtime.js';
import { loadConfig } from '../src/config/load.js';
import { normaliseTin } from '../src/lib/customer-keys.js';
import { silentLogger } from '../src/lib/logger.js';
import { startSandbox } from '../src/sandbox/index.js';
import { SandboxState } from '../src/sandbox/state.js';
import { startFakeFineract, type FakeFineract } from '../test/support/fake-fineract.js';
import { startFakeMambu, type FakeMambu } from '../test/support/fake-mambu.js';

const LOANS = Number(process.env['BENCH_LOANS'] ?? 3000);
const SEED = 29;
const SHARE = 0.4;
const BIG = 1_000_000;
const ALL = [
  'read:loans',
  'read:boarding',
  'write:boarding',
  'read:businesses',
  'read:people',
  'read:documents',
  'read:products',
  'read:businesses:ein',
  'read:people:ssn',
];

/** The sandbox's data for these options, rebuilt (the generator is deterministic per seed). */
function data(): SandboxState {
  const s = new SandboxState(SEED, () => Date.UTC(2025, 5, 1), 'mixed', SHARE);
  s.generate(LOANS, { releaseRatio: 1 });
  return s;
}

function tinsOf(state: SandboxState, loanIds: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const id of loanIds) {
    const loan = state.loans.get(id);
    if (!loan) continue;
    for (const b of loan.businesses) if (b.ein) out.add(b.ein);
    for (const p of loan.people) out.add(p.ssn);
  }
  return out;
}

async function run(
  name: string,
  opts: { fineract?: FakeFineract; mambu?: FakeMambu; extract?: boolean },
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'repeat-bench-'));
  const extractPath = join(dir, 'customers.csv');
  const sandbox = await startSandbox({
    port: 0,
    loans: LOANS,
    releaseRatio: 1,
    seed: SEED,
    idShapes: 'mixed',
    repeatBorrowers: SHARE,
    ...(opts.extract ? { customerExtract: { path: extractPath, existingShare: 0.3 } } : {}),
    windowMs: 1000,
    readsPerWindow: BIG,
    writesPerWindow: BIG,
    legacyPerWindow: BIG,
  });
  try {
    const state = data();
    const res = await fetch(`${sandbox.adminUrl}/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ permissions: ALL }),
    });
    const { apiKey } = (await res.json()) as { apiKey: string };
    const fake = opts.fineract;
    const mambu = opts.mambu;
    // A teller's clients: every 10th business borrower is already in the core with its EIN.
    const banked = new Set<string>();
    if (fake || mambu) {
      [...state.loans.values()].forEach((l, i) => {
        const b = l.businesses[0];
        if (i % 10 === 0 && b?.ein && !banked.has(b.ein)) {
          banked.add(b.ein);
          if (fake)
            fake.seedClient({
              fullname: b.name.toUpperCase(),
              identifiers: [{ documentTypeId: 2, documentKey: b.ein }],
            });
          else mambu?.seedGroup({ groupName: b.name.toUpperCase(), taxId: b.ein });
        }
      });
    }
    const mambuCore = mambu
      ? {
          adapter: 'mambu',
          mambu: {
            baseUrl: mambu.url,
            auth: { username: 'approver', password: 'approver-pass' },
            disburseAuth: { username: 'disburser', password: 'disburser-pass' },
            approve: true,
            disburse: true,
            timeoutMs: 10_000,
          },
        }
      : undefined;
    const config = loadConfig({
      env: {},
      fileText: JSON.stringify({
        platform: {
          baseUrl: sandbox.baseUrl,
          apiKey,
          environment: 'staging',
          rateLimit: { windowMs: 1000, readsPerWindow: BIG, writesPerWindow: BIG },
        },
        store: { path: join(dir, 'state.sqlite') },
        core:
          mambuCore ??
          (fake
            ? {
                adapter: 'http',
                http: {
                  baseUrl: fake.url,
                  username: fake.username,
                  password: fake.password,
                  tenantId: fake.tenantId,
                  timeoutMs: 10_000,
                },
              }
            : { adapter: 'file', file: { dir: join(dir, 'core') } }),
        mappings: {
          dir: join(
            process.cwd(),
            mambu ? 'mappings/mambu' : fake ? 'mappings/fineract' : 'mappings/generic',
          ),
        },
        customers: {
          tinHashKey: 'bench-repeat-borrowers-key',
          ...(opts.extract ? { extract: { path: extractPath } } : {}),
        },
        boarding: {
          concurrency: 8,
          maxAttempts: 3,
          retryBaseMs: 100,
          retryMaxMs: 200,
          documentHosts: { allow: ['127.0.0.1'] },
        },
        log: { level: 'silent' },
      }),
    });
    const rt = await buildRuntime(config, silentLogger(), { clock: systemClock });
    const t0 = performance.now();
    await rt.runner.run({ reason: 'bench' });
    const seconds = (performance.now() - t0) / 1000;
    const rows = await rt.store.loans.list({});
    const boarded = rows.filter((r) => r.state === 'acknowledged').map((r) => r.id);
    const quarantined: Record<string, number> = {};
    for (const r of rows.filter((x) => x.state === 'quarantined'))
      quarantined[r.quarantineReason ?? '?'] = (quarantined[r.quarantineReason ?? '?'] ?? 0) + 1;
    await rt.close();

    const tins = tinsOf(state, boarded);
    const existing = new Set<string>(banked);
    if (opts.extract)
      for (const line of readFileSync(extractPath, 'utf8').trim().split('\n').slice(1))
        existing.add(normaliseTin(line.split(',')[1]) ?? '');
    const records = new Map<string, number>();
    if (mambu) {
      // New clients and groups (not the teller's), by the tax id in their custom field.
      for (const c of [...mambu.clients, ...mambu.groups]) {
        if (c.createdBy === 'teller') continue;
        const set = (c.body['_taxInformation_Clients'] ?? c.body['_taxInformation_Groups']) as
          { taxId?: string } | undefined;
        const k = normaliseTin(set?.taxId) ?? '(no tax id)';
        records.set(k, (records.get(k) ?? 0) + 1);
      }
    } else if (fake) {
      for (const c of fake.clients) {
        if (c.externalId === null) continue; // the teller's
        const keys = fake.identifiers.filter((i) => i.clientId === c.id).map((i) => i.documentKey);
        for (const k of keys.length > 0 ? keys : ['(no identifier)'])
          records.set(k, (records.get(k) ?? 0) + 1);
      }
    } else {
      const pk = join(dir, 'core', 'packages');
      for (const d of readdirSync(pk)) {
        const j = JSON.parse(readFileSync(join(pk, d, 'records.json'), 'utf8')) as {
          records: Array<{ type: string; fields: Record<string, unknown> }>;
        };
        for (const r of j.records.filter((x) => x.type === 'customer'))
          records.set(String(r.fields['taxId']), (records.get(String(r.fields['taxId'])) ?? 0) + 1);
      }
    }
    let exact = 0;
    let zeroExisting = 0;
    let violations = 0;
    for (const t of tins) {
      const n = records.get(t) ?? 0;
      if (existing.has(t)) {
        if (n === 0) zeroExisting += 1;
        else violations += 1;
      } else if (n === 1) exact += 1;
      else violations += 1;
    }
    const stray = [...records.keys()].filter((k) => !tins.has(k)).length;
    // Loans with a party whose tax id is on an earlier loan (the sandbox's repeat borrowers).
    const seen = new Set<string>();
    let repeated = 0;
    for (const id of boarded) {
      const t = tinsOf(state, [id]);
      if ([...t].some((x) => seen.has(x))) repeated += 1;
      for (const x of t) seen.add(x);
    }
    const refused = mambu
      ? mambu.refused().length
      : fake
        ? fake.writes().filter((w) => w.status >= 400).length
        : 0;
    process.stdout.write(
      `${name}\n  loans ${rows.length}, boarded ${boarded.length}, quarantined ${JSON.stringify(quarantined)}; ${seconds.toFixed(1)} s\n` +
        `  distinct tax ids on boarded loans ${tins.size} (${repeated} boarded loans repeat an earlier loan's tax id): ` +
        `exactly 1 new customer record ${exact}, 0 (already the bank's) ${zeroExisting}, VIOLATIONS ${violations}, records for no boarded tax id ${stray}` +
        (mambu
          ? `; Mambu refused requests ${refused}; loans ${mambu.loans.length}, disbursements ${mambu.transactions.length}`
          : fake
            ? `; Fineract refused writes ${refused}`
            : '') +
        '\n',
    );
  } finally {
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await run('file core, generic set, bank extract with 30% of borrowers', { extract: true });
const fake = await startFakeFineract();
try {
  await run('Fineract fake, fineract set, every 10th business borrower already a client', { fineract: fake });
} finally {
  await fake.close();
}
const mambuFake = await startFakeMambu();
try {
  await run('Mambu fake, mambu set, every 10th business borrower already a group', { mambu: mambuFake });
} finally {
  await mambuFake.close();
}
