import { FakeClock } from '../../support/fake-clock.js';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliContext } from '../../../src/cli/context.js';
import { hasValidCheckDigit } from '../../../src/lib/check-digit.js';
import { buildProgram } from '../../../src/cli/program.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

/**
 * End to end: the sandbox, `sync --once` with the shipped generic set (its layout.yaml) into the
 * file core, then the ops commands: the loans sit in the open batch (no files yet), `batches seal`
 * writes the declared files, control.csv and the trigger file, and ties to the platform's amounts.
 */
describe('batches CLI over a sync', () => {
  let p: TestPlatform;
  let released: Array<{ id: string }>;

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 12,
      releaseRatio: 1,
      seed: 5,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 100,
    });
    released = ((await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> }).data;
  });
  afterAll(async () => {
    await p.close();
  });

  it('boards into the open batch, seals it on demand (audited) and writes the declared layout', async () => {
    const cfg = writeConnectorConfig(p, { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 100 });
    const cli = (...args: string[]) => runCli(['--config', cfg.configPath, ...args]);
    const sync = await cli('sync', '--once', '--json');
    expect(sync.code, sync.error ?? '').toBe(0);
    const boarded = JSON.parse(sync.stdout).states.acknowledged as number;
    expect(boarded).toBe(released.length);

    const list = JSON.parse((await cli('batches', 'list', '--json')).stdout) as Array<
      Record<string, unknown>
    >;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ status: 'open', loans: boarded, corrections: 0, triggerFile: false });
    const id = list[0]!.id as string;
    const openPrincipal = list[0]!.principalCents as string;
    expect(readdirSync(cfg.coreDir)).not.toContain('batches');

    const seal = await cli('batches', 'seal', '--reason', 'core job runs early', '--by', 'alice');
    expect(seal.code, seal.error ?? '').toBe(0);
    expect(seal.stdout).toContain(`sealed ${id}`);
    const again = await cli('batches', 'seal', '--reason', 'twice', '--by', 'bob');
    expect(again.code).toBe(1);

    const show = JSON.parse((await cli('batches', 'show', id, '--json')).stdout) as Record<string, unknown>;
    expect(show).toMatchObject({
      status: 'sealed',
      sealReason: 'ops: core job runs early',
      sealedBy: 'alice',
      loans: boarded,
      triggerFile: true,
    });
    // When it stopped taking boards and when its files were complete (file_batches.sealing_at, sealed_at).
    expect(typeof show['frozenAt']).toBe('string');
    expect(Date.parse(show['frozenAt'] as string)).toBeLessThanOrEqual(
      Date.parse(show['sealedAt'] as string),
    );
    const dir = join(cfg.coreDir, 'batches', id);
    expect(readdirSync(dir).sort()).toEqual([
      'LNLOAD.DAT',
      'READY',
      'control.csv',
      'crossref.csv',
      'customer.csv',
      'document.csv',
      'loan.csv',
      'relationship.csv',
    ]);

    const loanCsv = readFileSync(join(dir, 'loan.csv'), 'utf8').trim().split('\n');
    expect(loanCsv[0]!.split(',').slice(0, 4)).toEqual([
      'action',
      'loan_id',
      'account_number',
      'loan_number',
    ]);
    expect(
      loanCsv
        .slice(1)
        .map((l) => l.split(',')[1])
        .sort(),
    ).toEqual(released.map((l) => l.id).sort());
    // Each loan has the bank's own account number: unique, 10 digits with a Luhn check digit.
    const accounts = loanCsv.slice(1).map((l) => l.split(',')[2] ?? '');
    expect(new Set(accounts).size).toBe(accounts.length);
    for (const a of accounts) expect(hasValidCheckDigit('luhn', a) && a.length === 10, a).toBe(true);
    // The platform's amounts as the connector recorded them when it fetched each loan.
    const db = openDatabase(cfg.dbPath, { readonly: true });
    const cents = BigInt(
      (
        db.prepare(`SELECT SUM(cents_amount) AS s FROM loans WHERE state = 'acknowledged'`).get() as {
          s: number;
        }
      ).s,
    );
    db.close();
    expect(cents).toBeGreaterThan(0n);
    const control = readFileSync(join(dir, 'control.csv'), 'utf8').trim().split('\n');
    expect(control.at(-1)).toBe(`${id},*,principal_total_cents,${cents},,,`);
    // What the open batch showed before the seal is what the seal fixed.
    expect(openPrincipal).toBe(cents.toString());
    const dat = readFileSync(join(dir, 'LNLOAD.DAT'))
      .toString('latin1')
      .split('\r\n')
      .filter((l) => l !== '');
    expect(dat).toHaveLength(boarded + 2);
    for (const rec of dat) expect(rec.length).toBe(120);
    // LNLOAD.DAT keys on ACCOUNT_NO (bytes 2–21), the same numbers as loan.csv.
    expect(
      dat
        .slice(1, -1)
        .map((r) => r.slice(1, 21).trim())
        .sort(),
    ).toEqual([...accounts].sort());
    const trailer = dat.at(-1)!;
    expect(trailer.slice(0, 1)).toBe('T');
    expect(Number(trailer.slice(1, 10))).toBe(boarded);
    expect(BigInt(trailer.slice(19, 39))).toBe(cents);
  });

  it('sync --once without a daemon seals a batch whose cut-off has passed, even with nothing to board', async () => {
    const own = await startTestPlatform({
      loans: 3,
      releaseRatio: 1,
      seed: 9,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 100,
    });
    const cfg = writeConnectorConfig(own, { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 100 });
    const first = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(first.code, first.error ?? '').toBe(0);
    const db = openDatabase(cfg.dbPath, { readonly: true });
    const status = () => db.prepare('SELECT id, status FROM file_batches').all();
    try {
      expect(status()).toEqual([expect.objectContaining({ status: 'open' })]);
      // The next day, from cron: every loan is acknowledged already, the batch is past its 18:00 cut-off.
      const later = Date.now() + 25 * 3600_000;
      const sink = new Writable({ write: (_c, _e, cb) => cb() });
      const { program, ctx } = buildProgram((prog) =>
        createCliContext({
          env: {},
          stdout: sink,
          stderr: sink,
          getConfigOption: () => prog.opts<{ config?: string }>().config,
          shutdown: new AbortController().signal,
          clock: new FakeClock({ start: later, sleep: 'auto' }),
        }),
      );
      try {
        await program.parseAsync([
          'node',
          'boarding-connector',
          '--config',
          cfg.configPath,
          'sync',
          '--once',
        ]);
      } finally {
        await ctx.close();
      }
      expect(status()).toEqual([expect.objectContaining({ status: 'sealed' })]);
    } finally {
      db.close();
      await own.close();
    }
  });
});
