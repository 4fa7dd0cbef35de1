import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MambuCore } from '../../../src/core/mambu/mambu-core.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import { startFakeMambu } from '../../support/fake-mambu.js';
import { makePackage } from '../../unit/core/support.js';

/**
 * The mambu mapping set and the Mambu adapter together: every fixture the mapping boards
 * (expected.json with records) passes the fake Mambu's rules, twice without a duplicate, approved
 * and disbursed, with 0 refused requests. A mapping change that breaks a Mambu rule fails here with
 * Mambu's errorReason.
 */
const FIXTURES = join(import.meta.dirname, '../../../mappings/mambu/fixtures');
const cases = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => ({
    name: d.name,
    expected: JSON.parse(readFileSync(join(FIXTURES, d.name, 'expected.json'), 'utf8')) as {
      records?: MappedRecord[];
    },
  }))
  .filter((c) => Array.isArray(c.expected.records));

describe('mambu mapping fixtures board into the fake Mambu', () => {
  it('has fixtures to board', () => {
    expect(cases.length).toBeGreaterThan(10);
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
    const fake = await startFakeMambu();
    const core = new MambuCore({
      baseUrl: fake.url,
      auth: { username: 'approver', password: 'approver-pass' },
      disburseAuth: { username: 'disburser', password: 'disburser-pass' },
      timeoutMs: 5_000,
      insecureTls: false,
      approve: true,
      disburse: true,
      taxIdField: { clients: '_taxInformation_Clients.taxId', groups: '_taxInformation_Groups.taxId' },
      loanRefField: '_boarding_Loans.platformLoanId',
      timeZone: 'America/Chicago',
      documents: { maxBytes: 50 * 1024 * 1024, refused: 'skip' },
      logger: silentLogger(),
      clock: systemClock,
    });
    // Customers the match found in the core (existing): the bank's, there before the loan.
    for (const r of records.filter((x) => x.fields['existing'] === true)) {
      if (r.type === 'client')
        fake.seedClient({ id: String(r.fields['id']), firstName: 'Bank', lastName: 'Customer' });
      else fake.seedGroup({ id: String(r.fields['id']), groupName: `bank customer ${r.externalId}` });
    }
    const seeded = { clients: fake.clients.length, groups: fake.groups.length };
    try {
      await core.board(makePackage(loan.externalId, records, docs));
      await core.board(makePackage(loan.externalId, records, docs));
      expect(fake.refused()).toEqual([]);
      expect(fake.contractViolations).toEqual([]);
      expect(fake.clients).toHaveLength(
        seeded.clients + records.filter((r) => r.type === 'client' && r.fields['existing'] !== true).length,
      );
      expect(fake.groups).toHaveLength(
        seeded.groups + records.filter((r) => r.type === 'group' && r.fields['existing'] !== true).length,
      );
      expect(fake.loans).toHaveLength(1);
      expect(fake.loans[0]!.accountState).toBe('ACTIVE');
      expect(fake.loans[0]!.loanAmountText).toBe(String(loan.fields['loanAmount']));
      expect(fake.transactions).toHaveLength(1);
      expect(fake.documents).toHaveLength(docs.length);
    } finally {
      await core.close();
      await fake.close();
    }
  });
});
