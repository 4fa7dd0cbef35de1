import { createHash } from 'node:crypto';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BoardingPackage, DocumentFetcher } from '../../../src/core/port.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import type { PlatformDocument } from '../../../src/contract/schemas.js';

/** A fetcher over in-memory bytes (the platform side of a package), counting calls. */
export function memoryFetcher(contents: Map<string, Buffer>): DocumentFetcher & { calls: string[] } {
  const calls: string[] = [];
  const fetcher = async (doc: PlatformDocument, sink: Writable) => {
    calls.push(doc.id);
    const buf = contents.get(doc.id);
    if (buf === undefined)
      throw Object.assign(new Error(`no bytes for ${doc.id}`), { code: 'download.not_found' });
    await pipeline(Readable.from([buf]), sink);
    return {
      sha256: createHash('sha256').update(buf).digest('hex'),
      bytes: buf.length,
      contentType: 'application/pdf',
    };
  };
  return Object.assign(fetcher, { calls });
}

export function sha256(buf: Buffer | string): string {
  return createHash('sha256').update(buf).digest('hex');
}

/** Representative records of the fineract mapping set for one business loan with a guarantor. */
export function fineractRecords(
  loanId: string,
  opts: { borrower?: string; guarantor?: string; docIds?: string[] } = {},
): MappedRecord[] {
  const biz = opts.borrower ?? `biz_${loanId}`;
  const per = opts.guarantor ?? `per_${loanId}`;
  const fmt = { dateFormat: 'yyyy-MM-dd', locale: 'en' };
  return [
    {
      type: 'client',
      externalId: biz,
      fields: {
        legalFormId: 2,
        fullname: 'Acme Tools LLC',
        officeId: 1,
        active: true,
        activationDate: '2025-03-14',
        ...fmt,
        clientNonPersonDetails: { incorpNumber: 'TX-1' },
      },
    },
    {
      type: 'client',
      externalId: per,
      fields: {
        legalFormId: 1,
        firstname: 'Ann',
        lastname: 'Lee',
        officeId: 1,
        active: true,
        activationDate: '2025-03-14',
        ...fmt,
      },
    },
    {
      type: 'loan',
      externalId: loanId,
      fields: {
        clientExternalId: biz,
        productId: 1,
        principal: '1250000.50',
        loanTermFrequency: 60,
        loanTermFrequencyType: 2,
        loanType: 'individual',
        numberOfRepayments: 60,
        repaymentEvery: 1,
        repaymentFrequencyType: 2,
        interestRatePerPeriod: 7.25,
        amortizationType: 1,
        interestType: 0,
        interestCalculationPeriodType: 1,
        transactionProcessingStrategyCode: 'mifos-standard-strategy',
        expectedDisbursementDate: '2025-03-14',
        submittedOnDate: '2025-03-14',
        repaymentsStartingFromDate: '2025-04-14',
        ...fmt,
      },
    },
    {
      type: 'guarantor',
      externalId: `${loanId}:${per}`,
      fields: { clientExternalId: per, loanExternalId: loanId, guarantorTypeId: 1 },
    },
    ...(opts.docIds ?? []).map((id) => ({
      type: 'document',
      externalId: id,
      fields: {
        name: `Document ${id}`,
        description: 'financials 2024',
        category: 'financials',
        period: '2024',
      },
    })),
  ];
}

export function makePackage(
  loanId: string,
  records: MappedRecord[],
  documents: Array<{ id: string; name: string | null; bytes: Buffer }> = [],
  extra: Partial<BoardingPackage> = {},
): BoardingPackage & { fetchDocument: ReturnType<typeof memoryFetcher> } {
  const fetchDocument = memoryFetcher(new Map(documents.map((d) => [d.id, d.bytes])));
  return {
    loanId,
    loanNumber: `LN-${loanId}`,
    mappingVersion: 'map-v1',
    connectorVersion: '0.1.0',
    records,
    documents: documents.map((d) => ({
      id: d.id,
      name: d.name,
      type: 'application/pdf',
      size: d.bytes.length,
      category: 'financials',
      period: '2024',
      requirement: { id: 'req_1', name: 'Tax return', period: '2024' },
    })),
    source: {
      centsAmount: 125000050,
      bpsRate: 725,
      maturityDate: '2030-03-14T05:00:00Z',
      firstPaymentDate: '2025-04-14T05:00:00Z',
      paymentFrequency: 'monthly',
      productId: 'prod_1',
    },
    ...extra,
    fetchDocument,
  };
}
