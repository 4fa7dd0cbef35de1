import { FatalError } from '../../src/lib/errors.js';
import {
  CoreRejectedError,
  CoreUnavailableError,
  type BoardingPackage,
  type CoreLoanRecord,
  type CoreReceipt,
  type CoreSystem,
} from '../../src/core/port.js';

export interface CoreFault {
  loanId?: string;
  kind: 'rejected' | 'ambiguous' | 'unavailable' | 'credentials';
  /** ambiguous: commit the write, then throw (a timeout after the core committed). */
  afterCommit?: boolean;
  times?: number;
}

/** In-memory core: idempotent by loan external id; counts every write that reached it. */
export class FakeCore implements CoreSystem {
  readonly name = 'fake';
  readonly loans = new Map<string, { pkg: BoardingPackage; receipt: CoreReceipt; writes: number }>();
  writes = 0;
  findCalls = 0;
  faults: CoreFault[] = [];
  /** findLoan reports loans as possibly partial (an adapter that cannot confirm every part). */
  reportsPartial = false;

  async board(pkg: BoardingPackage, _opts?: { signal?: AbortSignal }): Promise<CoreReceipt> {
    await Promise.resolve();
    const f = this.faults.find(
      (x) => (x.loanId === undefined || x.loanId === pkg.loanId) && (x.times ?? 1) > 0,
    );
    if (f) f.times = (f.times ?? 1) - 1;
    if (f?.kind === 'rejected')
      throw new CoreRejectedError(`core refused ${pkg.loanId}: productId unknown`, 422);
    if (f?.kind === 'credentials')
      throw new FatalError('core → 401: credentials refused (core.http.username/password)');
    if (f && !f.afterCommit)
      throw new CoreUnavailableError(`core timeout for ${pkg.loanId}`, f.kind === 'ambiguous');
    this.writes += 1;
    const prev = this.loans.get(pkg.loanId);
    const receipt: CoreReceipt = {
      coreReference: `CORE-${pkg.loanId}`,
      loanExternalId: pkg.loanId,
      mappingVersion: pkg.mappingVersion,
      records: pkg.records.map((r) => ({
        type: r.type,
        externalId: r.externalId,
        coreId: `c-${r.externalId}`,
      })),
      documents: [],
      boardedAt: new Date().toISOString(),
    };
    this.loans.set(pkg.loanId, { pkg, receipt, writes: (prev?.writes ?? 0) + 1 });
    if (f) throw new CoreUnavailableError(`core timeout after commit for ${pkg.loanId}`, true);
    return receipt;
  }

  async findLoan(id: string): Promise<CoreLoanRecord | null> {
    this.findCalls += 1;
    await Promise.resolve();
    const l = this.loans.get(id);
    if (!l) return null;
    const record: CoreLoanRecord = {
      coreReference: l.receipt.coreReference,
      loanExternalId: id,
      mappingVersion: l.pkg.mappingVersion,
      fields: l.pkg.source,
    };
    if (this.reportsPartial) record.complete = false;
    return record;
  }

  health() {
    return Promise.resolve({ ok: true });
  }
  async close() {}
}
