import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { fineractRecords, makePackage } from '../../unit/core/support.js';

let fake: FakeFineract | undefined;
let core: FineractCore | undefined;
afterEach(async () => {
  await core?.close();
  await fake?.close();
});

/**
 * The adapter's own guard, for a mapping that does not use the customer match: before creating a
 * client it searches Fineract for a client holding that client's tax id identifier and reuses it,
 * so Fineract never refuses the identifier (identityKey.duplicate) on a second client.
 */
describe('FineractCore: a client already holding the tax id is reused', () => {
  it('boards onto the existing client: no second client, no refused identifier', async () => {
    fake = await startFakeFineract();
    const teller = fake.seedClient({
      fullname: 'ACME TOOLS, L.L.C.',
      identifiers: [{ documentTypeId: 2, documentKey: '123456789' }],
    });
    core = new FineractCore({
      clock: systemClock,
      baseUrl: fake.url,
      username: fake.username,
      password: fake.password,
      tenantId: fake.tenantId,
      officeId: 1,
      timeoutMs: 5_000,
      insecureTls: false,
      approve: false,
      disburse: false,
      logger: silentLogger(),
    });
    const records: MappedRecord[] = [
      ...fineractRecords('loan_1'),
      {
        type: 'identifier',
        externalId: 'biz_loan_1:tin',
        fields: { clientExternalId: 'biz_loan_1', documentTypeId: 2, documentKey: '123456789' },
      },
    ];
    await core.board(makePackage('loan_1', records, []));
    expect(fake.writes().filter((w) => w.status >= 400)).toEqual([]);
    expect(fake.clients.filter((c) => c.fullname !== undefined)).toHaveLength(1);
    expect(fake.loans[0]!.clientId).toBe(teller.id);
    expect(fake.identifiers).toHaveLength(1);
  });
});
