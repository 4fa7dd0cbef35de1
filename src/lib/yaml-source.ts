import {
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Document,
  type Node,
  type Scalar,
} from 'yaml';

export interface SourcePos {
  line: number;
  column: number;
}

export interface YamlProblem extends SourcePos {
  message: string;
}

/** A parsed YAML file that can turn any path of its content into file:line:column. */
export interface YamlSource {
  readonly file: string;
  readonly text: string;
  readonly value: unknown;
  readonly problems: YamlProblem[];
  /** Position of the value at path (or of the nearest existing parent). */
  posOf(path: readonly PropertyKey[]): SourcePos;
  /** Position of the key at path (for "unknown key" messages). */
  keyPosOf(path: readonly PropertyKey[]): SourcePos;
  /** The scalar node at path, if it is one (to locate inside an expression). */
  scalarAt(path: readonly PropertyKey[]): Scalar | undefined;
  /** Position of offset `i` inside the string value of the scalar at path. */
  posInScalar(path: readonly PropertyKey[], i: number): SourcePos;
}

function keyText(key: unknown): string {
  if (isScalar(key))
    return key.type === 'PLAIN' && typeof key.source === 'string' ? key.source : String(key.value);
  return String(key);
}

/** Text exactly as written for plain scalars (so 0012 and 1.50 survive), the value otherwise. */
function scalarText(node: Scalar): string | null {
  if (
    node.value === null &&
    (node.source === undefined || node.source === '' || node.source === '~' || node.source === 'null')
  )
    return null;
  if (node.type === 'PLAIN' && typeof node.source === 'string') return node.source;
  return String(node.value);
}

export function parseYamlSource(
  file: string,
  text: string,
  keepText: (path: readonly string[]) => boolean,
): YamlSource {
  const lineCounter = new LineCounter();
  const doc: Document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const pos = (offset: number): SourcePos => {
    const p = lineCounter.linePos(offset);
    return { line: p.line, column: p.col };
  };
  const problems: YamlProblem[] = [...doc.errors, ...doc.warnings].map((e) => ({
    ...pos(e.pos[0]),
    message: e.message.split('\n')[0] ?? e.message,
  }));

  const toJs = (node: unknown, path: string[]): unknown => {
    if (isAlias(node)) return toJs(node.resolve(doc), path);
    if (isMap(node)) {
      const out: Record<string, unknown> = {};
      for (const pair of node.items) {
        const k = keyText(pair.key);
        out[k] = toJs(pair.value, [...path, k]);
      }
      return out;
    }
    if (isSeq(node)) return node.items.map((item, i) => toJs(item, [...path, String(i)]));
    if (isScalar(node)) return keepText(path) ? scalarText(node) : node.value;
    return node ?? null;
  };
  const value = doc.errors.length > 0 ? undefined : toJs(doc.contents, []);

  /** Walks the node tree by path; returns the deepest node reached and the key node of the last step. */
  const walk = (path: readonly PropertyKey[]): { node: Node | null; key: Node | null; complete: boolean } => {
    let node = doc.contents;
    let key: Node | null = null;
    for (const step of path) {
      let next: Node | null | undefined;
      if (isAlias(node)) node = node.resolve(doc) ?? null;
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && keyText(p.key) === String(step));
        if (pair) {
          key = pair.key as Node;
          next = (pair.value as Node | null) ?? (pair.key as Node);
        }
      } else if (isSeq(node)) {
        next = node.items[Number(step)] as Node | undefined;
      }
      if (!next) return { node, key, complete: false };
      node = next;
    }
    return { node, key, complete: true };
  };
  const startOf = (node: Node | null): SourcePos =>
    node?.range ? pos(node.range[0]) : { line: 1, column: 1 };

  return {
    file,
    text,
    value,
    problems,
    posOf: (path) => startOf(walk(path).node),
    keyPosOf: (path) => {
      const w = walk(path);
      return startOf(w.complete ? (w.key ?? w.node) : w.node);
    },
    scalarAt: (path) => {
      const w = walk(path);
      return w.complete && isScalar(w.node) ? w.node : undefined;
    },
    posInScalar: (path, i) => {
      const w = walk(path);
      const node = w.complete && isScalar(w.node) ? w.node : undefined;
      if (!node?.range) return startOf(w.node);
      return offsetInScalar(text, node, i, pos);
    },
  };
}

/**
 * Maps an offset in a scalar's string value back to the file. Exact for one-line plain and
 * quoted scalars and for literal blocks (`|`); other multi-line styles point at the scalar's start.
 */
function offsetInScalar(text: string, node: Scalar, i: number, pos: (o: number) => SourcePos): SourcePos {
  const [start, valueEnd] = node.range as [number, number, number];
  const raw = text.slice(start, valueEnd);
  const value = typeof node.value === 'string' ? node.value : String(node.value);
  const offset = Math.max(0, Math.min(i, value.length));
  if (
    (node.type === 'PLAIN' || node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE') &&
    !raw.includes('\n')
  ) {
    return pos(start + (node.type === 'PLAIN' ? 0 : 1) + offset);
  }
  if (node.type === 'BLOCK_LITERAL') {
    const before = value.slice(0, offset);
    const lineIdx = before.split('\n').length - 1;
    const colInLine = offset - (before.lastIndexOf('\n') + 1);
    const headerEnd = text.indexOf('\n', start);
    if (headerEnd < 0) return pos(start);
    // content lines follow the header; find the indentation of the first non-empty one
    const contentLines = text.slice(headerEnd + 1, valueEnd).split('\n');
    const firstNonEmpty = contentLines.find((l) => l.trim() !== '') ?? '';
    const indent = firstNonEmpty.length - firstNonEmpty.trimStart().length;
    let o = headerEnd + 1;
    for (let l = 0; l < lineIdx && l < contentLines.length; l++) o += (contentLines[l]?.length ?? 0) + 1;
    return pos(o + indent + colInLine);
  }
  return pos(start);
}
