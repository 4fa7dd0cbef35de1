/**
 * The browser side's request guards: response headers (a strict Content-Security-Policy: the
 * pages load only the console's own stylesheet, no script, no frame), the session cookie, and the
 * same-origin check every POST passes before its CSRF token is even looked at.
 */
import type { NextFunction, Request, Response } from 'express';
import { parse as parseCookies, serialize as serializeCookie } from 'cookie';

export const SESSION_COOKIE = 'bc_console_session';
export const COOKIE_PATH = '/console/';

/** No script at all, styles only from our own /console/static/, forms post only to us, never framed. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "style-src 'self'",
  "img-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export function pageHeaders(_req: Request, res: Response, next: NextFunction): void {
  res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  // Same-origin: our own POSTs carry a Referer (the Origin check's fallback), links out carry none.
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('Cache-Control', 'no-store');
  next();
}

export function sessionCookieOf(req: Request): string | undefined {
  const header = req.headers.cookie;
  if (typeof header !== 'string' || header === '') return undefined;
  return parseCookies(header)[SESSION_COOKIE];
}

/**
 * The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends
 * it), path /console/, Secure when the request came over TLS (directly or from the trusted proxy).
 * No Max-Age: it dies with the browser; the server expires it sooner when idle.
 */
export function setSessionCookie(res: Response, id: string, secure: boolean): void {
  res.append(
    'Set-Cookie',
    serializeCookie(SESSION_COOKIE, id, { httpOnly: true, sameSite: 'strict', path: COOKIE_PATH, secure }),
  );
}

export function clearSessionCookie(res: Response, secure: boolean): void {
  res.append(
    'Set-Cookie',
    serializeCookie(SESSION_COOKIE, '', {
      httpOnly: true,
      sameSite: 'strict',
      path: COOKIE_PATH,
      secure,
      maxAge: 0,
      expires: new Date(0),
    }),
  );
}

/**
 * Whether a state-changing request comes from one of our own pages: its Origin (or, when a browser
 * sends none, its Referer) must name the host the request was sent to. A request with neither is
 * refused (every browser that can run the console sends one of them on a form POST), unless
 * `absentOk` (the JSON API: automation sends neither, while a browser's cross-site request always
 * carries an Origin, `null` at worst, which is refused).
 */
export function sameOrigin(
  req: Request,
  opts: { absentOk?: boolean } = {},
): { ok: true } | { ok: false; why: string } {
  const host = req.headers.host;
  if (typeof host !== 'string' || host === '') return { ok: false, why: 'no Host header' };
  const origin = req.headers.origin;
  const referer = req.headers.referer;
  // An opaque origin (a sandboxed frame, a data: page) is never one of our pages.
  if (origin === 'null') return { ok: false, why: 'Origin is null' };
  const source =
    typeof origin === 'string' && origin !== ''
      ? origin
      : typeof referer === 'string' && referer !== ''
        ? referer
        : null;
  if (source === null)
    return opts.absentOk === true ? { ok: true } : { ok: false, why: 'no Origin or Referer header' };
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    return { ok: false, why: 'Origin/Referer is not a URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, why: `Origin scheme ${url.protocol}` };
  if (url.host.toLowerCase() !== host.toLowerCase())
    return { ok: false, why: `Origin ${url.host} is not this host` };
  return { ok: true };
}
