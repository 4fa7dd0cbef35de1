/**
 * Issue 23 acceptance, runnable: the sandbox with mixed id shapes (short, UUID, opaque up to 64
 * characters with - _ . :), BENCH_LOANS loans (default 3,000), through
 *   1. the file core with the default generic set and its layout (LNLOAD.DAT fixed-width included),
 *   2. the fake Fineract with the fineract set, Fineract assigning accountNo (the default), and
 *   3. the fake Fineract with the account number from the connector's pool (sent as accountNo),
 *   4. the fake Mambu with the mambu set, loan ids the connector derives from the platform ids
 *      (identity.accountNumbers.source: core, the default), and
 *   5. the fake Mambu with the account number from the connector's pool as the loan's Mambu id.
 * Prints per run: boarded, quarantined by reason (and how many for an id's length: must be 0),
 * account numbers (unique, fitting the column, valid check digit), and the time taken.
 * Never fails on figures: it prints them.
 *
 *   npm run bench -- identity            (BENCH_LOANS=300 for a quick run)
 */
import { systemClock } from '../src/lib/clock.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRuntime } from '../src/app/runtime.js';
import { loadConfig } from '../src/config/load.js';
import { FileCore } from '../src/core/file/file-core.js';
import { hasValidCheckDigit } from '../src/lib/check-digit.js';
import { silentLogger } from '../src/lib/logger.js';
import { startSandbox } from '../src/sandbox/index.js';
import { startFakeFineract } from '../test/support/fake-fineract.js';
import { startFakeMambu } from '../test/support/fake-mambu.js';

const LOANS = Number(process.env['BENCH_LOANS'] ?? 3000);
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
/** Words of a refusal caused by an id's length or shape (a column, maxLength, externalId). */
const ID_LENGTH =
  /LOAN_ID|BORROWER_ID|ACCOUNT_NO|bytes in|externalId|maxLength|exceeds max length|longer than|INVALID_ID|not a Mambu id/i;

interface Run {
  name: string;
  released: number;
  boarded: number;
  quarantined: Record<string, number>;
  quarantinedForIdLength: number;
  accountNumbers: number;
  unique: number;
  checkDigitValid: number | null;
  fitColumn: number | null;
  seconds: number;
}

async function run(
  name: string,
  extra: Record<string, unknown>,
  mappings: string,
  verify: (dir: string, numbers: string[]) => { fitColumn: number | null; checkScheme: 'luhn' | null },
): Promise<Run> {
  const sandbox = await startSandbox({
    port: 0,
    loans: LOANS,
    releaseRatio: 1,
    seed: 23,
    idShapes: 'mixed',
    windowMs: 1000,
    readsPerWindow: BIG,
    writesPerWindow: BIG,
    legacyPerWindow: BIG,
  });
  const dir = mkdtempSync(join(tmpdir(), 'identity-bench-'));
  try {
    const res = await fetch(`${sandbox.adminUrl}/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ permissions: ALL }),
    });
    const { apiKey } = (await res.json()) as { apiKey: string };
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
        core: { adapter: 'file', file: { dir: join(dir, 'core') } },
        mappings: { dir: join(process.cwd(), mappings) },
        boarding: {
          concurrency: 8,
          maxAttempts: 3,
          retryBaseMs: 100,
          retryMaxMs: 200,
          documentHosts: { allow: ['127.0.0.1'] },
        },
        log: { level: 'silent' },
        ...extra,
      }),
    });
    const rt = await buildRuntime(config, silentLogger(), { clock: systemClock });
    const t0 = performance.now();
    await rt.runner.run({ reason: 'bench' });
    const seconds = (performance.now() - t0) / 1000;
    const rows = await rt.store.loans.list({});
    const quarantined: Record<string, number> = {};
    let forIdLength = 0;
    for (const r of rows.filter((x) => x.state === 'quarantined')) {
      const reason = r.quarantineReason ?? 'unknown';
      quarantined[reason] = (quarantined[reason] ?? 0) + 1;
      if (ID_LENGTH.test(r.lastErrorMessage ?? '')) forIdLength += 1;
    }
    const boardedRows = rows.filter((x) => x.state === 'acknowledged');
    const numbers = boardedRows.map((x) => x.accountNumber).filter((n): n is string => n !== null);
    if (rt.core instanceof FileCore && rt.core.batches) await rt.core.batches.sealNow('bench', 'bench');
    await rt.close();
    const v = verify(dir, numbers);
    return {
      name,
      released: rows.length,
      boarded: boardedRows.length,
      quarantined,
      quarantinedForIdLength: forIdLength,
      accountNumbers: numbers.length,
      unique: new Set(numbers).size,
      checkDigitValid: v.checkScheme ? numbers.filter((n) => hasValidCheckDigit('luhn', n)).length : null,
      fitColumn: v.fitColumn,
      seconds: Math.round(seconds * 10) / 10,
    };
  } finally {
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function print(r: Run): void {
  process.stdout.write(
    `${r.name}\n  loans ${r.released}, boarded ${r.boarded}, quarantined ${JSON.stringify(r.quarantined)} (for an id's length: ${r.quarantinedForIdLength})\n` +
      `  account numbers ${r.accountNumbers}, unique ${r.unique}, fit their column ${r.fitColumn ?? 'n/a'}, check digit valid ${r.checkDigitValid ?? 'n/a (the core assigns them)'}; ${r.seconds} s\n`,
  );
}

async function main(): Promise<void> {
  // Each run prints as it finishes.
  const results = { push: print };
  results.push(
    await run(
      'file core, generic set (LNLOAD.DAT ACCOUNT_NO 20 bytes)',
      {},
      'mappings/generic',
      (dir, numbers) => {
        const batches = join(dir, 'core', 'batches');
        let fit = 0;
        const held = new Set(numbers);
        for (const b of readdirSync(batches)) {
          const lines = readFileSync(join(batches, b, 'LNLOAD.DAT'))
            .toString('latin1')
            .split('\r\n')
            .filter((l) => l.startsWith('A') || l.startsWith('C'));
          for (const l of lines) if (l.length === 120 && held.has(l.slice(1, 21).trim())) fit += 1;
        }
        return { fitColumn: fit, checkScheme: 'luhn' };
      },
    ),
  );
  for (const [name, identity, scheme] of [
    ['Fineract fake, accountNo assigned by Fineract (default)', {}, null],
    ['Fineract fake, accountNo from the pool', { accountNumbers: { source: 'pool' } }, 'luhn'],
  ] as const) {
    const fake = await startFakeFineract();
    try {
      results.push(
        await run(
          name,
          {
            core: {
              adapter: 'http',
              http: {
                baseUrl: fake.url,
                username: fake.username,
                password: fake.password,
                tenantId: fake.tenantId,
                timeoutMs: 10_000,
              },
            },
            identity,
          },
          'mappings/fineract',
          (_dir, numbers) => ({
            // Fineract's accountNo column is VARCHAR(20).
            fitColumn: ((inCore) => numbers.filter((n) => n.length <= 20 && inCore.has(n)).length)(
              new Set(fake.loans.map((l) => l.accountNo)),
            ),
            checkScheme: scheme,
          }),
        ),
      );
    } finally {
      await fake.close();
    }
  }
  for (const [name, identity, scheme] of [
    ['Mambu fake, loan ids derived from the platform ids (default)', {}, null],
    ['Mambu fake, loan id = account number from the pool', { accountNumbers: { source: 'pool' } }, 'luhn'],
  ] as const) {
    const fake = await startFakeMambu();
    try {
      const mambu = {
        baseUrl: fake.url,
        auth: { username: 'approver', password: 'approver-pass' },
        disburseAuth: { username: 'disburser', password: 'disburser-pass' },
        approve: true,
        disburse: true,
        timeoutMs: 10_000,
      };
      results.push(
        await run(
          name,
          {
            core: { adapter: 'mambu', mambu },
            identity,
            customers: { tinHashKey: 'bench-identity-key-0123' },
          },
          'mappings/mambu',
          (_dir, numbers) => ({
            // Mambu ids: letters and digits, at most 32 (the fake refuses others: INVALID_ID).
            fitColumn: ((inCore) =>
              numbers.filter((n) => /^[A-Za-z0-9]{1,32}$/.test(n) && inCore.has(n)).length)(
              new Set(fake.loans.map((l) => l.id)),
            ),
            checkScheme: scheme,
          }),
        ),
      );
      process.stdout.write(
        `  Mambu refused ${fake.refused().length} request(s); loans ${fake.loans.length}, disbursements ${fake.transactions.length}\n`,
      );
    } finally {
      await fake.close();
    }
  }
}

await main();
