import { HelperIssue, describe } from './issue.js';

/**
 * Tax ids. The platform returns only `einLast4`/`ssnLast4` unless the API key carries
 * read:businesses:ein / read:people:ssn, in which case `ein`/`ssn` hold the full number.
 * A mapping that needs the full number calls `$tin(entity)`: with only the last 4 known, that is
 * the issue `tin_incomplete` (or, when the bank allows it, the masked form `*****1234`).
 */

function kindOf(entity: Record<string, unknown>): 'EIN' | 'SSN' {
  return 'ein' in entity || 'einLast4' in entity ? 'EIN' : 'SSN';
}

function entityArg(entity: unknown): Record<string, unknown> {
  if (entity === null || typeof entity !== 'object' || Array.isArray(entity)) {
    throw new HelperIssue('mapping', `expected a business or person, got ${describe(entity)}`, 0);
  }
  return entity as Record<string, unknown>;
}

function label(entity: Record<string, unknown>): string {
  return typeof entity['id'] === 'string' ? ` of ${entity['id']}` : '';
}

function fullDigits(entity: Record<string, unknown>): string | null {
  const raw = entity['ein'] ?? entity['ssn'];
  if (raw === undefined || raw === null || raw === '') return null;
  if (typeof raw !== 'string' && typeof raw !== 'number')
    throw new HelperIssue('mapping', `tax id${label(entity)} is not text`, 0);
  const digits = String(raw).replace(/[\s-]/g, '');
  // A masked value in the full field (e.g. "*****6789") is not a full tax id.
  if (/^[*xX•]+\d{4}$/.test(digits)) return null;
  if (!/^\d{9}$/.test(digits)) throw new HelperIssue('mapping', `tax id${label(entity)} is not 9 digits`, 0);
  return digits;
}

export function last4(entity: unknown): string | undefined {
  const e = entityArg(entity);
  const full = fullDigits(e);
  if (full) return full.slice(-4);
  const l4 = e['einLast4'] ?? e['ssnLast4'];
  if (l4 === undefined || l4 === null || l4 === '') return undefined;
  if (typeof l4 !== 'string' && typeof l4 !== 'number')
    throw new HelperIssue('mapping', `last 4 digits of the tax id${label(e)} are not text`, 0);
  const digits = String(l4).replace(/\D/g, '');
  if (digits.length !== 4)
    throw new HelperIssue('mapping', `last 4 digits of the tax id${label(e)} are not 4 digits`, 0);
  return digits;
}

export function hasFullTin(entity: unknown): boolean {
  return fullDigits(entityArg(entity)) !== null;
}

export function tinType(entity: unknown): 'EIN' | 'SSN' {
  return kindOf(entityArg(entity));
}

/** `$tin(entity[, format])`: 9 digits, or formatted "12-3456789" (EIN) / "123-45-6789" (SSN) with format "dashed". */
export function tin(entity: unknown, format: unknown, allowLast4: boolean): string {
  const e = entityArg(entity);
  const full = fullDigits(e);
  if (full) {
    if (format === 'dashed')
      return kindOf(e) === 'EIN'
        ? `${full.slice(0, 2)}-${full.slice(2)}`
        : `${full.slice(0, 3)}-${full.slice(3, 5)}-${full.slice(5)}`;
    if (format !== undefined && format !== null && format !== 'digits')
      throw new HelperIssue('mapping', `tin format must be "digits" or "dashed", got ${describe(format)}`, 1);
    return full;
  }
  const l4 = last4(e);
  const kind = kindOf(e);
  if (l4 === undefined)
    throw new HelperIssue(
      'tin_incomplete',
      `no ${kind}${label(e)}: the platform sent neither the full number nor its last 4 digits`,
      0,
    );
  if (!allowLast4) {
    throw new HelperIssue(
      'tin_incomplete',
      `full ${kind}${label(e)} required but only the last 4 digits are known (grant the API key ` +
        `read:${kind === 'EIN' ? 'businesses:ein' : 'people:ssn'} or set mappings.allowLast4Tin)`,
      0,
    );
  }
  return `*****${l4}`;
}
