import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappingOutcome } from '../../../src/mapping/types.js';
import { PERMISSIONS, startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';

const repo = join(import.meta.dirname, '../../..');

/** `mappings preview` against a real sandbox on port 0: reads only, prints the outcome. */
describe('mappings preview', () => {
  let sandbox: RunningSandbox;
  let tmp: string;
  beforeAll(async () => {
    sandbox = await startSandbox({
      amounts: 'extreme',
      port: 0,
      loans: 8,
      seed: 7,
      releaseRatio: 1,
      apiKeyPermissions: [...PERMISSIONS],
      logger: silentLogger(),
    });
    tmp = mkdtempSync(join(tmpdir(), 'preview-'));
  });
  afterAll(async () => {
    await sandbox?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  async function preview(
    loanId: string,
    dir: string,
    extra = '',
    args: string[] = [],
  ): Promise<{ out: string; error: unknown }> {
    const configPath = join(tmp, `config-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(
      configPath,
      `platform: { baseUrl: ${sandbox.baseUrl}, apiKey: ${sandbox.apiKey}, environment: development }\nstore: { path: ${join(tmp, 'state.sqlite')} }\nmappings: { dir: ${dir}${extra} }\nlog: { level: silent }\n`,
    );
    const stdout = new PassThrough();
    const chunks: Buffer[] = [];
    stdout.on('data', (c: Buffer) => chunks.push(c));
    const { program, ctx } = buildProgram(() =>
      createCliContext({
        clock: systemClock,
        env: { BOARDING_CONFIG: configPath, LOG_LEVEL: 'silent' },
        stdout,
        stderr: new PassThrough(),
        getConfigOption: () => undefined,
        shutdown: new AbortController().signal,
      }),
    );
    program.exitOverride();
    let error: unknown;
    try {
      await program.parseAsync([
        'node',
        'boarding-connector',
        'mappings',
        'preview',
        '--loan',
        loanId,
        '--json',
        ...args,
      ]);
    } catch (err) {
      error = err;
    } finally {
      await ctx.close();
    }
    return { out: Buffer.concat(chunks).toString('utf8'), error };
  }

  async function adminJson(path: string): Promise<unknown> {
    const res = await fetch(`${sandbox.adminUrl}${path}`);
    return res.json();
  }

  it('maps a live loan with both sets and writes nothing', async () => {
    const page = (await (
      await fetch(`${sandbox.baseUrl}/public/v1/loans/boarding-queue?limit=8`, {
        headers: { Authorization: `Bearer ${sandbox.apiKey}` },
      })
    ).json()) as { data: Array<{ id: string; type: string; paymentFrequency?: string }> };
    const loan =
      page.data.find((l) => l.type === 'business' && l.paymentFrequency === 'monthly') ?? page.data[0];
    expect(loan).toBeDefined();
    await fetch(`${sandbox.adminUrl}/counters/reset`, { method: 'POST' });

    const generic = await preview(loan!.id, join(repo, 'mappings/generic'));
    const g = (JSON.parse(generic.out) as { outcome: MappingOutcome }).outcome;
    expect(g.mappingVersion).toMatch(/^1\.0\.0\+/);
    // Exit 1 exactly when the loan would be quarantined.
    expect(generic.error === undefined).toBe(g.ok);
    // Unknown to the connector: the live queue item (with its boarding object), tax ids masked.
    const view = JSON.parse(generic.out) as {
      source: string;
      input: { loan: { boarding: unknown }; entities: { businesses: Array<Record<string, unknown>> } };
    };
    expect(view.source).toBe('queue');
    expect(view.input.loan.boarding).not.toBeNull();
    for (const b of view.input.entities.businesses) if ('ein' in b) expect(b['ein']).toBe('[redacted]');
    if (g.ok) {
      expect(g.records.find((r) => r.type === 'loan')?.externalId).toBe(loan!.id);
      expect(g.records.some((r) => r.type === 'customer')).toBe(true);
    } else {
      // the sandbox makes some loans awkward on purpose; the issues must say why
      expect(g.issues.length).toBeGreaterThan(0);
    }

    const fineract = await preview(loan!.id, join(repo, 'mappings/fineract'));
    expect(JSON.parse(fineract.out)).toHaveProperty('outcome.mappingVersion');

    const counters = (await adminJson('/counters')) as { byBucket: { read: number; write: number } };
    expect(counters.byBucket.write).toBe(0);
    expect(counters.byBucket.read).toBe(6);
  });

  it('--save-fixture writes a fixture that mappings test passes, without real tax ids', async () => {
    const set = join(tmp, 'saved-set');
    cpSync(join(repo, 'mappings/generic'), set, { recursive: true });
    const page = (await (
      await fetch(`${sandbox.baseUrl}/public/v1/loans/boarding-queue?limit=8`, {
        headers: { Authorization: `Bearer ${sandbox.apiKey}` },
      })
    ).json()) as { data: Array<{ id: string }> };
    const id = page.data[1]!.id;
    await preview(id, set, '', ['--save-fixture', 'from-live']);
    const input = readFileSync(join(set, 'fixtures/from-live/input.json'), 'utf8');
    expect(input).toContain(id);
    for (const m of input.matchAll(/"(ein|ssn)": "(\d+)"/g)) expect(m[2]).toMatch(/^00000\d{4}$/);
    const configPath = join(tmp, 'config-test.yaml');
    writeFileSync(
      configPath,
      `platform: { baseUrl: ${sandbox.baseUrl}, apiKey: ${sandbox.apiKey}, environment: development }\nstore: { path: ${join(tmp, 'state.sqlite')} }\nlog: { level: silent }\n`,
    );
    const { program, ctx } = buildProgram(() =>
      createCliContext({
        clock: systemClock,
        env: {},
        stdout: new PassThrough(),
        stderr: new PassThrough(),
        getConfigOption: () => configPath,
        shutdown: new AbortController().signal,
      }),
    );
    program.exitOverride();
    await expect(
      program.parseAsync([
        'node',
        'boarding-connector',
        'mappings',
        'test',
        '--dir',
        set,
        '--case',
        'from-live',
      ]),
    ).resolves.toBeDefined();
    await ctx.close();
    // The same name twice is refused rather than overwriting a reviewed fixture.
    const again = await preview(id, set, '', ['--save-fixture', 'from-live']);
    expect(again.error).toMatchObject({ exitCode: 2 });
  });

  it('reports an unknown loan as an error (exit 1)', async () => {
    const r = await preview('ln_does_not_exist', join(repo, 'mappings/generic'));
    expect(r.error).toMatchObject({ exitCode: 1, message: expect.stringContaining('loan.not_found') });
  });
});
