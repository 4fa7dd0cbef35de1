import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';

const cleanups: Array<() => void> = [];
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
      createCliContext({ clock: systemClock, env: { LOG_LEVEL: 'silent' }, stdout, stderr, getConfigOption: () => undefined, shutdown: shutdown.signal }),
    );
    program.exitOverride();
    const run = program.parseAsync(['node', 'boarding-connector', 'demo', '--dir', dir, '--loans', '8', '--report-after', '3']).finally(() => ctx.close());

    const latest = join(dir, 'reports', 'latest', 'report.json');
    await vi.waitFor(() => expect(existsSync(latest), 'the first report').toBe(true), { timeout: 60_000, interval: 100 });
    const report = JSON.parse(readFileSync(latest, 'utf8'));
    expect(report.totals.acknowledgedOnPlatform.count).toBeGreaterThan(0);

    const metricsUrl = /metrics: (http:\/\/\S+\/metrics)/.exec(text)?.[1];
    expect(metricsUrl, text).toBeDefined();
    const metrics = await fetch(metricsUrl!);
    expect(metrics.status).toBe(200);
    const reportUrl = /report: +(http:\/\/\S+\/reports\/latest)/.exec(text)?.[1];
    const page = await fetch(reportUrl!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Boarding reconciliation');

    shutdown.abort(new Error('received SIGINT')); // what main.ts does on Ctrl-C
    await run;
    expect(text).toMatch(/stopped\. boarded [1-9]\d*/);
  }, 90_000);
});
