import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { buildRuntime } from '../../../src/app/runtime.js';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { loadConfig } from '../../../src/config/load.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';
import { FakeMapper } from '../../support/fake-mapper.js';
import { ackKey } from '../../../src/pipeline/release.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function configYaml(sb: RunningSandbox, dir: string): string {
  return [
    'platform:',
    `  baseUrl: ${sb.baseUrl}`,
    `  apiKey: ${sb.apiKey}`,
    '  environment: development',
    '  rateLimit: { readsPerWindow: 10000, writesPerWindow: 10000, windowMs: 60000 }',
    `store: { path: ${join(dir, 'state.sqlite')} }`,
    `core: { adapter: file, file: { dir: ${join(dir, 'core')} } }`,
    'bank: { timeZone: America/Chicago }',
    `reports: { dir: ${join(dir, 'reports')} }`,
    'boarding: { retryBaseMs: 1, retryMaxMs: 10 }',
    '',
  ].join('\n');
}

async function cli(configPath: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on('data', (c: Buffer) => out.push(c));
  stderr.on('data', (c: Buffer) => err.push(c));
  const { program, ctx } = buildProgram(() =>
    createCliContext({
      clock: systemClock,
      env: { BOARDING_CONFIG: configPath, LOG_LEVEL: 'silent' },
      stdout,
      stderr,
      getConfigOption: () => undefined,
      shutdown: new AbortController().signal,
    }),
  );
  program.exitOverride();
  try {
    await program.parseAsync(['node', 'boarding-connector', ...args]);
  } finally {
    await ctx.close();
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

async function setup(
  mapper: FakeMapper = new FakeMapper(),
): Promise<{ sb: RunningSandbox; dir: string; configPath: string; boardedIds: string[] }> {
  const sb = await startSandbox({
    amounts: 'extreme',
    loans: 8,
    releaseRatio: 1,
    readsPerWindow: 10_000,
    writesPerWindow: 10_000,
  });
  cleanups.push(() => sb.close());
  const dir = mkdtempSync(join(tmpdir(), 'reconcile-it-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, configYaml(sb, dir));
  const config = loadConfig({ env: {}, fileText: configYaml(sb, dir) });
  // Board every released loan with the real file core (the core record carries the source values).
  const rt = await buildRuntime(config, silentLogger(), { clock: systemClock, mapper });
  try {
    const summary = await rt.runner.run({
      reason: 'test',
      stop: new AbortController().signal,
      abort: new AbortController().signal,
      settleMs: 0,
    });
    expect(summary.acknowledged).toBeGreaterThan(0);
  } finally {
    await rt.close();
  }
  const boarded = (await (await fetch(`${sb.adminUrl}/loans?boarded=true`)).json()) as {
    data: Array<{ id: string }>;
  };
  return { sb, dir, configPath, boardedIds: boarded.data.map((l) => l.id) };
}

describe('reconcile against the sandbox, the state database and the file core', () => {
  it('ties when everything boarded cleanly, and writes the three files plus latest', async () => {
    const { dir, configPath, boardedIds } = await setup();
    const { stdout } = await cli(configPath, ['reconcile', '--json']);
    const r = JSON.parse(stdout);
    expect(r.ties).toBe(true);
    expect(r.exceptionCount).toBe(0);
    expect(r.totals.acknowledgedOnPlatform.count).toBe(boardedIds.length);
    expect(r.totals.writtenToCore.count).toBe(boardedIds.length);
    expect(r.totals.acknowledged.count).toBe(boardedIds.length);

    const latest = join(dir, 'reports', 'latest');
    expect(lstatSync(latest).isSymbolicLink()).toBe(true);
    const json = JSON.parse(readFileSync(join(latest, 'report.json'), 'utf8'));
    expect(json.schema).toBe('boarding-connector/reconciliation-report@1');
    expect(json.header).toMatchObject({
      timeZone: 'America/Chicago',
      environment: 'development',
      coreAdapter: expect.any(String),
    });
    expect(json.header.mappingVersions).toEqual([{ version: 'v1', loans: boardedIds.length }]);
    expect(json.exceptions).toEqual([]);
    expect(json.signOff).toMatchObject({ preparedBy: null, reviewedBy: null });
    const csv = readFileSync(join(latest, 'report.csv'), 'utf8');
    expect(csv.split('\r\n').filter(Boolean)).toHaveLength(1); // header only
    const html = readFileSync(join(latest, 'report.html'), 'utf8');
    expect(html).toContain('Control totals tie');
    expect(html).not.toMatch(/<(script|link)\b|src=|href="http/i); // self-contained
    // No temporary files left behind; one folder per run: <date>/run-<HHMMSS>/.
    const dated = readdirSync(join(dir, 'reports')).filter((n) => n !== 'latest');
    expect(dated).toHaveLength(1);
    const runs = readdirSync(join(dir, 'reports', dated[0]!));
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatch(/^run-\d{6}$/);
    expect(readdirSync(join(dir, 'reports', dated[0]!, runs[0]!)).sort()).toEqual([
      'report.csv',
      'report.html',
      'report.json',
    ]);
  });

  it('keeps both reports of two runs on one day (regression: the second silently replaced a report that may be signed)', async () => {
    const { dir, configPath } = await setup();
    const first = JSON.parse((await cli(configPath, ['reconcile', '--json'])).stdout);
    const second = JSON.parse((await cli(configPath, ['reconcile', '--json'])).stdout);
    expect(second.runId).not.toBe(first.runId);
    const reports = join(dir, 'reports');
    const days = readdirSync(reports).filter((n) => n !== 'latest');
    const runDirs = days.flatMap((d) => readdirSync(join(reports, d)).map((r) => join(reports, d, r)));
    expect(runDirs).toHaveLength(2);
    const runIds = runDirs
      .map((d) => JSON.parse(readFileSync(join(d, 'report.json'), 'utf8')).header.runId)
      .sort();
    expect(runIds).toEqual([first.runId, second.runId].sort());
    for (const d of runDirs)
      expect(readdirSync(d).sort()).toEqual(['report.csv', 'report.html', 'report.json']);
    // The stable path follows the newest run.
    expect(JSON.parse(readFileSync(join(reports, 'latest', 'report.json'), 'utf8')).header.runId).toBe(
      second.runId,
    );
    // --out never overwrites a report either.
    const out = join(dir, 'out');
    await cli(configPath, ['reconcile', '--out', out]);
    await expect(cli(configPath, ['reconcile', '--out', out])).rejects.toThrow(/already holds a report/);
  });

  it('prints the review items of loans boarded with review items in the JSON, the CSV and the HTML, redacted and bounded', async () => {
    const mapper = new FakeMapper();
    let first: string | null = null;
    mapper.warn = (input) => {
      first ??= input.loan.id;
      if (input.loan.id !== first) return null;
      return Array.from({ length: 13 }, (_, i) => ({
        code: 'approximated' as const,
        file: 'loan.yaml',
        line: 10 + i,
        column: 3,
        target: 'loan',
        field: `field${i}`,
        message: i === 0 ? 'borrower tax id 123456789 <b>rounded</b>' : `item ${i}`,
      }));
    };
    const { dir, configPath } = await setup(mapper);
    expect(first).not.toBeNull();
    await cli(configPath, ['reconcile']);
    const latest = join(dir, 'reports', 'latest');
    const json = JSON.parse(readFileSync(join(latest, 'report.json'), 'utf8'));
    const ex = json.exceptions.find((e: { reason: string }) => e.reason === 'boarded_with_review_items');
    expect(ex.loanId).toBe(first);
    expect(ex.reviewItems).toHaveLength(10);
    expect(ex.reviewItemsMore).toBe(3);
    expect(ex.reviewItems[0]).toEqual({
      code: 'approximated',
      field: 'loan.field0',
      message: expect.stringContaining('[redacted-tin]'),
      at: 'loan.yaml:10:3',
    });
    expect(ex.reviewItems[9]).toMatchObject({
      field: 'loan.field9',
      message: 'item 9',
      at: 'loan.yaml:19:3',
    });
    const all =
      readFileSync(join(latest, 'report.json'), 'utf8') +
      readFileSync(join(latest, 'report.csv'), 'utf8') +
      readFileSync(join(latest, 'report.html'), 'utf8');
    expect(all).not.toContain('123456789');

    const csv = readFileSync(join(latest, 'report.csv'), 'utf8');
    expect(csv.split('\r\n')[0]).toMatch(/,detail,review_items$/);
    expect(csv).toContain('[approximated] loan.field1: item 1 (loan.yaml:11:3)');
    expect(csv).toContain('+3 more');

    const html = readFileSync(join(latest, 'report.html'), 'utf8');
    expect(html).toContain('data-testid="review-items"');
    expect(html).toContain('loan.field9: item 9');
    expect(html).toContain('&lt;b&gt;rounded&lt;/b&gt;');
    expect(html).toContain('+3 more');
    expect(html).not.toContain('item 10');
  });

  it('reports a loan boarded by someone else, a core record edited behind our back, and a quarantine', async () => {
    const { sb, dir, configPath, boardedIds } = await setup();
    // 1. A loan released and acknowledged directly on the platform: not in the core, unknown to us.
    const created = (await (
      await fetch(`${sb.adminUrl}/loans`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ count: 1, release: true }),
      })
    ).json()) as { ids: string[] };
    const stranger = created.ids[0]!;
    const ack = await fetch(`${sb.baseUrl}/public/v1/loans/${encodeURIComponent(stranger)}/boarding`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${sb.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': ackKey(stranger, 'test'),
      },
      body: '{}',
    });
    expect(ack.status).toBeLessThan(300);
    // 2. Someone edits the amount of a boarded loan in the core.
    const edited = boardedIds[0]!;
    const pkgDir = readdirSync(join(dir, 'core', 'packages')).find((n) => {
      const m = JSON.parse(readFileSync(join(dir, 'core', 'packages', n, 'manifest.json'), 'utf8'));
      return m.loanId === edited;
    });
    const manifestPath = join(dir, 'core', 'packages', pkgDir!, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    manifest.source.centsAmount += 1;
    writeFileSync(manifestPath, JSON.stringify(manifest));
    // 3. A released loan whose queue item is malformed: the connector quarantines it.
    const bad = (
      (await (
        await fetch(`${sb.adminUrl}/loans`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ count: 1, release: true }),
        })
      ).json()) as { ids: string[] }
    ).ids[0]!;
    expect(
      (
        await fetch(`${sb.adminUrl}/loans/${encodeURIComponent(bad)}/malform`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"kind":"amount"}',
        })
      ).status,
    ).toBe(200);
    await cli(configPath, ['sync', '--once', '--settle-ms', '0']);

    const out = join(dir, 'out');
    const { stdout } = await cli(configPath, ['reconcile', '--out', out]);
    expect(stdout).toMatch(/DOES NOT TIE/);
    expect(existsSync(join(dir, 'reports', 'latest'))).toBe(false); // --out leaves latest alone

    const json = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
    const got = json.exceptions
      .map(
        (e: { reason: string; loanId: string; field: string | null }) =>
          `${e.reason}:${e.loanId}${e.field ? `:${e.field}` : ''}`,
      )
      .sort();
    expect(got).toEqual(
      [
        `acknowledged_missing_in_core:${stranger}`,
        `acknowledged_unknown_to_connector:${stranger}`,
        `field_mismatch:${edited}:centsAmount`,
        `quarantined:${bad}`,
      ].sort(),
    );
    const platformLine = json.tieOut.find((c: { id: string }) => c.id === 'platform');
    expect(platformLine).toMatchObject({ ties: false, differenceCount: 1 });
    const csvLines = readFileSync(join(out, 'report.csv'), 'utf8').split('\r\n').filter(Boolean);
    expect(csvLines).toHaveLength(1 + 4);
    expect(csvLines.some((l) => l.includes(stranger) && l.includes('acknowledged_missing_in_core'))).toBe(
      true,
    );
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    expect(html).toContain('Control totals DO NOT tie');
    expect(html).toContain(stranger);
  });

  it('refuses a malformed --since with a usage error naming the option', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'reconcile-it-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      'platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: pk_test_x, environment: development }\n',
    );
    await expect(cli(configPath, ['reconcile', '--since', 'yesterday'])).rejects.toThrow(
      /--since: expected an ISO 8601 date-time/,
    );
  });

  it('fails with the platform error and leaves no partial report when the platform is unreachable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'reconcile-it-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      [
        'platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: pk_test_x, environment: development, maxRetries: 0 }',
        `store: { path: ${join(dir, 'state.sqlite')} }`,
        `core: { adapter: file, file: { dir: ${join(dir, 'core')} } }`,
        `reports: { dir: ${join(dir, 'reports')} }`,
        '',
      ].join('\n'),
    );
    await expect(cli(configPath, ['reconcile'])).rejects.toThrow(/ECONNREFUSED|connect/);
    expect(existsSync(join(dir, 'reports')) ? readdirSync(join(dir, 'reports')) : []).toEqual([]);
  });
});
