/**
 * The reconciliation page group: the runs under reports.dir, one run and its files, sign-off
 * (prepared, then reviewed by another person), and "run now" (the same reconcile as the CLI).
 */
import { readFile, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { REPORT_FILES } from '../reports/files.js';
import type { ExceptionDisposition } from '../reports/signoff.js';
import { applySignOff, planSignOff } from '../ops/signoff.js';
import type { SignOffRow } from '../store/console.js';
import { ConsoleError, hasRole, type ConsoleService, type ReportRun } from './contract.js';
import { iso, parseJson } from './paging.js';
import { consoleRefusal, requireRole, type ServiceContext } from './service-context.js';

function signOffView(s: SignOffRow | null): ReportRun['signOff'] {
  return {
    preparedBy: s?.preparedBy ?? null,
    preparedAt: iso(s?.preparedAt ?? null),
    reviewedBy: s?.reviewedBy ?? null,
    reviewedAt: iso(s?.reviewedAt ?? null),
    preparedNote: s?.preparedNote ?? null,
    reviewedNote: s?.reviewedNote ?? null,
    dispositions: (parseJson(s?.dispositions ?? null) as ExceptionDisposition[] | null) ?? [],
  };
}

const DAY_DIR = /^\d{4}-\d{2}-\d{2}$/;
const RUN_DIR = /^run-(\d{6})(?:-(\d{1,4}))?$/;

function runOrder(run: string): [string, number] {
  const m = RUN_DIR.exec(run);
  return [m?.[1] ?? '', Number(m?.[2] ?? 1)];
}

/** "Run reconciliation now": an operator runs the same reconcile as the CLI, audited, one at a time. */
export function reconcileNowMethod(
  c: ServiceContext,
  reports: () => Promise<ReportRun[]>,
): Pick<ConsoleService, 'runReconciliation'> {
  const { deps, cs, clock, log } = c;
  let running: string | null = null;
  return {
    async runReconciliation(user) {
      requireRole(user, 'operator', 'running the reconciliation');
      if (!deps.reconcileNow)
        throw new ConsoleError(404, 'this console cannot run the reconciliation (no daemon behind it)');
      if (running !== null)
        throw new ConsoleError(409, `a reconciliation started by ${running} is still running: wait for it`);
      running = user.name;
      const started = clock.now();
      log.info({ user: user.name }, 'reconciliation started from the console');
      try {
        const { dir } = await deps.reconcileNow();
        const run = basename(dir);
        const d = basename(dirname(dir));
        const found = (await reports()).find((r) => r.day === d && r.run === run);
        await cs.appendAudit({
          at: clock.now(),
          actor: user.name,
          kind: 'reconcile',
          action: 'reconcile',
          reason: `run now: ${d}/${run}`,
          detail: { day: d, run, seconds: Math.round((clock.now() - started) / 1000) },
        });
        if (!found) throw new Error(`the reconciliation wrote ${dir}, which is not a run of reports.dir`);
        return found;
      } catch (err) {
        if (err instanceof ConsoleError) throw err;
        await cs.appendAudit({
          at: clock.now(),
          actor: user.name,
          kind: 'reconcile',
          action: 'reconcile',
          reason: 'run now: failed',
          detail: { error: (err as Error).message?.slice(0, 500) ?? String(err) },
        });
        log.warn({ err, user: user.name }, 'reconciliation started from the console failed');
        throw err;
      } finally {
        running = null;
      }
    },
  };
}

/** Reconciliation runs, their files and sign-off. */
export function reportMethods(
  c: ServiceContext,
): Pick<ConsoleService, 'reports' | 'report' | 'reportFile' | 'signOff'> {
  const { cs, clock, log, reportsDir } = c;
  const service: Pick<ConsoleService, 'reports' | 'report' | 'reportFile' | 'signOff'> = {
    async reports() {
      const days = (await readdir(reportsDir).catch(() => [] as string[]))
        .filter((d) => DAY_DIR.test(d))
        .sort()
        .reverse();
      const signed = new Map((await cs.signOffs()).map((s) => [`${s.day}/${s.run}`, s]));
      const out: ReportRun[] = [];
      for (const d of days) {
        const runs = (await readdir(join(reportsDir, d)).catch(() => [] as string[])).filter((r) =>
          RUN_DIR.test(r),
        );
        runs.sort((a, b) => {
          const [sa, na] = runOrder(a);
          const [sb, nb] = runOrder(b);
          return sa === sb ? nb - na : sa < sb ? 1 : -1;
        });
        for (const [i, run] of runs.entries()) {
          const st = await stat(join(reportsDir, d, run, REPORT_FILES.json)).catch(() => null);
          out.push({
            day: d,
            run,
            generatedAt: st ? st.mtime.toISOString() : null,
            signOff: signOffView(signed.get(`${d}/${run}`) ?? null),
            latestOfDay: i === 0,
          });
        }
      }
      return out;
    },

    async report(d, run) {
      if (!DAY_DIR.test(d) || !RUN_DIR.test(run)) return null;
      const file = join(reportsDir, d, run, REPORT_FILES.json);
      const text = await readFile(file, 'utf8').catch(() => null);
      if (text === null) return null;
      const runs = (await readdir(join(reportsDir, d)))
        .filter((r) => RUN_DIR.test(r))
        .sort((a, b) => {
          const [sa, na] = runOrder(a);
          const [sb, nb] = runOrder(b);
          return sa === sb ? nb - na : sa < sb ? 1 : -1;
        });
      const st = await stat(file);
      return {
        day: d,
        run,
        generatedAt: st.mtime.toISOString(),
        signOff: signOffView(await cs.signOff(d, run)),
        latestOfDay: runs[0] === run,
        report: JSON.parse(text) as unknown,
      };
    },

    async reportFile(d, run, kind) {
      if (!DAY_DIR.test(d) || !RUN_DIR.test(run)) return null;
      const file = join(reportsDir, d, run, REPORT_FILES[kind]);
      return (await stat(file).catch(() => null))?.isFile() ? file : null;
    },

    async signOff(user, d, run, as, input) {
      if (!hasRole(user, 'operator') && !hasRole(user, 'approver'))
        throw new ConsoleError(
          403,
          `signing off needs the operator or approver role (user ${user.name} has ${user.roles.join(', ')})`,
        );
      const plan = await planSignOff(reportsDir, {
        day: d,
        run,
        as,
        note: input?.note,
        dispositions: input?.dispositions,
      });
      if (!plan.ok) throw consoleRefusal(plan);
      const done = await applySignOff(
        {
          signOffs: cs,
          now: () => clock.now(),
          onFileError: (err: unknown) =>
            log.warn(
              { err, day: d, run },
              'sign-off recorded, but signoff.json / report.html of the run could not be written',
            ),
        },
        plan,
        user.name,
      );
      if (!done.ok) throw consoleRefusal(done);
      log.info({ user: user.name, day: d, run, as }, 'reconciliation signed off');
      const all = await service.reports();
      return all.find((r) => r.day === d && r.run === run) as ReportRun;
    },
  };
  return service;
}
