import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { createDocumentFetcher, isExpiredAddress } from '../../../src/core/documents.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { PlatformApi } from '../../../src/platform/api.js';
import { PlatformError } from '../../../src/platform/errors.js';

/** Collects bytes, like a file stream would. */
class Collect extends Writable {
  chunks: Buffer[] = [];
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.chunks.push(chunk);
    cb();
  }
  get bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/**
 * A fake platform with the real client's download contract: streams into the sink (pipeline ends
 * it), and on a refused address destroys the sink and throws download.expired.
 */
function fakePlatform(content: Buffer, outcomes: Array<'expired' | 'ok' | 'not_found' | 'fail-midway'>) {
  const seen = { addresses: 0, downloads: [] as string[] };
  const platform = {
    getDownloadAddress(id: string) {
      seen.addresses += 1;
      return Promise.resolve({ url: `https://blobs.example/${id}?sig=${seen.addresses}`, expiresAt: null });
    },
    async download(url: string, sink: Writable, opts: { maxBytes: number }) {
      seen.downloads.push(url);
      const outcome = outcomes.shift() ?? 'ok';
      if (outcome === 'expired' || outcome === 'not_found') {
        sink.destroy();
        throw new PlatformError({
          code: outcome === 'expired' ? 'download.expired' : 'download.not_found',
          status: outcome === 'expired' ? 403 : 404,
          message: outcome,
        });
      }
      if (content.length > opts.maxBytes) {
        sink.destroy();
        throw new PlatformError({ code: 'download.too_large', message: 'too large' });
      }
      if (outcome === 'fail-midway') {
        sink.write(content.subarray(0, 3));
        sink.destroy();
        throw new PlatformError({ code: 'network', message: 'reset' });
      }
      await pipeline(Readable.from([content.subarray(0, 5), content.subarray(5)]), sink);
      return {
        sha256: createHash('sha256').update(content).digest('hex'),
        bytes: content.length,
        contentType: 'application/pdf',
      };
    },
  } as unknown as PlatformApi;
  return { platform, seen };
}

const CONTENT = Buffer.from('%PDF-1.4 some bytes of a document\n');
const doc = { id: 'doc_1', name: 'a.pdf', size: CONTENT.length };

describe('createDocumentFetcher', () => {
  it('streams the document into the sink and ends it', async () => {
    const { platform } = fakePlatform(CONTENT, ['ok']);
    const sink = new Collect();
    const res = await createDocumentFetcher(platform, { maxBytes: 1024, logger: silentLogger() })(doc, sink);
    expect(sink.bytes).toEqual(CONTENT);
    expect(sink.writableFinished).toBe(true);
    expect(res.bytes).toBe(CONTENT.length);
  });

  it('re-requests the address once when it expired, without destroying the sink or doubling bytes', async () => {
    const { platform, seen } = fakePlatform(CONTENT, ['expired', 'ok']);
    const sink = new Collect();
    await createDocumentFetcher(platform, { maxBytes: 1024, logger: silentLogger() })(doc, sink);
    expect(seen.addresses).toBe(2);
    expect(seen.downloads).toEqual([
      'https://blobs.example/doc_1?sig=1',
      'https://blobs.example/doc_1?sig=2',
    ]);
    expect(sink.bytes).toEqual(CONTENT);
  });

  it('gives up after a second expiry', async () => {
    const { platform, seen } = fakePlatform(CONTENT, ['expired', 'expired']);
    await expect(
      createDocumentFetcher(platform, { maxBytes: 1024, logger: silentLogger() })(doc, new Collect()),
    ).rejects.toMatchObject({ code: 'download.expired' });
    expect(seen.addresses).toBe(2);
  });

  it('does not retry other failures (not found, too large, or bytes already written)', async () => {
    for (const [outcomes, code, max] of [
      [['not_found'], 'download.not_found', 1024],
      [['ok'], 'download.too_large', 4],
      [['fail-midway'], 'network', 1024],
    ] as const) {
      const { platform, seen } = fakePlatform(CONTENT, [...outcomes]);
      await expect(
        createDocumentFetcher(platform, { maxBytes: max, logger: silentLogger() })(doc, new Collect()),
      ).rejects.toMatchObject({ code });
      expect(seen.addresses).toBe(1);
    }
  });

  it('recognises expired addresses', () => {
    expect(isExpiredAddress(new PlatformError({ code: 'download.expired', message: 'x' }))).toBe(true);
    expect(isExpiredAddress(new PlatformError({ code: 'download.failed', status: 410, message: 'x' }))).toBe(
      true,
    );
    expect(
      isExpiredAddress(new PlatformError({ code: 'download.not_found', status: 404, message: 'x' })),
    ).toBe(false);
    expect(isExpiredAddress(new Error('x'))).toBe(false);
  });
});
