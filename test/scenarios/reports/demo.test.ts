import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readManifest } from '../../../src/core/file/manifest.js';
import { safeId } from '../../../src/core/safe-name.js';
import { TestImporter } from '../../support/imaging-importer.js';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';

const cleanups: Array<() => void> = [];

/**
 * The demo exports every document to its imaging folder (issue 45): each document of each
 * acknowledged loan's core package is in exactly one published folder's index, with its sha256,
 * and the banner says where.
 */
async function expectEveryDocumentExported(dir: string, banner: string): Promise<void> {
  const imagingDir = join(dir, 'imaging', 'dip');
  expect(banner).toContain(`imaging: ${imagingDir}`);
  const importer = new TestImporter({
    dir: imagingDir,
    indexFile: 'index.txt',
    format: 'tagged',
    begin: 'BEGIN:',
    fileKeyword: '>>FullPath',
  });
  importer.poll();
  const db = new Database(join(dir, 'state.sqlite'), { readonly: true });
  const acked = (
    db.prepare(`SELECT id FROM loans WHERE state = 'acknowledged'`).all() as Array<{ id: string }>
  ).map((r) => r.id);
  db.close();
  expect(acked.length).toBeGreaterThan(0);
  const byDoc = new Map(importer.imported.map((d) => [d.keywords['Platform Doc ID'], d]));
  expect(byDoc.size, 'a document in two folders').toBe(importer.imported.length);
  let documents = 0;
  for (const id of acked) {
    const manifest = await readManifest(join(dir, 'core', 'packages', safeId(id)));
    for (const d of manifest?.documents ?? []) {
      documents += 1;
      expect(byDoc.get(d.documentId)?.sha256, `${id}/${d.documentId} exported`).toBe(d.sha256);
    }
  }
  expect(documents).toBeGreaterThan(0);
}
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('demo (what npm start runs)', () => {
  it('boards sandbox loans, serves metrics and the report, and stops cleanly on Ctrl-C', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-it-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let text = '';
    stdout.on('data', (c: Buffer) => (text += c.toString('utf8')));
    stderr.resume();
    const shutdown = new AbortController();
    const { program, ctx } = buildProgram(() =>
      createCliContext({
        clock: systemClock,
        env: { LOG_LEVEL: 'silent' },
        stdout,
        stderr,
        getConfigOption: () => undefined,
        shutdown: shutdown.signal,
      }),
    );
    program.exitOverride();
    const run = program
      .parseAsync(['node', 'boarding-connector', 'demo', '--dir', dir, '--loans', '8', '--report-after', '3'])
      .finally(() => ctx.close());

    const latest = join(dir, 'reports', 'latest', 'report.json');
    await vi.waitFor(() => expect(existsSync(latest), 'the first report').toBe(true), {
      timeout: 60_000,
      interval: 100,
    });
    const report = JSON.parse(readFileSync(latest, 'utf8'));
    expect(report.totals.acknowledgedOnPlatform.count).toBeGreaterThan(0);

    const metricsUrl = /metrics: (http:\/\/\S+\/metrics)/.exec(text)?.[1];
    expect(metricsUrl, text).toBeDefined();
    const metrics = await fetch(metricsUrl!);
    expect(metrics.status).toBe(200);
    // The console's copy is behind its login; /reports/latest takes the printed user's Basic credentials.
    const reportUrl = /report: +(http:\/\/\S+)\/console\/reports\/latest/.exec(text)?.[1];
    const [, user, password] = /log in as (\S+) \/ (\S+) /.exec(text) ?? [];
    expect(reportUrl, text).toBeDefined();
    const page = await fetch(`${reportUrl!}/reports/latest`, {
      headers: { authorization: `Basic ${Buffer.from(`${user!}:${password!}`).toString('base64')}` },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Boarding reconciliation');

    shutdown.abort(new Error('received SIGINT')); // what main.ts does on Ctrl-C
    await run;
    expect(text).toMatch(/stopped\. boarded [1-9]\d*/);
    // The file core lives under --dir (regression: a lost core line sent it to ./var/core).
    expect(readdirSync(join(dir, 'core', 'packages')).length).toBeGreaterThan(0);
    await expectEveryDocumentExported(dir, text);
  }, 90_000);

  it('writes a report after its first cycle and another when it stops (regression: none in the first minute, none on Ctrl-C)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-it-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let text = '';
    stdout.on('data', (c: Buffer) => (text += c.toString('utf8')));
    stderr.on('data', (c: Buffer) => (text += c.toString('utf8'))); // the narration lines
    const shutdown = new AbortController();
    const { program, ctx } = buildProgram(() =>
      createCliContext({
        clock: systemClock,
        env: { LOG_LEVEL: 'silent' },
        stdout,
        stderr,
        getConfigOption: () => undefined,
        shutdown: shutdown.signal,
      }),
    );
    program.exitOverride();
    // --report-after far away: only the first cycle and the stop write reports.
    const run = program
      .parseAsync([
        'node',
        'boarding-connector',
        'demo',
        '--dir',
        dir,
        '--loans',
        '6',
        '--report-after',
        '3600',
      ])
      .finally(() => ctx.close());
    const runDirs = (): string[] => {
      const reports = join(dir, 'reports');
      if (!existsSync(reports)) return [];
      return readdirSync(reports)
        .filter((d) => d !== 'latest' && !d.startsWith('.'))
        .flatMap((d) => readdirSync(join(reports, d)).map((r) => join(reports, d, r)))
        .filter((r) => existsSync(join(r, 'report.json')));
    };
    await vi.waitFor(
      () => {
        expect(runDirs().length, 'a report after the first cycle').toBeGreaterThanOrEqual(1);
        expect(text).toMatch(/report rec-\S+ \(after the first cycle\)/);
      },
      { timeout: 60_000, interval: 100 },
    );

    // (The demo's own schedule reconciles every 5 minutes too: count, don't assume.)
    const before = runDirs().length;
    shutdown.abort(new Error('received SIGINT'));
    await run;
    expect(runDirs().length, 'another report, written at stop').toBeGreaterThan(before);
    expect(text).toMatch(/report rec-\S+ \(at stop\)/);
    const latest = JSON.parse(readFileSync(join(dir, 'reports', 'latest', 'report.json'), 'utf8'));
    const ids = runDirs().map(
      (d) => JSON.parse(readFileSync(join(d, 'report.json'), 'utf8')).header.runId as string,
    );
    expect(ids).toContain(latest.header.runId);
    expect(text).toMatch(/stopped\. boarded \d+, quarantined \d+; \d+ report\(s\)/);
  }, 90_000);

  it('finishes its scripted sandbox steps with none failed (regression: ids with / % ? and non-ASCII went into paths unencoded, 7 of 10 steps 404)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-it-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let text = '';
    stdout.on('data', (c: Buffer) => (text += c.toString('utf8')));
    stderr.on('data', (c: Buffer) => (text += c.toString('utf8')));
    const shutdown = new AbortController();
    const { program, ctx } = buildProgram(() =>
      createCliContext({
        clock: systemClock,
        env: { LOG_LEVEL: 'silent' },
        stdout,
        stderr,
        getConfigOption: () => undefined,
        shutdown: shutdown.signal,
      }),
    );
    program.exitOverride();
    // The default data (seed 1, 25 loans): the script's first pick is an id with / % ? and non-ASCII.
    // A 2 s rate window (the demo's option) so the whole queue boards in seconds.
    const run = program
      .parseAsync([
        'node',
        'boarding-connector',
        'demo',
        '--dir',
        dir,
        '--report-after',
        '3600',
        '--step-ms',
        '100',
        '--window-ms',
        '2000',
      ])
      .finally(() => ctx.close());
    const stepLines = (): string[] =>
      text
        .split('\n')
        .filter((l) => /^ {2}· (released|3 new loans|nothing left|sandbox step failed)/.test(l));
    await vi.waitFor(() => expect(stepLines().length).toBe(11), { timeout: 60_000, interval: 100 });
    // The README's quick start boards every loan: every loan the sandbox released is boarded on it.
    const adminUrl = /admin: (http:\/\/\S+\/admin)/.exec(text)?.[1];
    expect(adminUrl, text).toBeDefined();
    await vi.waitFor(
      async () => {
        const open = (await (await fetch(`${adminUrl!}/loans?released=true&boarded=false`)).json()) as {
          data: Array<{ id: string }>;
        };
        expect(open.data.map((l) => l.id)).toEqual([]);
      },
      { timeout: 60_000, interval: 250 },
    );
    const released = (await (await fetch(`${adminUrl!}/loans?released=true`)).json()) as { data: unknown[] };
    expect(released.data.length).toBeGreaterThan(20);
    shutdown.abort(new Error('received SIGINT'));
    await run;
    expect(
      stepLines().filter((l) => l.includes('failed')),
      text,
    ).toEqual([]);
    expect(
      stepLines().filter((l) => l.includes('released and funded')).length,
      stepLines().join('\n'),
    ).toBeGreaterThanOrEqual(3);
    // At least one step worked on an id that needs encoding in a path.
    expect(
      stepLines().some((l) => /released.*([/%?]|[^ -~])/.test(l)),
      stepLines().join('\n'),
    ).toBe(true);
    expect(text).toMatch(
      /stopped\. boarded [1-9]\d*, quarantined 0; \d+ report\(s\); 11 of 11 sandbox step\(s\) run, 0 failed/,
    );
  }, 90_000);
});
