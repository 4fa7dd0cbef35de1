import type { Layout } from './layout.js';
import { encodeLine, renderRows } from './layout-render.js';
import type { MappedRecord } from './types.js';

/**
 * Compares a fixture's `expected-lines/<file>` with the lines its records render to (a first board,
 * no header or trailer), byte for byte in the file's encoding, and says which line differs.
 */
export function diffExpectedLines(layout: Layout, loanId: string, records: readonly MappedRecord[], expected: Readonly<Record<string, Uint8Array>>): string[] {
  const diffs: string[] = [];
  const decoder = new TextDecoder('latin1');
  for (const [name, want] of Object.entries(expected)) {
    const file = layout.files.find((f) => f.name === name);
    if (file === undefined) {
      diffs.push(`expected-lines/${name}: the layout declares no file ${name}`);
      continue;
    }
    let lines: string[];
    try {
      lines = renderRows(file, records, { loanId, kind: 'new' }).lines;
    } catch (err) {
      diffs.push(`expected-lines/${name}: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    const got = lines.map((l) => encodeLine(file, l));
    const wantLines = splitLines(want);
    for (let i = 0; i < Math.max(got.length, wantLines.length); i += 1) {
      const g = got[i];
      const w = wantLines[i];
      if (g !== undefined && w !== undefined && sameBytes(g, w)) continue;
      const show = (b: Uint8Array | undefined): string => (b === undefined ? '(no line)' : JSON.stringify(file.encoding === 'utf-8' ? new TextDecoder().decode(b) : decoder.decode(b)));
      diffs.push(`expected-lines/${name} line ${i + 1}: expected ${show(w)}, got ${show(g)}`);
    }
  }
  return diffs;
}

/** Lines with their endings: the ending is compared too (a CRLF file must end its records in CRLF). */
function splitLines(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const lf = 0x0a;
  let start = 0;
  for (let i = 0; i < bytes.length; i += 1) {
    if (bytes[i] === lf) {
      out.push(bytes.subarray(start, i + 1));
      start = i + 1;
    }
  }
  if (start < bytes.length) out.push(bytes.subarray(start));
  return out;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
