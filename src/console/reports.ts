/**
 * The reconciliation page group: the runs under reports.dir, one run and its files, sign-off
 * (prepared, then reviewed by another person), and "run now" (the same reconcile as the CLI).
 */
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { REPORT_FILES } from '../reports/files.js';
import type { ExceptionDisposition } from '../reports/signoff.js';
import { applySignOff, planSignOff } from '../ops/signoff.js';
import type { SignOffRow } from '../store/console.js';
import { ConsoleError, hasRole, type ConsoleService, type ReportRun } from './contract.js';
import { iso, parseJson } from './paging.js';
import { operatorReconcileNow } from '../ops/reconcile.js';
import { consoleRefusal, orRefuse, requireRole, type ServiceContext } from './service-context.js';

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

/**
 * "Run reconciliation now": an operator runs the same reconcile as the CLI; one at a time and the
 * audit lines are ops/reconcile.ts's rule (operatorReconcileNow). Here: the role and the run's view.
 */
export function reconcileNowMethod(
  c: ServiceContext,
  reports: () => Promise<ReportRun[]>,
): Pick<ConsoleService, 'runReconciliation'> {
  const { deps, cs, clock, log } = c;
  const runNow = deps.reconcileNow
    ? operatorReconcileNow({ run: deps.reconcileNow, audit: cs, now: () => clock.now() })
    : null;
  return {
    async runReconciliation(user) {
      requireRole(user, 'operator', 'running the reconciliation');
      if (runNow === null)
        throw new ConsoleError(404, 'this console cannot run the reconciliation (no daemon behind it)');
      log.info({ user: user.name }, 'reconciliation started from the console');
      let done: { day: string; run: string };
      try {
        done = await orRefuse(() => runNow(user.name));
      } catch (err) {
        if (!(err instanceof ConsoleError))
          log.warn({ err, user: user.name }, 'reconciliation started from the console failed');
        throw err;
      }
      const found = (await reports()).find((r) => r.day === done.day && r.run === done.run);
      if (!found)
        throw new Error(
          `the reconciliation wrote ${done.day}/${done.run}, which is not a run of reports.dir`,
        );
      return found;
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
