/**
 * What the console's page routes share: the router and deps, sessions, the form parser, logging, and how a
 * page or an error is sent.
 */
import type { RequestHandler, Request, Response, Router } from 'express';
import type { Logger } from '../../lib/logger.js';
import type { ConsoleDeps } from '../index.js';
import type { ConsoleUser } from '../contract.js';
import type { Html } from './html.js';
import type { NavKey } from './layout.js';
import type { BrowserSession, SessionStore } from './sessions.js';

export interface PageContext {
  router: Router;
  deps: ConsoleDeps;
  sessions: SessionStore;
  /** urlencoded bodies (login and every POST). */
  form: RequestHandler;
  log: Logger;
  sendPage: (
    res: Response,
    status: number,
    title: string,
    nav: NavKey,
    body: Html | string,
    session: BrowserSession | null,
  ) => void;
  sendError: (res: Response, status: number, message: string, link?: string) => void;
}

export interface PageLocals {
  session: BrowserSession;
  user: ConsoleUser;
  /** Requests waiting for an approver (shown in the approver's navigation), when looked up. */
  pending?: number;
}

export const locals = (res: Response): PageLocals => res.locals as unknown as PageLocals;

/** Single string form/query fields only: a repeated field is refused rather than guessed at. */
export function field(source: unknown, name: string): string | undefined {
  const v = (source as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
}

/**
 * A repeated form field as its list (one value per field, each taken whole): a loan id may hold
 * commas or spaces, so a list is never a joined string split again.
 */
export function fieldList(source: unknown, name: string): string[] | undefined {
  const v = (source as Record<string, unknown> | undefined)?.[name];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
  return undefined;
}

export function isSecureRequest(req: Request): boolean {
  if (req.secure) return true;
  const proto = req.get('x-forwarded-proto');
  return typeof proto === 'string' && proto.split(',')[0]?.trim().toLowerCase() === 'https';
}

/** Pending requests counted for the navigation badge; more show as "99+". */
export const PENDING_SHOWN = 99;
