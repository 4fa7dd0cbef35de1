import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A test importer that polls the imaging folder the way OnBase's Document Import Processor does:
 * it takes a batch folder only once its ready marker exists, checks every file against the
 * manifest, reads the index, "imports" each record, then deletes the files and the marker last.
 * It fails loudly on anything a real importer would choke on: a record naming a missing file, a
 * checksum that differs, a folder with a marker but no index.
 */

export interface ImportedDocument {
  batch: string;
  fileName: string;
  sha256: string;
  keywords: Record<string, string>;
}

export interface ImporterOptions {
  dir: string;
  readyFile?: string;
  indexFile: string;
  format: 'tagged' | 'delimited';
  /** tagged: the begin-document line. */
  begin?: string;
  delimiter?: string;
  /** The keyword whose value names the file (tagged: the tag without separator; delimited: the column). */
  fileKeyword: string;
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Parses a tagged index: records start at `begin`; each line is `Tag: value`. */
export function parseTagged(text: string, begin: string): Array<Record<string, string>> {
  const out: Array<Record<string, string>> = [];
  let cur: Record<string, string> | null = null;
  for (const line of text.split('\r\n')) {
    if (line === begin) {
      cur = {};
      out.push(cur);
      continue;
    }
    if (cur === null || line === '') continue;
    const i = line.indexOf(': ');
    if (i < 0) throw new Error(`index line without a tag separator: ${JSON.stringify(line)}`);
    cur[line.slice(0, i)] = line.slice(i + 2);
  }
  return out;
}

/** Parses a delimited index with a header row (quotes doubled inside quoted cells). */
export function parseDelimited(text: string, delimiter: string): Array<Record<string, string>> {
  const lines = text.split('\r\n').filter((l) => l !== '');
  const split = (l: string): string[] => {
    const cells: string[] = [];
    let cur = '';
    let quoted = false;
    for (let i = 0; i < l.length; i += 1) {
      const ch = l[i] as string;
      if (quoted) {
        if (ch === '"' && l[i + 1] === '"') {
          cur += '"';
          i += 1;
        } else if (ch === '"') quoted = false;
        else cur += ch;
      } else if (ch === '"') quoted = true;
      else if (ch === delimiter) {
        cells.push(cur);
        cur = '';
      } else cur += ch;
    }
    cells.push(cur);
    return cells;
  };
  const head = split(lines[0] ?? '');
  return lines.slice(1).map((l) => Object.fromEntries(split(l).map((v, i) => [head[i] ?? `c${i}`, v])));
}

export class TestImporter {
  readonly imported: ImportedDocument[] = [];
  readonly batches: string[] = [];
  private readonly ready: string;

  constructor(private readonly o: ImporterOptions) {
    this.ready = o.readyFile ?? 'READY';
  }

  /** One poll: imports every complete batch folder; returns how many it took. */
  poll(): number {
    if (!existsSync(this.o.dir)) return 0;
    let n = 0;
    for (const name of readdirSync(this.o.dir).sort()) {
      const dir = join(this.o.dir, name);
      if (name.startsWith('.') || !statSync(dir).isDirectory()) continue;
      if (!existsSync(join(dir, this.ready))) continue;
      this.importBatch(name, dir);
      n += 1;
    }
    return n;
  }

  private importBatch(batch: string, dir: string): void {
    const manifest = readFileSync(join(dir, 'manifest.sha256'), 'utf8');
    const sums = new Map<string, string>();
    for (const line of manifest.split('\n').filter(Boolean)) {
      const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
      if (!m) throw new Error(`${batch}: bad manifest line ${JSON.stringify(line)}`);
      if (sums.has(m[2] as string)) throw new Error(`${batch}: ${m[2]} twice in the manifest`);
      sums.set(m[2] as string, m[1] as string);
    }
    if (!sums.has(this.o.indexFile)) throw new Error(`${batch}: the manifest has no line for the index`);
    for (const [file, sum] of sums) {
      const got = sha256(readFileSync(join(dir, file)));
      if (got !== sum) throw new Error(`${batch}/${file}: sha256 ${got}, manifest ${sum}`);
    }
    // The folder holds exactly what the manifest names, the manifest and the marker: no temp file,
    // nothing left over, nothing missing.
    const present = readdirSync(dir)
      .filter((f) => f !== this.ready && f !== 'manifest.sha256')
      .sort();
    const named = [...sums.keys()].sort();
    if (JSON.stringify(present) !== JSON.stringify(named))
      throw new Error(`${batch}: files ${JSON.stringify(present)}, manifest ${JSON.stringify(named)}`);
    const text = readFileSync(join(dir, this.o.indexFile), 'utf8');
    const records =
      this.o.format === 'tagged'
        ? parseTagged(text, this.o.begin ?? 'BEGIN:')
        : parseDelimited(text, this.o.delimiter ?? '|');
    const took: ImportedDocument[] = [];
    for (const r of records) {
      const ref = r[this.o.fileKeyword];
      if (ref === undefined) throw new Error(`${batch}: a record without ${this.o.fileKeyword}`);
      const fileName = ref.split(/[\\/]/).pop() as string;
      if (!sums.has(fileName)) throw new Error(`${batch}: the index names ${fileName}, not in the manifest`);
      const bytes = readFileSync(join(dir, fileName));
      took.push({ batch, fileName, sha256: sha256(bytes), keywords: r });
    }
    const indexed = took.map((d) => d.fileName).sort();
    const documents = named.filter((f) => f !== this.o.indexFile);
    if (JSON.stringify(indexed) !== JSON.stringify(documents))
      throw new Error(
        `${batch}: the index names ${JSON.stringify(indexed)}, the manifest ${JSON.stringify(documents)}`,
      );
    this.imported.push(...took);
    // Everything but the marker, then the marker, then the folder: a crash of the importer leaves a
    // folder the connector recognises as taken (no manifest) or still whole.
    for (const f of readdirSync(dir)) if (f !== this.ready) rmSync(join(dir, f), { force: true });
    rmSync(join(dir, this.ready), { force: true });
    rmdirSync(dir);
    this.batches.push(batch);
  }
}
