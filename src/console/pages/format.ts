import { AsyncLocalStorage } from 'node:async_hooks';
import { localDateTime } from '../../lib/calendar.js';
import { formatCentsGrouped } from '../../reports/money.js';
import { html, type Html } from './html.js';

/**
 * The zone the page being rendered shows times in (bank.timeZone): set once per request by the
 * pages' router (pages/index.ts), so every renderer shows the same convention as the reports
 * without passing the zone through each of them. Outside a request: UTC.
 */
export const displayZone = new AsyncLocalStorage<string>();

/** ISO time → "2026-11-25 08:03:07 CST": the bank's wall time with its zone's abbreviation. */
export function when(iso: string | null | undefined): string {
  if (iso === null || iso === undefined || iso === '') return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return localDateTime(t, displayZone.getStore() ?? 'UTC');
}

/** Epoch ms → as `when`. */
export const whenMs = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '' : when(new Date(ms).toISOString());

export function money(cents: number | string | null | undefined): string {
  if (cents === null || cents === undefined || cents === '') return '';
  const n = typeof cents === 'string' ? Number(cents) : cents;
  return Number.isSafeInteger(n) ? formatCentsGrouped(n) : String(cents);
}

/** Form input "1,234.56" / "1234" → cents; null when empty; NaN when not an amount. */
export function parseAmount(v: string | undefined): number | null {
  if (v === undefined || v.trim() === '') return null;
  const m = /^(\d{1,15})(?:\.(\d{1,2}))?$/.exec(v.trim().replaceAll(',', ''));
  if (!m) return Number.NaN;
  return Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0'));
}

/** Cents → the form's text ("1234.56"), '' for none. */
export function amountInput(cents: number | undefined): string {
  if (cents === undefined) return '';
  return `${Math.trunc(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
}

const STATUS_KIND: Record<string, 'ok' | 'bad' | 'warn' | ''> = {
  pending: 'warn',
  approved: 'warn',
  executed: 'ok',
  rejected: 'bad',
  withdrawn: '',
  failed: 'bad',
  quarantined: 'bad',
  acknowledged: 'ok',
  skipped: '',
  open: 'warn',
  sealing: 'warn',
  sealed: 'ok',
  leader: 'ok',
  standby: '',
};

export function pill(text: string, kind?: 'ok' | 'bad' | 'warn' | ''): Html {
  const k = kind ?? STATUS_KIND[text] ?? '';
  return html`<span class="pill${k ? ` ${k}` : ''}">${text}</span>`;
}

/** Any JSON value for a <pre> (detail of an event, masked records). */
export function pretty(value: unknown): string {
  if (value === null || value === undefined) return '';
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** A long id for a table cell: its start and end around an ellipsis (the full value goes in a title). */
export function shortId(id: string, max = 18): string {
  if (id.length <= max) return id;
  const head = Math.ceil((max - 1) / 2);
  return `${id.slice(0, head)}…${id.slice(id.length - (max - 1 - head))}`;
}

/** A URL in an error text: its scheme and host only (an encoded presigned path says nothing to ops). */
const URL_IN_TEXT = /\bhttps?:\/\/([^/\s?#]+)[^\s]*/g;

/**
 * The sentence of a loan's last error that says what is wrong, for one table line: URLs cut to
 * their host, the mapping location moved after the message, the first sentence (or clause) only.
 * The loan's page shows the whole text.
 */
export function errorSentence(code: string | null, message: string | null): string {
  if (message === null || message.trim() === '') return code ?? '';
  const m = message
    .replace(URL_IN_TEXT, (_u, host: string) => `${host}/…`)
    .replace(/\s+/g, ' ')
    .trim();
  const firstOf = (t: string): string => /^(.{20,}?[.;])(\s|$)/.exec(t)?.[1] ?? t;
  // "loan.yaml:12:3 loan.maturityDate: expected …" → "maturityDate: expected … (loan.yaml:12)"
  const loc = /^([\w./-]+\.ya?ml):(\d+)(?::\d+)? (?:[\w]+\.)?([\w.[\]]+): (.*)$/.exec(m);
  if (loc) return `${loc[3]}: ${firstOf(loc[4] as string).replace(/[.;]$/, '')} (${loc[1]}:${loc[2]})`;
  return firstOf(m);
}

/**
 * A detail (an audit line's, a history event's) as readable `key: value` lines, nested keys dotted
 * (`result.done: 12`), arrays of plain values joined, nothing cut: what raw JSON cut at 300
 * characters hid.
 */
export function keyValueLines(value: unknown, prefix = ''): string[] {
  if (value === null || value === undefined) return prefix ? [`${prefix}: (none)`] : [];
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || typeof v !== 'object'))
      return [`${prefix || 'items'}: ${value.map((v) => String(v)).join(', ') || '(none)'}`];
    return value.flatMap((v, i) => keyValueLines(v, `${prefix}[${i}]`));
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return prefix ? [`${prefix}: (none)`] : [];
    return entries.flatMap(([k, v]) => keyValueLines(v, prefix ? `${prefix}.${k}` : k));
  }
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return [prefix ? `${prefix}: ${text}` : text];
}
