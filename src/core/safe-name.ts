import { createHash } from 'node:crypto';

/**
 * File-system names derived from platform data. Loan ids, document ids and document names come
 * from another company's system: any of them may be `../../etc/passwd`, empty, 10 kB long, or
 * full of control characters and look-alike unicode. Nothing from the platform becomes a path
 * segment without going through here.
 */

const WINDOWS_RESERVED = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$/i;
const MAX_NAME_BYTES = 120;

function shortHash(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 12);
}

/**
 * An identifier as a directory/file name. Plain ids (`[A-Za-z0-9._-]`, no leading dot) stay as they
 * are so operators recognise them; anything else keeps a readable prefix plus a hash of the raw id,
 * so two different ids can never share a name.
 */
export function safeId(id: string): string {
  if (/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,79}$/.test(id) && !id.endsWith('.')) return id;
  const readable = id
    .replace(/[^A-Za-z0-9_-]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 40);
  return `${readable || 'id'}~${shortHash(id)}`;
}

/** Truncates to at most `max` UTF-8 bytes without splitting a code point. */
function truncateUtf8(s: string, max: number): string {
  if (Buffer.byteLength(s, 'utf8') <= max) return s;
  let out = '';
  let bytes = 0;
  for (const ch of s) {
    const n = Buffer.byteLength(ch, 'utf8');
    if (bytes + n > max) break;
    out += ch;
    bytes += n;
  }
  return out;
}

/**
 * A document's display name as a single safe file-name component: letters and digits of any
 * script, plus `. _ - ( ) space`; separators, control and format characters become `_`; no leading
 * dots (hidden files, `..`), no trailing dots/spaces, no Windows device names, bounded length with
 * the extension kept. Empty or unusable names give `fallback`.
 */
export function safeFileName(name: string | null | undefined, fallback = 'document'): string {
  let s = (name ?? '').normalize('NFC');
  s = s.replace(/[^\p{L}\p{M}\p{N}._\-() ]/gu, '_');
  s = s.replace(/\s+/g, ' ').replace(/_+/g, '_').trim();
  s = s.replace(/^[.\s_]+/, '').replace(/[.\s]+$/, '');
  if (WINDOWS_RESERVED.test(s)) s = `_${s}`;
  if (Buffer.byteLength(s, 'utf8') > MAX_NAME_BYTES) {
    const dot = s.lastIndexOf('.');
    const ext = dot > 0 && s.length - dot <= 12 ? s.slice(dot) : '';
    s =
      truncateUtf8(
        s.slice(0, s.length - ext.length),
        MAX_NAME_BYTES - Buffer.byteLength(ext, 'utf8'),
      ).replace(/[.\s]+$/, '') + ext;
  }
  return s === '' || s === '_' ? fallback : s;
}

/** The stored file name of a document: unique by id, readable by name. */
export function documentFileName(documentId: string, name: string | null | undefined): string {
  return `${safeId(documentId)}__${safeFileName(name)}`;
}
