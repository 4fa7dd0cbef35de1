import { readdirSync, readFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import { startFakeFineract } from '../../support/fake-fineract.js';
import { makePackage } from '../../unit/core/support.js';

/**
 * The fineract mapping set and the Fineract adapter together: every fixture the mapping boards
 * (expected.json with records) must pass the fake core's validation rules, twice without a
 * duplicate. A mapping change that breaks a Fineract rule fails here with Fineract's message.
 */
const FIXTURES = join(import.meta.dirname, '../../../mappings/fineract/fixtures');
const cases = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => ({
    name: d.name,
    expected: JSON.parse(readFileSync(join(FIXTURES, d.name, 'expected.json'), 'utf8')) as {
      records?: MappedRecord[];
    },
  }))
  .filter((c) => Array.isArray(c.expected.records));

describe('fineract mapping fixtures board into the fake Fineract', () => {
  it('has fixtures to board', () => {
    expect(cases.length).toBeGreaterThan(3);
  });

  it.each(cases)('$name', async ({ expected }) => {
    const records = expected.records!;
    const loan = records.find((r) => r.type === 'loan')!;
    const docs = records
      .filter((r) => r.type === 'document')
      .map((r) => ({
        id: r.externalId,
        name: typeof r.fields['name'] === 'string' ? r.fields['name'] : null,
        bytes: Buffer.from(`bytes of ${r.externalId}`),
      }));
    const fake = await startFakeFineract();
    const core = new FineractCore({
      clock: systemClock,
      baseUrl: fake.url,
      username: fake.username,
      password: fake.password,
      tenantId: fake.tenantId,
      officeId: 1,
      timeoutMs: 5_000,
      insecureTls: false,
      approve: true,
      disburse: false,
      logger: silentLogger(),
    });
    // Clients the customer match found in the core (clientId): the bank's, there before the loan.
    const matched = records
      .filter((r) => r.type === 'client' && r.fields['clientId'] !== undefined)
      .sort((a, b) => Number(a.fields['clientId']) - Number(b.fields['clientId']));
    for (const m of matched)
      expect(fake.seedClient({ fullname: `bank customer ${m.externalId}` }).id).toBe(
        Number(m.fields['clientId']),
      );
    try {
      const first = await core.board(makePackage(loan.externalId, records, docs));
      await core.board(makePackage(loan.externalId, records, docs));
      const clientIds = records
        .filter((r) => r.type === 'client' && r.fields['clientId'] === undefined)
        .map((r) => r.externalId);
      expect(
        fake.clients
          .filter((c) => c.externalId !== null)
          .map((c) => c.externalId)
          .sort(),
      ).toEqual([...new Set(clientIds)].sort());
      expect(fake.clients).toHaveLength(clientIds.length + matched.length);
      expect(fake.loans.map((l) => l.externalId)).toEqual([loan.externalId]);
      expect(fake.loans[0]!.statusId).toBe(200);
      expect(fake.guarantors).toHaveLength(records.filter((r) => r.type === 'guarantor').length);
      expect(fake.documents).toHaveLength(docs.length);
      expect(first.coreReference).toBe(String(fake.loans[0]!.id));
    } finally {
      await core.close();
      await fake.close();
    }
  });
});
