import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliSplit } from '../../support/cli-run.js';

/**
 * Issue 42, "the first hour without dead ends": the demo run as `npm start` runs it (the CLI's
 * `demo` command in a child process, here through tsx instead of the build), then every link it
 * prints is fetched, the console's with the demo users it prints, and the README's hint after the
 * demo (`customers list` with only `store.path: ./var/demo/state.sqlite`) is run as written.
 * Regressions: the report's /console/loans/… links answered `{"error":"not found"}` (no console in
 * the demo), the `admin:` link answered 404, and `customers list` said `platform: required`.
 * Faster than a person's run: steps every 300 ms, a 2 s rate window.
 */
const repo = resolve(import.meta.dirname, '../../..');

interface Demo {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when stdout + stderr match re (the child's output so far). */
  waitFor(re: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  exited: Promise<number | null>;
}

function startDemo(dir: string): Demo {
  const child = spawn(
    process.execPath,
    [
      '--import',
      pathToFileURL(join(repo, 'node_modules/tsx/dist/loader.mjs')).href,
      join(repo, 'src/main.ts'),
      'demo',
      '--dir',
      dir,
      '--loans',
      '8',
      '--step-ms',
      '300',
      '--window-ms',
      '2000',
    ],
    { cwd: repo, env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  const poke = (): void => waiters.forEach((w) => w());
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    poke();
  });
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString();
    poke();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(re, timeoutMs) {
      return new Promise((res, rej) => {
        const check = (): boolean => {
          const m = re.exec(out + err);
          if (m) {
            res(m);
            return true;
          }
          return false;
        };
        if (check()) return;
        const timer = setTimeout(
          () => rej(new Error(`demo: no ${String(re)} within ${timeoutMs} ms\n${out}\n${err}`)),
          timeoutMs,
        );
        waiters.push(() => {
          if (check()) clearTimeout(timer);
        });
        void exited.then(() => {
          if (!check()) rej(new Error(`demo exited before ${String(re)}\n${out}\n${err}`));
        });
      });
    },
  };
}

describe('the first hour: npm start (the demo), its links and the README commands after it', () => {
  let parent: string;
  let dir: string;
  let demo: Demo;

  beforeAll(() => {
    parent = mkdtempSync(join(tmpdir(), 'first-hour-demo-'));
    dir = join(parent, 'demo');
  });
  afterAll(async () => {
    if (demo && demo.child.exitCode === null) {
      demo.child.kill('SIGKILL');
      await demo.exited;
    }
    rmSync(parent, { recursive: true, force: true });
  });

  it('every link the demo prints answers 200, the console with the printed users; Ctrl-C stops it with 0', async () => {
    demo = startDemo(dir);
    await demo.waitFor(/Ctrl-C stops\./, 60_000);
    // The first report (after the first cycle) is what the report link serves.
    await demo.waitFor(/report \S+ \(after the first cycle\)/, 60_000);
    const banner = demo.stdout();

    const console =
      /console: (http:\/\/127\.0\.0\.1:\d+)\/console\/queue +log in as (\S+) \/ (\S+) \(operator\) or (\S+) \/ (\S+) \(approver\)/.exec(
        banner,
      );
    expect(console, banner).not.toBeNull();
    const [, base, opName, opPassword, apName, apPassword] = console as unknown as string[];

    // Every URL printed on stdout and in the status lines.
    const links = [
      ...new Set([...(banner + demo.stderr()).matchAll(/https?:\/\/[^\s)'",]+/g)].map((m) => m[0])),
    ];
    // sandbox API and admin, metrics, health, report, console.
    expect(links.length).toBeGreaterThanOrEqual(6);
    expect(links.some((l) => l.endsWith('/admin'))).toBe(true);
    const login = async (name: string, password: string): Promise<string> => {
      const res = await fetch(`${base}/console/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base! },
        body: new URLSearchParams({ name, password }).toString(),
      });
      expect(res.status, `login ${name}`).toBe(303);
      return (res.headers.getSetCookie().find((c) => c.startsWith('bc_console_session=')) ?? '').split(
        ';',
      )[0]!;
    };
    const operator = await login(opName!, opPassword!);
    const approver = await login(apName!, apPassword!);
    const get = (url: string, cookie = operator): Promise<Response> =>
      fetch(url, { headers: { cookie }, redirect: 'manual' });
    const answers: Array<[string, number]> = [];
    for (const l of links) answers.push([l, (await get(l)).status]);

    // The report's links to loans' console pages (every exception links one), and a boarded loan's page.
    const report = await (await get(`${base}/console/reports/latest`)).text();
    const loanLinks = [...report.matchAll(/href="(\/console\/loans\/[^"]+)"/g)].map((m) =>
      m[1]!.replaceAll('&amp;', '&'),
    );
    const adminUrl = links.find((l) => l.endsWith('/admin'))!;
    const boarded = (
      (await (await fetch(`${adminUrl}/loans?boarded=true`)).json()) as { data: Array<{ id: string }> }
    ).data;
    expect(boarded.length).toBeGreaterThan(0);
    loanLinks.push(`/console/loans/${encodeURIComponent(boarded[0]!.id)}`);
    for (const l of loanLinks) {
      answers.push([`${l} (operator)`, (await get(`${base}${l}`)).status]);
      answers.push([`${l} (approver)`, (await get(`${base}${l}`, approver)).status]);
    }
    expect(
      answers.filter(([, status]) => status !== 200),
      JSON.stringify(answers, null, 1),
    ).toEqual([]);
    // Without a login the console sends to its login page (it is not open).
    expect((await fetch(`${base}/console/queue`, { redirect: 'manual' })).status).not.toBe(200);

    demo.child.kill('SIGINT');
    expect(await demo.exited).toBe(0);
    expect(demo.stdout()).toMatch(/stopped\. boarded \d+/);
  }, 150_000);

  it("the README's hint after the demo: customers list (and loans list, batches list) with only store.path", async () => {
    // README "Quick start": `customers list` (with `store.path: ./var/demo/state.sqlite`).
    const cfg = join(parent, 'state-only.yaml');
    writeFileSync(cfg, `store: { path: ${JSON.stringify(join(dir, 'state.sqlite'))} }\n`);
    const env = { LOG_LEVEL: 'silent' };
    const customers = await runCliSplit(['customers', 'list', '--json', '--config', cfg], { env });
    expect(customers.code, customers.error ?? '').toBe(0);
    const rows = JSON.parse(customers.stdout) as Array<{ matchedBy: string }>;
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((r) => r.matchedBy)).toContain('created');
    const loans = await runCliSplit(['loans', 'list', '--json', '--config', cfg], { env });
    expect(loans.code, loans.error ?? '').toBe(0);
    const list = JSON.parse(loans.stdout) as Array<{ id: string }>;
    expect(list.length).toBeGreaterThan(0);
    const shown = await runCliSplit(['loans', 'show', list[0]!.id, '--config', cfg], { env });
    expect(shown.code, shown.error ?? '').toBe(0);
    // The file core's batches are under the demo's core dir, so that key comes along.
    const withCore = join(parent, 'state-core.yaml');
    writeFileSync(
      withCore,
      `store: { path: ${JSON.stringify(join(dir, 'state.sqlite'))} }\n` +
        `core: { adapter: file, file: { dir: ${JSON.stringify(join(dir, 'core'))} } }\n`,
    );
    const batches = await runCliSplit(['batches', 'list', '--json', '--config', withCore], { env });
    expect(batches.code, batches.error ?? '').toBe(0);
    // A command that calls the platform still says that the config has none.
    const sync = await runCliSplit(['sync', '--once', '--config', cfg], { env });
    expect(sync.code).toBe(1);
    expect(sync.error).toMatch(/platform: required/);
  }, 60_000);
});
