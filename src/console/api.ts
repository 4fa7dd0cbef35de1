import express, { type Router } from 'express';
import type { ConsoleDeps } from './index.js';

/** The JSON API under /console/api (docs/operations.md "Ops console"). */
export function createConsoleApi(deps: ConsoleDeps): Router {
  const router = express.Router();
  router.use(deps.auth.basic);
  return router;
}
