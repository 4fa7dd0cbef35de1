import { PassThrough, Readable, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { pumpInto } from '../../../src/platform/download.js';

/** A sink that takes each chunk after `delayMs` (backpressure at 4 bytes), or fails at `failAt` bytes. */
function slowSink(
  opts: { delayMs?: number; failAt?: number; highWaterMark?: number } = {},
): Writable & { got: Buffer[] } {
  const got: Buffer[] = [];
  let bytes = 0;
  const sink = new Writable({
    highWaterMark: opts.highWaterMark ?? 4,
    write(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (opts.failAt !== undefined && bytes >= opts.failAt) {
        setTimeout(() => cb(new Error('disk full')), 1);
        return;
      }
      got.push(chunk);
      setTimeout(() => cb(), opts.delayMs ?? 1);
    },
  });
  return Object.assign(sink, { got });
}

const chunks = (n: number): Buffer[] => Array.from({ length: n }, (_, i) => Buffer.from(`chunk${i};`));

describe('pumpInto: a download body into the core adapter’s sink', () => {
  it('writes every chunk in order with the sink’s backpressure, ends the sink and leaves no listener', async () => {
    const sink = slowSink({ delayMs: 2 });
    const errorListeners = sink.listenerCount('error');
    const seen: number[] = [];
    await pumpInto(Readable.from(chunks(30)), sink, (c) => seen.push(c.length));
    expect(Buffer.concat(sink.got).toString()).toBe(chunks(30).join(''));
    expect(seen).toHaveLength(30);
    expect(sink.writableFinished).toBe(true);
    expect(sink.listenerCount('error')).toBe(errorListeners);
    expect(sink.listenerCount('close')).toBe(0);
  });

  it('a sink that fails while the body is stalled stops it at once with the sink’s error', async () => {
    const body = new PassThrough();
    body.write(Buffer.alloc(8, 1)); // then nothing more: the body stalls
    // Room for the chunk: the write is taken at once and fails later, while the loop waits on the body.
    const sink = slowSink({ failAt: 8, highWaterMark: 1024 });
    const started = Date.now();
    await expect(pumpInto(body, sink, () => undefined)).rejects.toThrow('disk full');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(body.destroyed).toBe(true);
    expect(sink.destroyed).toBe(true);
  });

  it('onChunk throwing (the size cap) stops the body and destroys the sink with that error', async () => {
    const body = Readable.from(chunks(50));
    const sink = slowSink();
    let n = 0;
    const cap = (): void => {
      n += 1;
      if (n === 3) throw new Error('over the cap');
    };
    await expect(pumpInto(body, sink, cap)).rejects.toThrow('over the cap');
    expect(body.destroyed).toBe(true);
    expect(sink.destroyed).toBe(true);
    expect(sink.writableFinished).toBe(false);
  });

  it('an abort while waiting for the sink to drain rejects with the signal’s reason', async () => {
    const body = new PassThrough();
    for (const c of chunks(20)) body.write(c);
    const sink = slowSink({ delayMs: 10_000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('deadline')), 20);
    await expect(pumpInto(body, sink, () => undefined, ac.signal)).rejects.toThrow('deadline');
    expect(body.destroyed).toBe(true);
    expect(sink.destroyed).toBe(true);
  });

  it('a body that fails mid-stream rejects with its error and destroys the sink', async () => {
    const body = new PassThrough();
    body.write(Buffer.from('part'));
    setTimeout(
      () => body.destroy(Object.assign(new Error('socket hang up'), { code: 'UND_ERR_SOCKET' })),
      10,
    );
    const sink = slowSink();
    await expect(pumpInto(body, sink, () => undefined)).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect(sink.destroyed).toBe(true);
    expect(sink.writableFinished).toBe(false);
  });
});
