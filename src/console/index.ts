/**
 * The ops console on the admin listener: the JSON API under /console/api (HTTP Basic, JSON only,
 * no cookies) and the browser pages under /console/ (src/console/pages). Never on the public
 * webhook listener.
 */
import express, { type Express } from 'express';
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

/** Mounts /console/api (first, so the pages never see its paths) and /console/ on the admin app. */
export function mountConsole(adminApp: Express, deps: ConsoleDeps): void {
  adminApp.use('/console/api', createConsoleApi(deps));
  const pages = express.Router();
  mountConsolePages(pages, deps);
  adminApp.use('/console', pages);
}

export type { ConsoleAuth } from './auth.js';
export type { ConsoleService, ConsoleUser, ConsoleRole } from './contract.js';
