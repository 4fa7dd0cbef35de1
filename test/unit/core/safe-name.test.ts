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
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 300 }), (a, b) => {
        expect(isSafeComponent(safeFileName(a))).toBe(true);
        expect(isSafeComponent(safeId(a))).toBe(true);
        expect(isSafeComponent(documentFileName(a, b))).toBe(true);
        if (a !== b) expect(safeId(a)).not.toBe(safeId(b));
      }),
      { numRuns: 500 },
    );
  });
});
