import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
    sandbox = await startSandbox({ port: 0, loans: 8, seed: 7, releaseRatio: 1, apiKeyPermissions: [...PERMISSIONS], logger: silentLogger() });
    tmp = mkdtempSync(join(tmpdir(), 'preview-'));
  });
  afterAll(async () => {
    await sandbox?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  async function preview(loanId: string, dir: string, extra = ''): Promise<{ out: string; error: unknown }> {
    const configPath = join(tmp, `config-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(
      configPath,
      `platform: { baseUrl: ${sandbox.baseUrl}, apiKey: ${sandbox.apiKey}, environment: development }\nstore: { path: ${join(tmp, 'state.sqlite')} }\nmappings: { dir: ${dir}${extra} }\nlog: { level: silent }\n`,
    );
    const stdout = new PassThrough();
    const chunks: Buffer[] = [];
    stdout.on('data', (c: Buffer) => chunks.push(c));
    const { program, ctx } = buildProgram(() =>
      createCliContext({ env: { BOARDING_CONFIG: configPath, LOG_LEVEL: 'silent' }, stdout, stderr: new PassThrough(), getConfigOption: () => undefined, shutdown: new AbortController().signal }),
    );
    program.exitOverride();
    let error: unknown;
    try {
      await program.parseAsync(['node', 'boarding-connector', 'mappings', 'preview', '--loan', loanId, '--json']);
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
    const page = (await (await fetch(`${sandbox.baseUrl}/public/v1/loans/boarding-queue?limit=8`, { headers: { Authorization: `Bearer ${sandbox.apiKey}` } })).json()) as { data: Array<{ id: string; type: string; paymentFrequency?: string }> };
    const loan = page.data.find((l) => l.type === 'business' && l.paymentFrequency === 'monthly') ?? page.data[0];
    expect(loan).toBeDefined();
    await fetch(`${sandbox.adminUrl}/counters/reset`, { method: 'POST' });

    const generic = await preview(loan!.id, join(repo, 'mappings/generic'));
    expect(generic.error).toBeUndefined();
    const g = JSON.parse(generic.out) as MappingOutcome;
    expect(g.mappingVersion).toMatch(/^1\.0\.0\+/);
    if (g.ok) {
      expect(g.records.find((r) => r.type === 'loan')?.externalId).toBe(loan!.id);
      expect(g.records.some((r) => r.type === 'customer')).toBe(true);
    } else {
      // the sandbox makes some loans awkward on purpose; the issues must say why
      expect(g.issues.length).toBeGreaterThan(0);
    }

    const fineract = await preview(loan!.id, join(repo, 'mappings/fineract'));
    expect(fineract.error).toBeUndefined();
    expect(JSON.parse(fineract.out)).toHaveProperty('mappingVersion');

    const counters = (await adminJson('/counters')) as { byBucket: { read: number; write: number } };
    expect(counters.byBucket.write).toBe(0);
    expect(counters.byBucket.read).toBe(6);
  });

  it('reports an unknown loan as an error (exit 1)', async () => {
    const r = await preview('ln_does_not_exist', join(repo, 'mappings/generic'));
    expect(r.error).toMatchObject({ exitCode: 1, message: expect.stringContaining('loan.not_found') });
  });
});
