import { createHash } from 'node:crypto';
import { createWriteStream, openAsBlob } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { FormData } from 'undici';
import type { PlatformDocument } from '../../contract/schemas.js';
import { CoreRejectedError, type CoreReceipt, type DocumentFetcher } from '../port.js';

/**
 * The document flow of the HTTP cores, written once: which documents go (the core's refusals
 * decided before any write), which the loan already holds (a `[doc:<id>]` marker in a text field
 * of each upload, since no core keeps an external id on documents), and the upload of the rest
 * from a spooled file of known size.
 */

export type DocumentReceipt = CoreReceipt['documents'][number];

/**
 * The marker of a document's upload: its platform id, or the id's digest when longer than 100
 * characters (or when it looks like a digest). A description or notes field is no path, so the
 * marker keeps the form earlier versions wrote and their uploads are recognised, not sent again.
 */
export function documentMarker(documentId: string): string {
  const ref =
    documentId.length <= 100 && !documentId.startsWith('sha256:')
      ? documentId
      : `sha256:${createHash('sha256').update(documentId, 'utf8').digest('base64url')}`;
  return `[doc:${ref}]`;
}

/** A text field (description, notes) of at most `max` characters ending in the document's marker. */
export function markedText(text: string, documentId: string, max = 1000): string {
  const marker = documentMarker(documentId);
  return `${text.slice(0, max - marker.length - 1)} ${marker}`.trim();
}

/** A document the loan already holds in the core: the text its marker is in, its size and id. */
export interface HeldDocument {
  text: string;
  bytes: number;
  coreId: string;
}

/**
 * Uploads each document the loan does not hold yet (its marker found in none of `held`); one that
 * is there is listed with its size and core id (sha256 unknown: '').
 */
export async function uploadMissingDocuments<U extends { doc: PlatformDocument }>(o: {
  uploads: readonly U[];
  held: () => Promise<HeldDocument[]>;
  upload: (u: U) => Promise<DocumentReceipt>;
  signal?: AbortSignal | undefined;
}): Promise<DocumentReceipt[]> {
  if (o.uploads.length === 0) return [];
  const held = await o.held();
  const out: DocumentReceipt[] = [];
  for (const u of o.uploads) {
    o.signal?.throwIfAborted();
    const marker = documentMarker(u.doc.id);
    const there = held.find((h) => h.text.includes(marker));
    out.push(
      there !== undefined
        ? { documentId: u.doc.id, sha256: '', bytes: there.bytes, coreId: there.coreId }
        : await o.upload(u),
    );
  }
  return out;
}

/** What the core decides about one document before anything is written: upload it, or refuse it. */
export type DocumentPlan<U> = { upload: U } | { reason: string; action: 'skip' | 'quarantine' };

/**
 * Every document's fate before any write, so a refused one never leaves half a loan: a document
 * to quarantine refuses the whole package, naming `key`; one to skip becomes a warning (a review
 * item on the receipt).
 */
export function triageDocuments<U>(
  docs: readonly PlatformDocument[],
  plan: (doc: PlatformDocument) => DocumentPlan<U>,
  key: string,
): { uploads: U[]; warnings: string[] } {
  const uploads: U[] = [];
  const warnings: string[] = [];
  for (const doc of docs) {
    const p = plan(doc);
    if ('upload' in p) uploads.push(p.upload);
    else if (p.action === 'quarantine') throw new CoreRejectedError(`${p.reason} (${key}: quarantine)`);
    else warnings.push(`${p.reason}; left out (${key}: skip)`);
  }
  return { uploads, warnings };
}

/** The multipart form of an upload: the text fields in order, then the spooled file. */
export async function uploadForm(
  fields: ReadonlyArray<readonly [string, string]>,
  file: { path: string; type: string; name: string },
): Promise<FormData> {
  const form = new FormData();
  for (const [k, v] of fields) form.append(k, v);
  form.append('file', await openAsBlob(file.path, { type: file.type }), file.name);
  return form;
}

export interface SpoolOptions {
  fetchDocument: DocumentFetcher;
  doc: PlatformDocument;
  spoolDir?: string | undefined;
  maxBytes: number;
  /** The refusal's text when the document is over the cap (it names the config key). */
  overCap: (bytes: number) => string;
  signal?: AbortSignal | undefined;
}

/** Spools the document (withSpooledDocument) and uploads it with `send`, which answers the core's id. */
export function uploadSpooled(
  o: SpoolOptions,
  send: (path: string, fetched: FetchedDocument) => Promise<string>,
): Promise<DocumentReceipt> {
  return withSpooledDocument(o, async (path, fetched) => ({
    documentId: o.doc.id,
    sha256: fetched.sha256,
    bytes: fetched.bytes,
    coreId: await send(path, fetched),
  }));
}

export type FetchedDocument = Awaited<ReturnType<DocumentFetcher>>;

/**
 * The HTTP cores upload a document as a file of known size, not a stream: it is fetched into a
 * private temporary file (under `spoolDir`, default the OS temp dir), checked against the core's
 * upload cap, handed to `upload`, and removed whatever happens.
 */
export async function withSpooledDocument<T>(
  o: SpoolOptions,
  upload: (path: string, fetched: FetchedDocument) => Promise<T>,
): Promise<T> {
  const dir = await mkdtemp(join(o.spoolDir ?? tmpdir(), 'boarding-doc-'));
  try {
    const path = join(dir, 'content');
    const sink = createWriteStream(path);
    let fetched: FetchedDocument;
    try {
      fetched = await o.fetchDocument(o.doc, sink, o.signal);
      if (!sink.writableEnded) sink.end();
      await finished(sink);
    } catch (err) {
      sink.destroy();
      throw err;
    }
    if (fetched.bytes > o.maxBytes) throw new CoreRejectedError(o.overCap(fetched.bytes));
    return await upload(path, fetched);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
