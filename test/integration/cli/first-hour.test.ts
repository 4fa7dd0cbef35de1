import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseDocument } from 'yaml';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { systemClock } from '../../../src/lib/clock.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { createConnectorDaemon } from '../../../src/app/daemon.js';
import { loadConfig } from '../../../src/config/load.js';
import { hashPassword } from '../../../src/console/auth.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { runCliSplit as runCliIn } from '../../support/cli-run.js';
import { yamlBlocks } from '../../support/doc-references.js';

/**
 * The first hour as docs/sandbox.md tells it ("Boarding the sandbox's queue with the connector"),
 * run as written: the sandbox command from the docs, a copy of config/example.yaml in a directory
 * outside the repository with the docs' `platform` edits, `config check --connect`, `sync --once`.
 * Regression: the documented quick start (environment: staging) quarantined 26 of 33 loans while
 * `config check --connect` said all was well, and the reason shown was `validation`.
 *
 * One change to "as written": the rate window is 2 s instead of 60 s (sandbox and config alike),
 * so 30-odd acknowledgements do not take two minutes of a test run.
 */
const repo = resolve(import.meta.dirname, '../../..');
const WINDOW_MS = 2000;
const section = ((): string => {
  const doc = readFileSync(join(repo, 'docs/sandbox.md'), 'utf8');
  const start = doc.indexOf("### Boarding the sandbox's queue with the connector");
  return doc.slice(start, doc.indexOf('\n### ', start + 10));
})();

/** The connector command the docs run after `cd` (`node "$OLDPWD/dist/main.js" <args> --config config.yaml`). */
function documented(command: string): string[] {
  const m = new RegExp(`dist/main\\.js"? (${command} [^#\\n]*)`).exec(section);
  if (!m?.[1]) throw new Error(`docs/sandbox.md: no \`${command}\` command in the section`);
  return m[1].trim().split(/\s+/);
}

interface RunningCli {
  firstLine: Promise<string>;
  stop(): Promise<void>;
}

/** A long-running command (the sandbox) in-process, as main.ts runs it; stop() is its Ctrl-C. */
function startCli(args: string[]): RunningCli {
  let text = '';
  let gotLine: (line: string) => void = () => undefined;
  const firstLine = new Promise<string>((r) => (gotLine = r));
  const stdout = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      const nl = text.indexOf('\n');
      if (nl >= 0) gotLine(text.slice(0, nl));
      cb();
    },
  });
  const stderr = new Writable({ write: (_c, _e, cb) => cb() });
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
  const done = program.parseAsync(['node', 'boarding-connector', ...args]).finally(() => ctx.close());
  return {
    firstLine,
    stop: async () => {
      shutdown.abort(new Error('received SIGINT'));
      await done;
    },
  };
}

/** config/example.yaml as shipped, copied to `dir` with the docs' platform edits (placeholders → the sandbox's printed values). */
function copyExample(
  dir: string,
  printed: { baseUrl: string; apiKey: string },
  environment?: string,
): string {
  const block = yamlBlocks(section)
    .map((b) => parse(b.yaml) as Record<string, Record<string, unknown>>)
    .find((v) => v?.['platform'] !== undefined);
  if (!block?.['platform']) throw new Error('docs/sandbox.md: no platform block in the section');
  const doc = parseDocument(readFileSync(join(repo, 'config/example.yaml'), 'utf8'));
  for (const [key, value] of Object.entries(block['platform'])) {
    const v =
      key === 'baseUrl'
        ? printed.baseUrl
        : key === 'apiKey'
          ? printed.apiKey
          : key === 'environment' && environment !== undefined
            ? environment
            : value;
    doc.setIn(['platform', key], v);
  }
  doc.setIn(['platform', 'rateLimit', 'windowMs'], WINDOW_MS);
  const path = join(dir, 'config.yaml');
  writeFileSync(path, doc.toString());
  return path;
}

const SILENT = { LOG_LEVEL: 'silent' };
const runCliSplit = (
  args: string[],
  opts: { cwd: string; env?: Record<string, string> },
): ReturnType<typeof runCliIn> => runCliIn(args, { ...opts, env: { ...SILENT, ...opts.env } });

/**
 * The report links of a run written with the example's relative `reports.dir`, served by the
 * daemon's admin listener: /reports/latest and the console's report.html/.json/.csv links.
 * Regression: every link answered 500 (`path must be absolute … res.sendFile`).
 */
async function reportLinks(dir: string): Promise<Array<[string, number]>> {
  return withDaemon(dir, async (base, get) => {
    const seen: Array<[string, number]> = [
      ['/reports/latest', (await fetch(`${base}/reports/latest`)).status],
    ];
    const list = await get('/console/reconciliation');
    seen.push(['/console/reconciliation', list.status]);
    const run = /href="(\/console\/reconciliation\/[^"/]+\/[^"/]+)"/.exec(await list.text())?.[1];
    if (run === undefined) throw new Error('no reconciliation run listed');
    const page = await get(run);
    seen.push([run, page.status]);
    const links = [...(await page.text()).matchAll(/href="([^"]*\/report\.(?:html|json|csv))"/g)].map((m) =>
      (m[1] as string).replaceAll('&amp;', '&'),
    );
    expect(links.length, 'report links on the run page').toBeGreaterThanOrEqual(3);
    for (const l of links) seen.push([l, (await get(l)).status]);
    // Every console link a person can follow from the queue (GET links; a bounded crawl: at most
    // 5 pages per kind of page, e.g. 5 loans, so it stays a few seconds).
    const visited = new Set(seen.map(([l]) => l));
    const perKind = new Map<string, number>();
    const todo = ['/console/queue'];
    while (todo.length > 0 && visited.size < 120) {
      const path = todo.shift() as string;
      if (visited.has(path) && path !== '/console/queue') continue;
      visited.add(path);
      const res = await get(path);
      seen.push([path, res.status]);
      if (!(res.headers.get('content-type') ?? '').startsWith('text/html')) continue;
      for (const m of (await res.text()).matchAll(/href="(\/console\/[^"#]*)"/g)) {
        const link = (m[1] as string).replaceAll('&amp;', '&');
        const kind = link.split('?')[0]!.split('/').slice(0, 3).join('/');
        if (visited.has(link) || todo.includes(link) || link.startsWith('/console/logout')) continue;
        if ((perKind.get(kind) ?? 0) >= 5) continue;
        perKind.set(kind, (perKind.get(kind) ?? 0) + 1);
        todo.push(link);
      }
    }
    return seen;
  });
}

/** The daemon's admin listener (console on) over the state in `dir`, no cycle run; `get` carries a logged-in operator's session. */
async function withDaemon<T>(
  dir: string,
  fn: (base: string, get: (path: string, basic?: boolean) => Promise<Response>) => Promise<T>,
): Promise<T> {
  const config = loadConfig({
    env: SILENT,
    fileText: readFileSync(join(dir, 'config.yaml'), 'utf8'),
    filePath: 'config.yaml',
    cwd: dir,
  });
  config.webhooks.port = 0;
  config.admin.port = 0;
  config.console.users = [
    { name: 'olga', passwordHash: await hashPassword('pw-first-hour'), roles: ['operator'] },
  ];
  const rt = await buildRuntime(config, silentLogger(), { clock: systemClock });
  const daemon = createConnectorDaemon(rt, { cycleOnStart: false });
  try {
    await daemon.start();
    const base = daemon.adminUrl() as string;
    const login = await fetch(`${base}/console/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
      body: new URLSearchParams({ name: 'olga', password: 'pw-first-hour' }).toString(),
    });
    const cookie = (
      login.headers.getSetCookie().find((c) => c.startsWith('bc_console_session=')) ?? ''
    ).split(';')[0] as string;
    const basic = `Basic ${Buffer.from('olga:pw-first-hour').toString('base64')}`;
    return await fn(base, (path, useBasic = false) =>
      fetch(`${base}${path}`, {
        headers: useBasic ? { authorization: basic } : { cookie },
        redirect: 'manual',
      }),
    );
  } finally {
    await daemon.stop();
    await rt.close();
  }
}

interface Check {
  name: string;
  status: string;
  detail: string;
}

describe('the first hour: docs/sandbox.md with a copy of config/example.yaml outside the repository', () => {
  let sandbox: RunningCli;
  let printed: { baseUrl: string; apiKey: string; adminUrl: string };
  const dirs: string[] = [];

  beforeAll(async () => {
    const args = documented('sandbox');
    expect(args).toContain('--unmasked-key');
    sandbox = startCli([...args, '--window-ms', String(WINDOW_MS)]);
    printed = JSON.parse(await sandbox.firstLine) as typeof printed;
  });
  afterAll(async () => {
    await sandbox.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const workDir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'first-hour-'));
    dirs.push(d);
    return d;
  };
  const admin = async (path: string): Promise<unknown> => (await fetch(`${printed.adminUrl}${path}`)).json();

  it('as the docs say (environment: development): config check --connect has no FAIL, sync --once boards every released loan once, loans show takes a loan number', async () => {
    const dir = workDir();
    copyExample(dir, printed);
    const check = await runCliSplit([...documented('config check'), '--json'], {
      cwd: dir,
      env: { LOG_LEVEL: 'silent' },
    });
    const checks = (JSON.parse(check.stdout) as { checks: Check[] }).checks;
    expect(
      checks.filter((c) => c.status === 'fail'),
      check.stdout,
    ).toEqual([]);
    expect(check.code).toBe(0);
    // The copy is outside the repository: ./mappings/generic is the shipped set.
    expect(checks.find((c) => c.name === 'mappings.dir')?.detail).toMatch(
      /using the shipped set .*mappings\/generic/,
    );
    expect(checks.find((c) => c.name === 'platform.documents')?.status).toBe('ok');
    // The example ships without webhook secrets: said, not failed.
    expect(checks.find((c) => c.name === 'webhooks.secrets')?.status).toBe('warn');

    const sync = await runCliSplit([...documented('sync'), '--json'], {
      cwd: dir,
      env: { LOG_LEVEL: 'silent' },
    });
    expect(sync.code, `${sync.error ?? ''}\n${sync.stdout}`).toBe(0);
    // Relative paths of the example are from the working directory.
    expect(existsSync(join(dir, 'var/state.sqlite'))).toBe(true);
    expect(existsSync(join(dir, 'var/core'))).toBe(true);

    const released = (await admin('/loans?released=true')) as {
      data: Array<{ id: string; archived: boolean }>;
    };
    const notBoarded = (await admin('/loans?released=true&boarded=false')) as { data: Array<{ id: string }> };
    expect(released.data.length).toBeGreaterThan(20);
    expect(notBoarded.data.map((l) => l.id)).toEqual([]);
    const counters = (await admin('/counters')) as {
      acks: Record<string, number>;
      duplicateAcks: Record<string, number>;
    };
    expect(counters.duplicateAcks).toEqual({});
    for (const l of released.data) expect(counters.acks[l.id], l.id).toBe(1);
    const quarantined = await runCliSplit(
      ['loans', 'list', '--state', 'quarantined', '--json', '--config', 'config.yaml'],
      { cwd: dir, env: { LOG_LEVEL: 'silent' } },
    );
    expect(JSON.parse(quarantined.stdout)).toEqual([]);

    // loans show by the bank's account number and by the platform's loan number, as well as by id.
    const all = JSON.parse(
      (await runCliSplit(['loans', 'list', '--json', '--config', 'config.yaml'], { cwd: dir })).stdout,
    ) as Array<{ id: string; loanNumber: string | null }>;
    const withNumber = all.find((l) => l.loanNumber !== null) ?? all[0];
    const byId = JSON.parse(
      (
        await runCliSplit(['loans', 'show', withNumber!.id, '--json', '--config', 'config.yaml'], {
          cwd: dir,
        })
      ).stdout,
    ) as { loan: { id: string }; identity?: { accountNumber?: string } };
    expect(byId.loan.id).toBe(withNumber!.id);
    const account =
      (byId as unknown as { accountNumber?: string; identity?: { accountNumber?: string } }).identity
        ?.accountNumber ?? (byId as { accountNumber?: string }).accountNumber;
    expect(account, JSON.stringify(byId).slice(0, 400)).toMatch(/^\d{10}$/);
    const byAccount = await runCliSplit(['loans', 'show', account!, '--config', 'config.yaml'], { cwd: dir });
    expect(byAccount.code, byAccount.error ?? '').toBe(0);
    expect(byAccount.stdout).toContain(`loan ${withNumber!.id}`);
    if (withNumber!.loanNumber !== null) {
      const byNumber = await runCliSplit(
        ['loans', 'show', withNumber!.loanNumber, '--config', 'config.yaml'],
        { cwd: dir },
      );
      expect(byNumber.code, byNumber.error ?? '').toBe(0);
      expect(byNumber.stdout).toContain(`loan ${withNumber!.id}`);
    }
    const none = await runCliSplit(['loans', 'show', 'no-such-loan-or-number', '--config', 'config.yaml'], {
      cwd: dir,
    });
    expect(none.code).toBe(2);
    expect(none.error).toMatch(/by platform id, loan number or account number/);

    // The day's report, under the example's relative reports.dir, and every link to it answers.
    const rec = await runCliSplit(['reconcile', '--config', 'config.yaml'], { cwd: dir });
    expect(rec.code, rec.error ?? '').toBe(0);
    expect(existsSync(join(dir, 'var/reports/latest/report.html'))).toBe(true);
    const links = await reportLinks(dir);
    expect(links.length).toBeGreaterThan(10);
    expect(
      links.filter(([, status]) => status < 200 || status > 299),
      JSON.stringify(links),
    ).toEqual([]);
  }, 120_000);

  it('with environment: staging, the loans whose document host is refused quarantine as download_refused, and config check --connect warns first', async () => {
    const dir = workDir();
    copyExample(dir, printed, 'staging');
    const check = await runCliSplit([...documented('config check'), '--json'], {
      cwd: dir,
      env: { LOG_LEVEL: 'silent' },
    });
    const doc = (JSON.parse(check.stdout) as { checks: Check[] }).checks.find(
      (c) => c.name === 'platform.documents',
    );
    expect(doc?.status, check.stdout).toBe('warn');
    expect(doc?.detail).toMatch(
      /127\.0\.0\.1 is a loopback address.*boarding\.documentHosts\.allow.*platform\.environment: development.*download_refused/,
    );

    // Its own state and core (the first test's loans are boarded on the platform already): re-release some.
    const boarded = ((await admin('/loans?boarded=true')) as { data: Array<{ id: string }> }).data.slice(
      0,
      3,
    );
    for (const l of boarded)
      await fetch(`${printed.adminUrl}/loans/${encodeURIComponent(l.id)}/release`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
    const sync = await runCliSplit([...documented('sync'), '--json'], {
      cwd: dir,
      env: { LOG_LEVEL: 'silent' },
    });
    expect(sync.code, sync.error ?? '').toBe(0);
    const quarantined = JSON.parse(
      (
        await runCliSplit(['loans', 'list', '--state', 'quarantined', '--json', '--config', 'config.yaml'], {
          cwd: dir,
        })
      ).stdout,
    ) as Array<{ id: string; quarantineReason: string }>;
    expect(quarantined.length).toBeGreaterThan(0);
    expect([...new Set(quarantined.map((l) => l.quarantineReason))]).toEqual(['download_refused']);
    const shown = JSON.parse(
      (
        await runCliSplit(['loans', 'show', quarantined[0]!.id, '--json', '--config', 'config.yaml'], {
          cwd: dir,
        })
      ).stdout,
    ) as { loan: { lastErrorMessage: string } };
    expect(shown.loan.lastErrorMessage).toMatch(
      /^127\.0\.0\.1 is a loopback address.*add 127\.0\.0\.1 or its range to boarding\.documentHosts\.allow/,
    );

    // The same reason wherever reasons show: loans list (above), the report, /metrics, the console's filter.
    expect((await runCliSplit(['reconcile', '--config', 'config.yaml'], { cwd: dir })).code).toBe(0);
    const report = JSON.parse(readFileSync(join(dir, 'var/reports/latest/report.json'), 'utf8')) as {
      exceptions: Array<{ reason: string; loanId: string; detail: string }>;
    };
    const inReport = report.exceptions.filter((e) => e.reason === 'quarantined');
    expect(inReport.length).toBe(quarantined.length);
    for (const e of inReport)
      expect(e.detail).toMatch(/^Quarantined \(download_refused: 127\.0\.0\.1 is a loopback address/);
    await withDaemon(dir, async (base, get) => {
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(
        new RegExp(`loans_quarantined\\{reason="download_refused"\\} ${quarantined.length}\\b`),
      );
      const filtered = await get('/console/api/exceptions?reason=download_refused', true);
      expect(filtered.status).toBe(200);
      const items = ((await filtered.json()) as { items: Array<{ id: string }> }).items;
      expect(items.map((i) => i.id).sort()).toEqual(quarantined.map((l) => l.id).sort());
      expect((await get('/console/api/exceptions?reason=validation', true)).status).toBe(200);
    });
  }, 120_000);
});
