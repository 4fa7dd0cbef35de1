import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/lib/logger.js';

function capture(): { lines: () => string; stream: Writable } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return { lines: () => chunks.join(''), stream };
}

describe('logger redaction', () => {
  it('hides keys, auth headers, tax ids and presigned query strings wherever they appear', () => {
    const c = capture();
    const log = createLogger({ destination: c.stream, level: 'debug' });
    log.info({ apiKey: 'pk_live_SECRET1', headers: { authorization: 'Bearer pk_live_SECRET2' } }, 'call');
    log.info({ business: { ein: '12-3456789', einLast4: '6789' } }, 'entity');
    log.warn(
      { url: 'https://blob.example.com/doc/1?X-Sig=SIGSECRET&exp=1' },
      'download https://b.example.com/x?token=QSECRET',
    );
    log.error({ err: new Error('failed with key pk_test_SECRET3 for ssn 123-45-6789') }, 'boom');
    const text = c.lines();
    for (const secret of [
      'SECRET1',
      'SECRET2',
      'SECRET3',
      '12-3456789',
      '123-45-6789',
      'SIGSECRET',
      'QSECRET',
    ]) {
      expect(text).not.toContain(secret);
    }
    expect(text).toContain('6789'); // last 4 are fine to keep
    expect(text).toContain('https://blob.example.com/doc/1?[redacted]');
  });
});
