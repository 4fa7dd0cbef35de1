/** The audit log (and its CSV) and the reconciliation runs: files and sign-off. */
import { ConsoleError } from '../contract.js';
import { consoleHref, seg } from './html.js';
import { REPORT_HTML_CSP } from '../../reports/render-html.js';
import { auditPage, reportPage, reportsPage } from './other.js';
import { locals, field } from './context.js';
import type { PageContext } from './context.js';

export function mountReportRoutes(ctx: PageContext): void {
  const { router, sendPage, sendError } = ctx;
  const { service } = ctx.deps;
  mountRunRoutes(ctx);
  // ---------------------------------------------------------------------------------------------
  // Audit
  // ---------------------------------------------------------------------------------------------

  router.get('/audit', async (req, res, next) => {
    const { session } = locals(res);
    const loan = field(req.query, 'loan')?.trim() || undefined;
    const request = field(req.query, 'request')?.trim() || undefined;
    const cursor = field(req.query, 'cursor') || undefined;
    try {
      const page = await service.audit({
        ...(loan ? { loan } : {}),
        ...(request ? { requestId: request } : {}),
        ...(cursor ? { cursor } : {}),
        limit: 100,
      });
      sendPage(res, 200, 'Audit log', 'audit', auditPage({ page, loan, request, cursor }), session);
    } catch (err) {
      next(err);
    }
  });

  router.get('/audit.csv', async (req, res, next) => {
    const loan = field(req.query, 'loan')?.trim() || undefined;
    try {
      res.setHeader('Content-Type', 'text/csv; charset=utf-8');
      res.setHeader('Content-Disposition', `attachment; filename="${loan ? 'audit-loan.csv' : 'audit.csv'}"`);
      for await (const chunk of service.auditCsv(loan ? { loan } : {})) {
        if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    } catch (err) {
      if (res.headersSent) res.destroy(err as Error);
      else next(err);
    }
  });

  // ---------------------------------------------------------------------------------------------
  // Reconciliation
  // ---------------------------------------------------------------------------------------------

  router.get('/reconciliation', async (_req, res, next) => {
    const { session, user } = locals(res);
    try {
      sendPage(
        res,
        200,
        'Reconciliation',
        'reconciliation',
        reportsPage({ runs: await service.reports(), session, user }),
        session,
      );
    } catch (err) {
      next(err);
    }
  });

  router.get('/reconciliation/:day/:run', async (req, res, next) => {
    const { session, user } = locals(res);
    try {
      const view = await service.report(req.params['day'], req.params['run']);
      if (!view) {
        sendError(res, 404, 'No such reconciliation run.');
        return;
      }
      sendPage(
        res,
        200,
        `Reconciliation ${view.day}`,
        'reconciliation',
        reportPage({ session, user, view }),
        session,
      );
    } catch (err) {
      next(err);
    }
  });

  router.get('/reconciliation/:day/:run/report.:kind', async (req, res, next) => {
    const kind = req.params['kind'];
    try {
      if (kind !== 'html' && kind !== 'json' && kind !== 'csv')
        throw new ConsoleError(404, 'no such report file');
      const file = await service.reportFile(req.params['day'], req.params['run'], kind);
      if (!file) throw new ConsoleError(404, 'no such report file');
      // report.html is self-contained with inline styles and an inline SVG: its own policy, still no script.
      if (kind === 'html') res.setHeader('Content-Security-Policy', REPORT_HTML_CSP);
      else
        res.setHeader(
          'Content-Disposition',
          `attachment; filename="report-${req.params['day'].replace(/[^0-9-]/g, '')}.${kind}"`,
        );
      res.sendFile(file, { dotfiles: 'deny' });
    } catch (err) {
      next(err);
    }
  });

  router.post('/reconciliation/:day/:run/signoff', async (req, res, next) => {
    const { session, user } = locals(res);
    const as = field(req.body, 'as');
    try {
      if (as !== 'prepared' && as !== 'reviewed')
        throw new ConsoleError(400, 'as: expected prepared or reviewed', 'as');
      const dispositions: Record<string, string> = {};
      for (const [k, v] of Object.entries((req.body ?? {}) as Record<string, unknown>)) {
        const m = /^disposition_(\d{1,6})$/.exec(k);
        if (m && typeof v === 'string') dispositions[m[1] as string] = v;
      }
      const run = await service.signOff(user, req.params['day'], req.params['run'], as, {
        note: field(req.body, 'note') ?? '',
        dispositions,
      });
      session.flash = {
        kind: 'ok',
        text: `Signed as ${as === 'prepared' ? 'preparer' : 'reviewer'} of ${run.day}.`,
      };
      res.redirect(303, consoleHref(`/console/reconciliation/${seg(run.day)}/${seg(run.run)}`));
    } catch (err) {
      next(err);
    }
  });
}

/** The newest run's report and "Run reconciliation now". */
function mountRunRoutes(ctx: PageContext): void {
  const { router, sendError } = ctx;
  const { service } = ctx.deps;
  // The newest run's report.html: where the admin listener's /reports/latest sends a browser
  // without credentials when the console has users (src/console/index.ts).
  router.get('/reports/latest', async (_req, res, next) => {
    try {
      const newest = (await service.reports())[0];
      const file = newest ? await service.reportFile(newest.day, newest.run, 'html') : null;
      if (!newest || !file) {
        sendError(res, 404, 'No reconciliation report yet.', '/console/reconciliation');
        return;
      }
      res.setHeader('Content-Security-Policy', REPORT_HTML_CSP);
      res.sendFile(file, { dotfiles: 'deny' });
    } catch (err) {
      next(err);
    }
  });

  // "Run reconciliation now" (operator; the Origin and CSRF checks ran before this): the same run
  // as `reconcile`, then the new run's page.
  router.post('/reconciliation/run', async (_req, res, next) => {
    const { session, user } = locals(res);
    try {
      const run = await service.runReconciliation(user);
      session.flash = { kind: 'ok', text: `Reconciliation run ${run.day} ${run.run} written.` };
      res.redirect(303, consoleHref(`/console/reconciliation/${seg(run.day)}/${seg(run.run)}`));
    } catch (err) {
      next(err);
    }
  });
}
