/**
 * Issue 43 F7: a core error body that echoes a tax id (`errorSource: 123456789`) kept it in the
 * error message and in the log line (the log scrubber had no bare 9-digit rule); the stored text
 * was masked by another scrubber. One scrubber with one rule set now serves all three: the
 * message the adapter throws, the log line that carries it, and the quarantine text stored.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FineractHttp } from '../../../src/core/fineract/http.js';
import { MambuHttp } from '../../../src/core/mambu/http.js';
import { createLogger } from '../../../src/lib/logger.js';
import { redactForStorage } from '../../../src/lib/redact.js';

let server: Server;
let base = '';
const TIN = '123456789';

beforeAll(async () => {
  server = createServer((req, res) => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(
      req.url?.startsWith('/api/')
        ? JSON.stringify({ errors: [{ errorCode: 4, errorReason: 'INVALID_TAX_ID', errorSource: TIN }] })
        : JSON.stringify({
            errors: [
              { defaultUserMessage: `taxId 12-3456789 and ${TIN} already used`, parameterName: 'tin' },
            ],
          }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));

function logged(err: unknown): string {
  let text = '';
  const log = createLogger({
    level: 'info',
    destination: new Writable({
      write(c: Buffer, _e, cb) {
        text += c.toString();
        cb();
      },
    }),
  });
  log.warn({ err, detail: { message: (err as Error).message } }, `board failed: ${(err as Error).message}`);
  return text;
}

describe('a tax id echoed by a core error body (issue 43 F7)', () => {
  it('Mambu: not in the error message, the log line or the stored quarantine text', async () => {
    const http = new MambuHttp({
      baseUrl: `${base}/api`,
      auth: { apiKey: 'k' },
      timeoutMs: 5000,
      insecureTls: false,
    });
    const err = await http.post('/clients', { body: { a: 1 } }).catch((e: unknown) => e);
    await http.close();
    const message = (err as Error).message;
    expect(message).toContain('INVALID_TAX_ID: [redacted-tin]');
    for (const text of [message, logged(err), redactForStorage(message)]) expect(text).not.toContain(TIN);
  });

  it('Fineract: the same, dashed and bare forms', async () => {
    const http = new FineractHttp({
      baseUrl: `${base}/fineract-provider/api/v1`,
      username: 'u',
      password: 'p',
      tenantId: 'default',
      timeoutMs: 5000,
      insecureTls: false,
    });
    const err = await http.post('/clients', { body: { a: 1 } }).catch((e: unknown) => e);
    await http.close();
    const message = (err as Error).message;
    for (const text of [message, logged(err), redactForStorage(message)]) {
      expect(text).not.toContain(TIN);
      expect(text).not.toContain('12-3456789');
    }
  });
});
