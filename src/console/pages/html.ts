/**
 * The console's only way to build HTML: a tagged template in which every interpolated value is
 * escaped unless it is already `Html` (built by this same tag). There is no "raw string" escape
 * hatch for data: loan ids, borrower names, reasons and user names are any text (the platform
 * spec allows it), and `<b>`, quotes or `javascript:` in them must reach the page as text.
 *
 * Values: `Html` is inserted as is; strings and numbers are escaped; null, undefined and false
 * render nothing; arrays are joined (each element by these rules).
 */
import { escapeHtml } from '../../lib/html.js';

const MINT = Symbol('html');

export class Html {
  readonly #text: string;
  /** Only this module mints Html (from the template's literal parts and escaped values). */
  constructor(key: typeof MINT, text: string) {
    if (key !== MINT) throw new Error('Html is built with the html`` tag only');
    this.#text = text;
  }
  toString(): string {
    return this.#text;
  }
}

export type HtmlValue = Html | string | number | bigint | null | undefined | false | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.toString();
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(MINT, out);
}

/** Joins fragments with a separator (itself escaped unless Html). */
export function joinHtml(parts: readonly HtmlValue[], sep: HtmlValue = ''): Html {
  const s = render(sep);
  return new Html(MINT, parts.map(render).join(s));
}

/**
 * A URL for an href or action: only paths inside the console (`/console/...`), each
 * path segment percent-encoded by the caller with `seg()`. Anything else (a scheme, `//host`)
 * would be a link out of the console built from data: refused here so a bug cannot ship one.
 */
export function consoleHref(
  path: string,
  query?: Record<string, string | number | null | undefined>,
): string {
  if (!path.startsWith('/console/') || path.startsWith('//'))
    throw new Error(`console link outside /console/: ${JSON.stringify(path)}`);
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {}))
    if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

/** One path segment (a loan id, a request id, a day): percent-encoded, so `/`, `?`, `#` stay data. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}
