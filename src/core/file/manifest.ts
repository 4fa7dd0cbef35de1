import { createHash } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { CanonicalLoanFields } from '../port.js';

/** `manifest.json` of a boarding package: written last, describes every other file. */
export interface PackageManifest {
  formatVersion: 1;
  loanId: string;
  loanNumber: string | null;
  mappingVersion: string;
  connectorVersion: string;
  /** When this version of the package was written (ISO). */
  createdAt: string;
  /** When the loan was first boarded (kept across re-boards). */
  firstBoardedAt: string;
  /** Day of the CSV batch the loan belongs to (bank time zone), kept across re-boards. */
  batchDate: string;
  /** Platform values for reconciliation, in platform units. */
  source: CanonicalLoanFields;
  records: Array<{ type: string; externalId: string }>;
  documents: ManifestDocument[];
  /** Every file of the package except manifest.json, with its sha256 and size. */
  files: Array<{ path: string; sha256: string; bytes: number }>;
}

export interface ManifestDocument {
  documentId: string;
  /** The platform's name, verbatim (never used as a path). */
  name: string | null;
  /** Relative path inside the package (sanitised). */
  path: string;
  sha256: string;
  bytes: number;
  contentType: string | null;
  category: string | null;
  type: string | null;
  period: string | null;
  requirement: Record<string, unknown> | null;
  uploadedAt: string | null;
}

export const MANIFEST = 'manifest.json';

/** A package's manifest, or null when it has none. */
export function readManifest(dir: string): Promise<PackageManifest | null> {
  return new Promise((resolve) => resolve(readManifestSync(dir)));
}

/** readManifest without the thread pool: a few KB from the page cache (core/durable-fs.ts says why). */
export function readManifestSync(dir: string): PackageManifest | null {
  let text: string;
  try {
    text = readFileSync(join(dir, MANIFEST), 'utf8');
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return null;
    throw err;
  }
  return JSON.parse(text) as PackageManifest;
}

export function sha256File(path: string): Promise<{ sha256: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    let bytes = 0;
    createReadStream(path)
      .on('data', (c: Buffer | string) => {
        h.update(c);
        bytes += c.length;
      })
      .on('error', reject)
      .on('end', () => resolve({ sha256: h.digest('hex'), bytes }));
  });
}

async function listFiles(dir: string, base = dir): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await listFiles(p, base)));
    else out.push(relative(base, p).split(sep).join('/'));
  }
  return out;
}

/**
 * Checks a package against its manifest: every listed file exists with the listed size and
 * sha256, and no unlisted file is present. Used by tests and operators (a core import job can do
 * the same with `sha256sum`).
 */
export async function verifyPackage(dir: string): Promise<{ ok: boolean; problems: string[] }> {
  const manifest = await readManifest(dir);
  if (manifest === null) return { ok: false, problems: [`${MANIFEST} missing`] };
  const problems: string[] = [];
  const listed = new Set(manifest.files.map((f) => f.path));
  for (const f of manifest.files) {
    try {
      const actual = await sha256File(join(dir, f.path));
      if (actual.bytes !== f.bytes)
        problems.push(`${f.path}: size ${actual.bytes}, manifest says ${f.bytes}`);
      if (actual.sha256 !== f.sha256) problems.push(`${f.path}: sha256 differs from the manifest`);
    } catch (err) {
      problems.push(`${f.path}: ${(err as Error).message}`);
    }
  }
  for (const p of await listFiles(dir)) {
    if (p !== MANIFEST && !listed.has(p)) problems.push(`${p}: not listed in the manifest`);
  }
  return { ok: problems.length === 0, problems };
}
