import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Clock } from '../../lib/clock.js';
import type { CustomerKeys } from '../../lib/customer-keys.js';
import { errorMessage } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import { parseCsvLine } from '../../lib/csv.js';
import {
  CustomerSourceUnavailableError,
  type CustomerDirectory,
  type CustomerQuery,
  type ExistingCustomer,
} from '../port.js';

/** Where each field is in the bank's extract: a header name, or a 1-based column position. */
export interface ExtractLayout {
  header: boolean;
  delimiter: string;
  columns: {
    cif: string | number;
    tin: string | number;
    name: string | number;
    birthOrFormationDate?: string | number | undefined;
  };
}

export const DEFAULT_EXTRACT_LAYOUT: ExtractLayout = {
  header: true,
  delimiter: ',',
  columns: { cif: 'cif', tin: 'tin', name: 'name', birthOrFormationDate: 'birth_or_formation_date' },
};

export interface CustomerExtractOptions {
  path: string;
  maxAgeHours: number;
  layout: ExtractLayout;
  keys: CustomerKeys;
  clock: Clock;
  logger: Logger;
}

/** One customer of the extract, by keyed hashes only (never the tax id, never the whole row). */
interface Entry {
  cif: string;
  nameHash: string;
}

interface Loaded {
  mtimeMs: number;
  size: number;
  sha256: string;
  customers: number;
  skipped: number;
  index: Map<string, Entry | Entry[]>;
}

/** Lines reported one by one; beyond this only the count. */
const REPORTED_LINES = 20;

/**
 * The bank's customer extract for the file core: a CSV the bank drops (CIF, tax id, name, optional
 * date of birth or formation), read into an index keyed by the tax id's keyed hash → CIF and a
 * name fingerprint, so a match is one map look-up whatever the extract's size, and memory holds
 * hashes, not rows. The file is re-read when its mtime or size changes (and swapped in only when
 * its content hash changed). A missing, unreadable or stale (older than maxAgeHours) extract
 * makes every look-up throw CustomerSourceUnavailableError: the loan waits, it never boards as
 * "no existing customer". A malformed line is reported with file:line and skipped.
 */
export class CustomerExtract implements CustomerDirectory {
  private loaded: Loaded | null = null;
  private problem: { code: string; message: string } | null = null;
  private checking: Promise<void> | null = null;
  private lastMtimeMs: number | null = null;

  constructor(private readonly opts: CustomerExtractOptions) {}

  async findByTin(q: CustomerQuery): Promise<ExistingCustomer[]> {
    await this.refresh();
    const loaded = this.usable();
    const hit = loaded.index.get(q.tinHash);
    if (hit === undefined) return [];
    const entries = Array.isArray(hit) ? hit : [hit];
    const nameHash = this.opts.keys.nameHash(q.name);
    const byCif = new Map<string, ExistingCustomer>();
    for (const e of entries) {
      const agrees = e.nameHash === nameHash;
      const prev = byCif.get(e.cif);
      byCif.set(e.cif, { cif: e.cif, nameAgrees: (prev?.nameAgrees ?? false) || agrees });
    }
    return [...byCif.values()];
  }

  status(): { ok: boolean; detail: string } {
    try {
      const l = this.usable();
      return {
        ok: true,
        detail:
          `customer extract ${this.opts.path}: ${l.customers} ` +
          `customers${l.skipped > 0 ? `, ${l.skipped} malformed line(s) skipped` : ''}`,
      };
    } catch (err) {
      return { ok: false, detail: errorMessage(err) };
    }
  }

  /** The loaded index if it is fresh enough to answer "no such customer"; throws otherwise. */
  private usable(): Loaded {
    if (this.problem !== null)
      throw new CustomerSourceUnavailableError(this.problem.code, this.problem.message);
    const loaded = this.loaded;
    if (loaded === null)
      throw new CustomerSourceUnavailableError(
        'customers.extract_missing',
        `customer extract ${this.opts.path} has not been read yet`,
      );
    const ageMs = this.opts.clock.now() - loaded.mtimeMs;
    if (ageMs > this.opts.maxAgeHours * 3_600_000) {
      throw new CustomerSourceUnavailableError(
        'customers.extract_stale',
        `customer extract ${this.opts.path} is ${(ageMs / 3_600_000).toFixed(1)} h old, older than ` +
          `customers.extract.maxAgeHours (${this.opts.maxAgeHours}); ` +
          `loans with customers wait until the bank drops a fresh one`,
      );
    }
    return loaded;
  }

  /** Re-reads the file when it changed since the last look (one stat per call; concurrent calls share it). */
  refresh(): Promise<void> {
    this.checking ??= this.check().finally(() => {
      this.checking = null;
    });
    return this.checking;
  }

  private async check(): Promise<void> {
    let st;
    try {
      st = await stat(this.opts.path);
    } catch (err) {
      const code =
        (err as { code?: string }).code === 'ENOENT'
          ? 'customers.extract_missing'
          : 'customers.extract_unreadable';
      this.fail(
        code,
        `customer extract ${this.opts.path}: ` +
          `${code === 'customers.extract_missing' ? 'no such file' : errorMessage(err)}; ` +
          `loans with customers wait (customers.extract.path)`,
      );
      return;
    }
    if (
      this.loaded !== null &&
      this.problem === null &&
      st.mtimeMs === this.lastMtimeMs &&
      st.size === this.loaded.size
    )
      return;
    if (
      this.problem !== null &&
      st.mtimeMs === this.lastMtimeMs &&
      this.problem.code !== 'customers.extract_missing'
    )
      return;
    this.lastMtimeMs = st.mtimeMs;
    try {
      const next = await this.read(st.mtimeMs, st.size);
      if (this.loaded !== null && next.sha256 === this.loaded.sha256) {
        this.loaded.mtimeMs = next.mtimeMs;
      } else {
        this.loaded = next;
        this.opts.logger.info(
          { path: this.opts.path, customers: next.customers, skipped: next.skipped },
          'customer extract read',
        );
      }
      if (this.problem !== null)
        this.opts.logger.info({ path: this.opts.path }, 'customer extract usable again');
      this.problem = null;
    } catch (err) {
      this.fail(
        'customers.extract_unreadable',
        `customer extract ${this.opts.path} cannot be read: ${errorMessage(err)}; loans with customers wait`,
      );
    }
  }

  private fail(code: string, message: string): void {
    if (this.problem?.message !== message) this.opts.logger.warn({ path: this.opts.path, code }, message);
    this.problem = { code, message };
  }

  private async read(mtimeMs: number, size: number): Promise<Loaded> {
    const { layout, keys, path, logger } = this.opts;
    const hash = createHash('sha256');
    const index = new Map<string, Entry | Entry[]>();
    let customers = 0;
    let skipped = 0;
    const report = (line: number, why: string): void => {
      skipped += 1;
      if (skipped <= REPORTED_LINES)
        logger.warn({ at: `${path}:${line}` }, `customer extract ${path}:${line}: ${why}; line skipped`);
    };
    let positions: { cif: number; tin: number; name: number } | null = layout.header
      ? null
      : positionsOf(layout);
    const input = createReadStream(path);
    input.on('data', (chunk) => hash.update(chunk));
    const lines = createInterface({ input, crlfDelay: Infinity });
    let lineNo = 0;
    for await (const raw of lines) {
      lineNo += 1;
      const line = lineNo === 1 ? raw.replace(/^\uFEFF/, '') : raw;
      if (line.trim() === '') continue;
      const record = parseCsvLine(line, layout.delimiter);
      if (typeof record === 'string') {
        report(lineNo, `not CSV (${record})`);
        continue;
      }
      if (positions === null) {
        positions = headerPositions(layout, record, path);
        continue;
      }
      const cif = (record[positions.cif] ?? '').trim();
      const rawTin = record[positions.tin] ?? '';
      const name = record[positions.name] ?? '';
      if (cif === '') {
        report(lineNo, 'no CIF');
        continue;
      }
      const tinHash = keys.tinHash(rawTin);
      if (tinHash === null) {
        report(
          lineNo,
          rawTin.trim() === '' ? 'no tax id' : 'the tax id is not 9 digits (masked or malformed)',
        );
        continue;
      }
      const entry: Entry = { cif, nameHash: keys.nameHash(name) };
      const prev = index.get(tinHash);
      if (prev === undefined) index.set(tinHash, entry);
      else if (Array.isArray(prev)) prev.push(entry);
      else index.set(tinHash, [prev, entry]);
      customers += 1;
    }
    if (positions === null) throw new Error('the file is empty (no header line)');
    if (skipped > REPORTED_LINES)
      logger.warn(
        { path, skipped },
        `customer extract ${path}: ${skipped} malformed lines skipped in all (first ${REPORTED_LINES} reported)`,
      );
    return { mtimeMs, size, sha256: hash.digest('hex'), customers, skipped, index };
  }
}

function positionsOf(layout: ExtractLayout): { cif: number; tin: number; name: number } {
  const pos = (v: string | number, key: string): number => {
    if (typeof v !== 'number')
      throw new Error(
        `customers.extract.layout.columns.${key}: expected a column position (1, 2, …) when header is false`,
      );
    return v - 1;
  };
  return {
    cif: pos(layout.columns.cif, 'cif'),
    tin: pos(layout.columns.tin, 'tin'),
    name: pos(layout.columns.name, 'name'),
  };
}

function headerPositions(
  layout: ExtractLayout,
  header: string[],
  path: string,
): { cif: number; tin: number; name: number } {
  const names = header.map((h) => h.trim().toLowerCase());
  const find = (v: string | number, key: string): number => {
    if (typeof v === 'number') return v - 1;
    const i = names.indexOf(v.toLowerCase());
    if (i < 0)
      throw new Error(
        `${path}:1: no column "${v}" in the header ` +
          `(customers.extract.layout.columns.${key}); the header has: ${header.join(', ')}`,
      );
    return i;
  };
  return {
    cif: find(layout.columns.cif, 'cif'),
    tin: find(layout.columns.tin, 'tin'),
    name: find(layout.columns.name, 'name'),
  };
}
