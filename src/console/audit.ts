/**
 * The audit page group: the append-only log (a page, or all of it as CSV), login failures recorded
 * by auth, and an approver lifting a user's login lock.
 */
import { spreadsheetField } from '../lib/csv.js';
import { applyUnlock, planUnlock } from '../ops/unlock.js';
import type { AuditRow } from '../store/console.js';
import { ConsoleError, type AuditEntry, type ConsoleService } from './contract.js';
import { decodeCursor, encodeCursor, isSeqCursor, iso, parseJson } from './paging.js';
import { MAX_LIMIT, consoleRefusal, requireRole, type ServiceContext } from './service-context.js';

function auditView(r: AuditRow): AuditEntry {
  return {
    seq: r.seq,
    at: iso(r.at) as string,
    actor: r.actor,
    kind: r.kind as AuditEntry['kind'],
    action: r.action as AuditEntry['action'],
    requestId: r.requestId,
    loanId: r.loanId,
    reason: r.reason,
    detail: parseJson(r.detail),
  };
}

/** One CSV cell of the audit export, through the one CSV module (quoting, control characters, formulas). */
function csvCell(v: unknown): string {
  return spreadsheetField(
    v === null || v === undefined
      ? null
      : typeof v === 'string' || typeof v === 'number'
        ? v
        : JSON.stringify(v),
  );
}

/** The audit log, login events and lifting a login lock. */
export function auditMethods(
  c: ServiceContext,
): Pick<ConsoleService, 'audit' | 'auditCsv' | 'recordAuth' | 'recordUnlock'> {
  const { deps, cs, clock, log } = c;
  return {
    async audit(query) {
      const limit = query.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new ConsoleError(400, `limit: expected a whole number 1–${MAX_LIMIT}`, 'limit');
      const before = query.cursor === undefined ? null : decodeCursor(query.cursor, isSeqCursor).seq;
      const rows = await cs.audit(
        {
          ...(query.loan !== undefined ? { loanId: query.loan } : {}),
          ...(query.requestId !== undefined ? { requestId: query.requestId } : {}),
        },
        before,
        limit + 1,
      );
      const page = rows.slice(0, limit);
      const tail = page[page.length - 1];
      return {
        items: page.map(auditView),
        next: rows.length > limit && tail ? encodeCursor({ seq: tail.seq }) : null,
      };
    },

    async *auditCsv(query) {
      yield 'seq,at,actor,kind,action,request_id,loan_id,reason,detail\r\n';
      let after = 0;
      for (;;) {
        const rows = await cs.auditAscending(
          query.loan !== undefined ? { loanId: query.loan } : {},
          after,
          1000,
        );
        if (rows.length === 0) return;
        yield rows
          .map(
            (r) =>
              [r.seq, iso(r.at), r.actor, r.kind, r.action, r.requestId, r.loanId, r.reason, r.detail]
                .map(csvCell)
                .join(',') + '\r\n',
          )
          .join('');
        after = (rows[rows.length - 1] as AuditRow).seq;
      }
    },

    async recordAuth(kind, name, detail) {
      await cs.appendAudit({
        at: clock.now(),
        actor: name === '' ? '(none)' : name,
        kind,
        action: 'login',
        detail,
      });
    },

    async recordUnlock(user, name) {
      requireRole(user, 'approver', 'lifting a login lock');
      const plan = planUnlock(deps.config.console.users, name);
      if (!plan.ok) throw consoleRefusal(plan);
      const done = await applyUnlock(cs, plan, user.name, clock.now());
      log.info({ user: user.name, unlocked: done.user }, 'console login lock lifted');
    },
  };
}
