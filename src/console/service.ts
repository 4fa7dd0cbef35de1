/**
 * The ops console service (the ConsoleService of contract.ts): wiring only. Each page group is its
 * own file over the ops/ actions (exceptions.ts, loans.ts, requests.ts, audit.ts, reports.ts,
 * status.ts); executing approved requests is the executor's (executor.ts), in the daemon.
 */
import type { ConsoleService } from './contract.js';
import { auditMethods } from './audit.js';
import { exceptionMethods } from './exceptions.js';
import { loanMethods } from './loans.js';
import { reconcileNowMethod, reportMethods } from './reports.js';
import { requestMethods } from './requests.js';
import type { ConsoleServiceDeps, ServiceContext } from './service-context.js';
import { statusMethods } from './status.js';

export function createConsoleService(deps: ConsoleServiceDeps): ConsoleService {
  const c: ServiceContext = {
    deps,
    store: deps.store,
    cs: deps.consoleStore,
    clock: deps.clock,
    tz: deps.config.bank.timeZone,
    log: deps.logger.child({ component: 'console' }),
    reportsDir: deps.config.reports.dir,
  };
  const reports = reportMethods(c);
  return {
    ...exceptionMethods(c),
    ...loanMethods(c),
    ...requestMethods(c),
    ...auditMethods(c),
    ...statusMethods(c),
    ...reports,
    ...reconcileNowMethod(c, () => reports.reports()),
  };
}
