import { createHmac } from 'node:crypto';

/**
 * How two records of one customer are recognised: the tax id (EIN/SSN) after normalising, kept
 * only as a keyed hash, and the name after normalising (docs/core.md "Customer match").
 */

/**
 * A tax id as 9 digits: dashes, spaces and dots removed, and leading zeros a spreadsheet dropped put
 * back ("12345678" → "012345678"). null for a masked ("*****6789"), empty or otherwise invalid value:
 * such a value never matches anything.
 */
export function normaliseTin(raw: unknown): string | null {
  if (typeof raw !== 'string' && typeof raw !== 'number') return null;
  const text = String(raw)
    .trim()
    .replace(/[\s.\-–]/g, '');
  if (!/^\d{7,9}$/.test(text)) return null;
  const digits = text.padStart(9, '0');
  return /^0{9}$/.test(digits) ? null : digits;
}

const SUFFIXES: Record<string, string> = {
  incorporated: 'inc',
  corporation: 'corp',
  company: 'co',
  limited: 'ltd',
};

/**
 * A name for comparison: case, accents, punctuation and spacing do not count, "L.L.C." is "LLC",
 * "Inc." is "Inc", "&" is "and", a trailing "Incorporated" is "Inc". "ACME LLC" and "Acme, L.L.C."
 * agree; "Acme Tools LLC" and "Acme LLC" do not.
 */
export function normaliseName(raw: unknown): string {
  if (typeof raw !== 'string') return '';
  const words = raw
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/&/g, ' and ')
    .replace(/\./g, '')
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim()
    .split(' ')
    .filter((w) => w !== '');
  return words.map((w) => SUFFIXES[w] ?? w).join(' ');
}

/** Keyed hashes: the store and the extract index never hold a tax id, only these. */
export class CustomerKeys {
  constructor(private readonly key: string) {
    if (key.length < 16) throw new Error('customers.tinHashKey: expected at least 16 characters');
  }

  /** HMAC-SHA256 of the normalised tax id (base64url), or null when the value cannot match. */
  tinHash(raw: unknown): string | null {
    const tin = normaliseTin(raw);
    return tin === null ? null : createHmac('sha256', this.key).update(`tin:${tin}`).digest('base64url');
  }

  /** Identifies the key (stored once; another key later is refused) without revealing it. */
  fingerprint(): string {
    return createHmac('sha256', this.key)
      .update('boarding-connector tin key check')
      .digest('base64url')
      .slice(0, 22);
  }

  /** A short keyed fingerprint of the normalised name (the extract index compares names with it). */
  nameHash(raw: unknown): string {
    return createHmac('sha256', this.key)
      .update(`name:${normaliseName(raw)}`)
      .digest('base64url')
      .slice(0, 16);
  }
}
