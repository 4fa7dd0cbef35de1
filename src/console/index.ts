/**
 * The ops console on the admin listener: the JSON API under /console/api (HTTP Basic, JSON only,
 * no cookies) and the browser pages under /console/ (src/console/pages). Never on the public
 * webhook listener.
 */
import express, { type Express, type RequestHandler } from 'express';
import type { ConsoleConfig } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { ConsoleAuth } from './auth.js';
import type { ConsoleService } from './contract.js';
import { createConsoleApi } from './api.js';
import { mountConsolePages } from './pages/index.js';

export interface ConsoleDeps {
  config: ConsoleConfig;
  service: ConsoleService;
  auth: ConsoleAuth;
  logger: Logger;
  clock: Clock;
  /** bank.timeZone: every time a page shows is in it, with its abbreviation (default UTC). */
  timeZone?: string;
}

/**
 * Mounts /console/api (first, so the pages never see its paths) and /console/ on the admin app,
 * and puts the console's login in front of the admin listener's /reports/latest (mounted before
 * it, src/http/app.ts).
 */
export function mountConsole(adminApp: Express, deps: ConsoleDeps): void {
  adminApp.get('/reports/latest', reportsLatestGuard(deps));
  // Browsers ask the root for an icon on a first load: the console's, not a logged 404.
  adminApp.get('/favicon.ico', (_req, res) => res.redirect(301, '/console/static/favicon.svg'));
  adminApp.use('/console/api', createConsoleApi(deps));
  const pages = express.Router();
  mountConsolePages(pages, deps);
  adminApp.use('/console', pages);
}

/**
 * /reports/latest holds loan ids, amounts, sign-off names and notes: with console users it needs
 * the console's login, as the console's own copy does (issue 43 F12). HTTP Basic or the trusted
 * proxy's user let a client through to the file; a browser without credentials is sent to the
 * console's copy (/console/reports/latest), behind its login form and session.
 */
function reportsLatestGuard(deps: ConsoleDeps): RequestHandler {
  return (req, res, next) => {
    if (!deps.auth.enabled) {
      next();
      return;
    }
    res.setHeader('Cache-Control', 'no-store');
    if (req.get('authorization') !== undefined || deps.auth.proxyUser(req) !== null) {
      deps.auth.basic(req, res, next);
      return;
    }
    res.redirect(303, '/console/reports/latest');
  };
}

export type { ConsoleAuth } from './auth.js';
export type { ConsoleService, ConsoleUser, ConsoleRole } from './contract.js';
