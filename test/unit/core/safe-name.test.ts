import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { documentFileName, safeFileName, safeId } from '../../../src/core/safe-name.js';

function isSafeComponent(s: string): boolean {
  return (
    s.length > 0 &&
    s !== '.' &&
    s !== '..' &&
    !s.startsWith('.') &&
    ![...s].some((ch) => ch === '/' || ch === '\\' || ch === ':' || ch.charCodeAt(0) < 0x20) &&
    Buffer.byteLength(s) <= 200
  );
}

describe('safe names', () => {
  it('keeps plain ids and names readable', () => {
    expect(safeId('loan_01HX-9')).toBe('loan_01HX-9');
    expect(safeFileName('Tax Return 2024.pdf')).toBe('Tax Return 2024.pdf');
    expect(safeFileName('résumé (final) [v2].pdf')).toBe('résumé (final) _v2_.pdf');
    expect(safeFileName('契約書.pdf')).toBe('契約書.pdf');
    expect(documentFileName('doc_1', 'a.pdf')).toBe('doc_1__a.pdf');
  });

  it('neutralises hostile names', () => {
    expect(safeFileName('../../etc/passwd')).toBe('etc_passwd');
    expect(safeFileName('..')).toBe('document');
    expect(safeFileName('')).toBe('document');
    expect(safeFileName(null)).toBe('document');
    expect(safeFileName('CON')).toBe('_CON');
    expect(safeFileName('a\u0000b\u202e.exe')).toBe('a_b_.exe');
    const long = safeFileName(`${'x'.repeat(500)}.pdf`);
    expect(long.endsWith('.pdf')).toBe(true);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(120);
    expect(Buffer.byteLength(safeFileName('契'.repeat(200)))).toBeLessThanOrEqual(120);
    expect(safeId('../x')).toMatch(/^x~[0-9a-f]{12}$/);
    expect(safeId('..')).toMatch(/^id~[0-9a-f]{12}$/);
  });

  it('never yields an unsafe path component, and distinct ids never share a name', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 300 }),
        fc.string({ unit: 'binary', maxLength: 300 }),
        (a, b) => {
          expect(isSafeComponent(safeFileName(a))).toBe(true);
          expect(isSafeComponent(safeId(a))).toBe(true);
          expect(isSafeComponent(documentFileName(a, b))).toBe(true);
          if (a !== b) expect(safeId(a)).not.toBe(safeId(b));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('package names for the sandbox id shapes (issue 23)', () => {
  it('an id with ":" of 64 characters, a UUID and a 300-character id each get one safe, distinct, bounded name', () => {
    const colon = 'urn:lender:loan:Cs567cY:6inw:Ef5.Fpzbl9.vGxu-Sg29ZQd_wy0HFhqSd:F';
    expect(colon).toHaveLength(64);
    const uuid = '3f2b9c1e-7d4a-4b8e-9f00-1a2b3c4d5e6f';
    const long = `urn:x:${'a'.repeat(300)}`;
    const names = [colon, colon.replaceAll(':', '_'), uuid, long, `${long}b`].map(safeId);
    for (const n of names) expect(isSafeComponent(n), n).toBe(true);
    expect(new Set(names).size).toBe(names.length);
    // A UUID is a plain name: kept as it is, so an operator finds the package by the id.
    expect(safeId(uuid)).toBe(uuid);
    // ":" is not: a readable prefix and a hash (stable).
    expect(safeId(colon)).toMatch(/^urn_lender_loan_Cs567cY_6inw_Ef5_Fpzbl9[^~]*~[0-9a-f]{12}$/);
    expect(safeId(colon)).toBe(safeId(colon));
  });
});
