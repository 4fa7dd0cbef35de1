import { describe, expect, it } from 'vitest';
import {
  REDACT_PATHS,
  isSecretField,
  maskTins,
  redactForStorage,
  redactPayload,
  redactUrl,
  scrubDeep,
  scrubText,
} from '../../../src/lib/redact.js';
import { maskRecords } from '../../../src/pipeline/mapping-input.js';

describe('redaction: one module, one set of patterns', () => {
  it('scrubText (logs): keys, webhook secrets, bearer tokens, presigned queries and dashed tax ids', () => {
    const text =
      'key pk_live_AbC123 test sk_test_x-y secret whsec_abc+/= auth Bearer eyJ.a.b url https://b.example/doc/1?X-Sig=SIG&exp=1 ein 12-3456789 ssn 123-45-6789';
    const out = scrubText(text);
    for (const secret of [
      'AbC123',
      'sk_test_x-y',
      'whsec_abc',
      'eyJ.a.b',
      'X-Sig',
      'SIG&exp',
      '12-3456789',
      '123-45-6789',
    ])
      expect(out).not.toContain(secret);
    expect(out).toContain('https://b.example/doc/1?[redacted]');
    // One tax-id rule set for every destination (issue 43 F7): a bare 9-digit run is masked in log
    // text too; amounts are logged as numbers, which no text rule touches.
    expect(scrubText('principal 123456789 cents')).toBe('principal [redacted-tin] cents');
    expect(scrubDeep({ principalCents: 123456789 })).toEqual({ principalCents: 123456789 });
    expect(scrubText('loan L-1 boarded in 3 ms')).toBe('loan L-1 boarded in 3 ms');
    // A dashed tax id inside a longer number or id is not a tax id.
    expect(scrubText('ref 9912-3456789 and 123-45-67890')).toBe('ref 9912-3456789 and 123-45-67890');
  });

  it('redactForStorage leaves identifiers whose characters include nine digits in a row (regression: a console request id r-d3234f079693679d was stored as r-d3234f[redacted-tin]d)', () => {
    const ids = [
      'r-d3234f079693679d',
      '3f2a9c1e-0b7d-4e21-9a55-123456789abc',
      'ln_123456789x',
      'ＩＤ123456789',
    ];
    for (const id of ids) expect(redactForStorage(`request ${id} approved`)).toBe(`request ${id} approved`);
    // A tax id as a token of its own is still redacted, whatever surrounds it.
    expect(redactForStorage('tin:123456789; (987654321) x-123456789-y')).toBe(
      'tin:[redacted-tin]; ([redacted-tin]) x-[redacted-tin]-y',
    );
  });

  it('redactForStorage: everything scrubText does, plus bare 9-digit tax ids (not longer numbers or decimals)', () => {
    expect(redactForStorage('ein 123456789, ssn 123-45-6789, key pk_test_zz')).toBe(
      'ein [redacted-tin], ssn [redacted-tin], key [redacted-key]',
    );
    expect(redactForStorage('amount 1234567890123 rate 0.123456789')).toBe(
      'amount 1234567890123 rate 0.123456789',
    );
  });

  it('maskTins (mapping issues): a full tax id shows only its last 4', () => {
    expect(maskTins('got "123-45-6789" and 987654321 and 12-3456789')).toBe(
      'got "*****6789" and *****4321 and *****6789',
    );
    expect(maskTins('amount 1234567890123')).toBe('amount 1234567890123');
  });

  it('redactPayload: secret fields by name whatever their type, strings redacted, depth bounded', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 20; i++) deep = { next: deep };
    const out = redactPayload({
      ein: 123456789,
      SSN: '123-45-6789',
      apiKey: 'pk_live_x',
      note: 'tin 987654321',
      amount: 123456789,
      empty: '',
      deep,
    }) as Record<string, unknown>;
    expect(out).toMatchObject({
      ein: '[redacted]',
      SSN: '[redacted]',
      apiKey: '[redacted]',
      note: 'tin [redacted-tin]',
      amount: 123456789,
      empty: '',
    });
    expect(JSON.stringify(out['deep'])).toContain('[truncated]');
    expect(JSON.stringify(out['deep'])).not.toContain('bottom');
  });

  it('redactPayload and scrubDeep keep structure and numbers, and flatten errors', () => {
    expect(redactPayload({ a: ['ssn 123-45-6789', 5], e: new Error('ein 123456789') })).toEqual({
      a: ['ssn [redacted-tin]', 5],
      e: { name: 'Error', message: 'ein [redacted-tin]' },
    });
    const logged = scrubDeep({ err: new Error('key pk_live_q') }) as {
      err: { type: string; message: string; stack: string };
    };
    expect(logged.err.type).toBe('Error');
    expect(logged.err.message).toBe('key [redacted-key]');
    expect(logged.err.stack).not.toContain('pk_live_q');
  });

  it('redactUrl: scheme, host and path; credentials and query hidden; not-a-URL scrubbed', () => {
    expect(redactUrl('https://u:pw@h.example/api?sig=1#frag')).toBe(
      'https://(hidden)@h.example/api?(hidden)',
    );
    expect(redactUrl(new URL('https://h.example:8443/api'))).toBe('https://h.example:8443/api');
    expect(redactUrl('not a url with pk_live_abc')).toBe('not a url with [redacted-key]');
  });

  it('the secret field names drive both the store and the logger', () => {
    for (const name of [
      'apiKey',
      'API_KEY',
      'password',
      'Ein',
      'ssn',
      'taxId',
      'tax_id',
      'authorization',
      'token',
    ])
      expect(isSecretField(name)).toBe(true);
    expect(isSecretField('einLast4')).toBe(false);
    expect(REDACT_PATHS).toContain('*.*.ssn');
    expect(REDACT_PATHS).toContain('headers["authorization"]');
  });
});

describe('records shown and kept (maskRecordFields)', () => {
  it('masks the fields that are tax ids, not every 9-digit value: a 9-digit CIF stays (the console showed [redacted-tin] for the bank’s own customer number)', () => {
    const records = [
      {
        type: 'customer',
        externalId: 'ent_1',
        fields: {
          cif: '123456789',
          accountNumber: 987654321,
          taxId: '111223333',
          taxIdType: 'SSN',
          taxIdLast4: '3333',
          note: 'was EIN 22-2333444 and SSN 111-22-3333',
          contact: { tax_id: '111223333' },
        },
      },
    ];
    const masked = maskRecords(records, {
      entities: { businesses: [{ id: 'b', ein: '222333444' }], people: [{ id: 'p', ssn: '111-22-3333' }] },
    });
    const f = masked[0]?.fields as Record<string, unknown>;
    expect(f['cif']).toBe('123456789');
    expect(f['accountNumber']).toBe(987654321);
    expect(f['taxId']).toBe('*****3333');
    expect(f['taxIdType']).toBe('SSN');
    expect(f['taxIdLast4']).toBe('3333');
    expect(f['contact']).toEqual({ tax_id: '*****3333' });
    expect(f['note']).toBe('was EIN [redacted-tin] and SSN [redacted-tin]');
    expect(JSON.stringify(masked)).not.toMatch(/111223333|222333444/);
  });

  it('a tax id of the loan put into a field of any name is masked there too', () => {
    const masked = maskRecords(
      [{ type: 'x', externalId: 'e', fields: { memo: 'ref 222333444', other: '222333444' } }],
      { entities: { businesses: [{ id: 'b', ein: '222333444' }], people: [] } },
    );
    expect(masked[0]?.fields).toEqual({ memo: 'ref [redacted-tin]', other: '[redacted-tin]' });
  });
  it('a loan’s tax id is masked in each spelling (dashes, spaces, none), and only where it stands alone', () => {
    const masked = maskRecords(
      [
        {
          type: 'x',
          externalId: 'e',
          fields: {
            a: 'ssn 123-45-6789, 123 45 6789, 12-3456789, 12 3456789, 123456789',
            b: 'not it: 1234567890 9123456789 123-45-67890 0-123-45-6789',
            c: 'another 9-digit value 987654321 stays, the loan’s 111 22 3333 goes',
          },
        },
      ],
      { entities: { businesses: [{ id: 'b', ein: '123456789' }], people: [{ id: 'p', ssn: '111223333' }] } },
    );
    expect(masked[0]?.fields).toEqual({
      a: 'ssn [redacted-tin], [redacted-tin], [redacted-tin], [redacted-tin], [redacted-tin]',
      b: 'not it: 1234567890 9123456789 123-45-67890 0-[redacted-tin]',
      c: 'another 9-digit value 987654321 stays, the loan’s [redacted-tin] goes',
    });
  });

  it('masks exactly what a pattern of each tax id’s own digits masks (seeded texts dense in digits and separators)', () => {
    // The reference: one pattern per tax id, as maskRecordFields compiled before issue 44.
    const own = (t: string): RegExp =>
      new RegExp(
        `(?<!\\d)${t.slice(0, 3)}[- ]?${t.slice(3, 5)}[- ]?${t.slice(5)}(?!\\d)|` +
          `(?<!\\d)${t.slice(0, 2)}[- ]?${t.slice(2)}(?!\\d)`,
        'g',
      );
    let seed = 7;
    const rand = (): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const pick = (s: string): string => s[Math.floor(rand() * s.length)] ?? '';
    for (let i = 0; i < 5000; i++) {
      const digits = '0123456789'.slice(0, 2 + Math.floor(rand() * 8));
      const tins = Array.from({ length: 1 + Math.floor(rand() * 3) }, () =>
        Array.from({ length: 9 }, () => pick(digits)).join(''),
      );
      let text = '';
      for (let k = Math.floor(rand() * 40); k > 0; k--) {
        const x = rand();
        const t = tins[Math.floor(rand() * tins.length)] ?? '';
        if (x < 0.1) {
          // The tax id in one of its spellings: groups 3-2-4 or 2-7, each gap `-`, a space or none.
          const groups =
            rand() < 0.5 ? [t.slice(0, 3), t.slice(3, 5), t.slice(5)] : [t.slice(0, 2), t.slice(2)];
          text += groups.reduce((a, g) => `${a}${['-', ' ', ''][Math.floor(rand() * 3)] ?? ''}${g}`);
        } else if (x < 0.8) text += pick(digits);
        else if (x < 0.9) text += pick('- ');
        else text += 'x';
      }
      let expected = text;
      for (const t of tins) expected = expected.replace(own(t), '[redacted-tin]');
      // The text has no dashed 3-2-4 / 2-7 run that is not the loan's (TIN_DASHED masks those too).
      const got = maskRecords([{ type: 'x', externalId: 'e', fields: { v: text } }], {
        entities: { businesses: tins.map((ein, n) => ({ id: `b${n}`, ein })), people: [] },
      })[0]?.fields['v'];
      expect(got, JSON.stringify({ text, tins })).toBe(
        expected.replace(/(?<![\d-])(\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?![\d-])/g, '[redacted-tin]'),
      );
    }
  });

  it('dashed values (dates, ids) stay as they are, and a dashed tax id or a secret among dashes is still masked', () => {
    const fields = {
      date: '2026-01-05',
      at: '2026-01-05T10:00:00Z',
      id: 'biz-0001-aa',
      uuid: '0b7e6c1e-9c1f-4a4e-8d52-1f0e2b3c4d5e',
      memo: 'ssn 111-22-3333 due 2026-01-05',
      key: 'sk_live_abc-def and 12-3456789',
      url: 'postgres://app:s3cret@db-1/x',
      auth: 'Bearer ab-cd',
    };
    const masked = maskRecords([{ type: 'x', externalId: 'e', fields }], null)[0]?.fields;
    expect(masked).toEqual({
      date: '2026-01-05',
      at: '2026-01-05T10:00:00Z',
      id: 'biz-0001-aa',
      uuid: '0b7e6c1e-9c1f-4a4e-8d52-1f0e2b3c4d5e',
      memo: 'ssn [redacted-tin] due 2026-01-05',
      key: '[redacted-key] and [redacted-tin]',
      url: expect.not.stringContaining('s3cret') as unknown,
      auth: 'Bearer [redacted]',
    });
  });
  it('the fast path (text without a trigger character) never lets a secret through', () => {
    const secrets = [
      'key pk_live_abcDEF123',
      'sk_test_x1',
      'whsec_c2VjcmV0',
      'postgres://app:s3cret@db/x',
      'https://files.example/doc?X-Amz-Signature=abc',
      'https://db.example/x?password=hunter2',
      'BEARER abc.def',
      'auth bearer xyz',
      'ein 12-3456789',
      'ssn 123-45-6789',
      '123456789',
    ];
    for (const s of secrets) expect(scrubText(s), s).not.toBe(s);
    for (const s of ['Acme Holdings LLC', 'term 36 months', '12345678', 'Main St. 12'])
      expect(scrubText(s)).toBe(s);
  });
});
