import type { Router } from 'express';
import type { ConsoleDeps } from '../index.js';

/**
 * The console's browser pages under /console/ (sessions, CSRF, login form): owned by the pages
 * work (branch r3s2-27pages), which replaces this file. Until then nothing is served here.
 */
export function mountConsolePages(_router: Router, _deps: ConsoleDeps): void {
  // Intentionally empty: the pages are mounted by their own change.
}
