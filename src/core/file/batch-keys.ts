import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';

/**
 * The open batches' lines in the state database are encrypted (issue 33): they carry full tax ids,
 * and a database row, once written, lives on in its WAL, its base backups and WAL archives however
 * it is deleted later. Each batch has its own AES-256-GCM key in a file under the core's directory
 * (`core.file.dir/.batch-keys/<batch id>.key`, owner-only), which already holds tax ids by design
 * (the sealed files); the key never enters the database. The seal writes the files, marks the batch
 * sealed, then deletes the key: every copy of the encrypted lines anywhere is unreadable from then on.
 *
 * Crash-safe: a key is on disk (fsynced) before any row encrypted with it can commit; it is deleted
 * only after the batch is sealed; a key a crash left behind for a sealed batch is swept at the next
 * start. Several processes (replicas on one shared core directory) agree on one key: it is created
 * with link(2), which fails when another process created it first, and then read.
 */
const FORMAT = 'v1:';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class BatchKeys {
  private readonly cache = new Map<string, Buffer>();
  readonly dir: string;

  /** dir: `.batch-keys` beside the batches' folder (never inside it, where the import job looks). */
  constructor(dir: string) {
    this.dir = dir;
  }

  private path(batchId: string): string {
    return join(this.dir, `${batchId}.key`);
  }

  /** The batch's key, created (durably) when it has none yet. Synchronous: called inside the store's transaction. */
  private key(batchId: string, create: boolean): Buffer {
    const cached = this.cache.get(batchId);
    if (cached) return cached;
    const path = this.path(batchId);
    let key: Buffer | null = null;
    try {
      key = readFileSync(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (key === null) {
      if (!create) {
        throw new Error(
          `batch ${batchId}: its key ${path} is missing, so its encrypted lines in the state ` +
            `database cannot be read; restore the file from the core directory's ` +
            `backup (without it the batch's lines must be boarded again)`,
        );
      }
      key = this.createKey(batchId);
    }
    if (key.length !== KEY_BYTES)
      throw new Error(`batch ${batchId}: ${path} is not a key (${key.length} bytes, expected ${KEY_BYTES})`);
    this.cache.set(batchId, key);
    return key;
  }

  private createKey(batchId: string): Buffer {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const path = this.path(batchId);
    const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    const fresh = randomBytes(KEY_BYTES);
    const fd = openSync(tmp, 'wx', 0o600);
    try {
      writeSync(fd, fresh);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      unlinkSync(tmp);
    }
    syncDir(this.dir);
    // Whoever linked first decides: read what is there.
    return readFileSync(path);
  }

  /** A batch's rows as stored: encrypted with its key (created now for a new batch). */
  seal(batchId: string, plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key(batchId, true), iv);
    cipher.setAAD(Buffer.from(batchId));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `${FORMAT}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  /** The rows of a batch as rendered. Rows stored before encryption (an upgrade mid-batch) are plain JSON. */
  open(batchId: string, stored: string): string {
    if (!stored.startsWith(FORMAT)) return stored;
    const raw = Buffer.from(stored.slice(FORMAT.length), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key(batchId, false), raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(batchId));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    );
  }

  /** A keyed digest of a loan's rows (a plain hash of lines with a tax id in them could be tested against guesses). */
  digest(batchId: string, text: string): string {
    return createHmac('sha256', this.key(batchId, true)).update(text).digest('hex');
  }

  /** Deletes a sealed batch's key: its lines in every copy of the database become unreadable. */
  destroy(batchId: string): void {
    this.cache.delete(batchId);
    rmSync(this.path(batchId), { force: true });
    try {
      syncDir(this.dir);
    } catch {
      // no key directory: nothing was ever encrypted here
    }
  }

  /** Batch ids with a key on disk (the start-up sweep deletes those of sealed batches). */
  batchesWithKeys(): string[] {
    try {
      return readdirSync(this.dir)
        .filter((n) => n.endsWith('.key'))
        .map((n) => n.slice(0, -'.key'.length));
    } catch {
      return [];
    }
  }
}

function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
