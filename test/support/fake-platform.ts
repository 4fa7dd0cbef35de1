import type { Writable } from 'node:stream';
import type { PlatformApi, PlatformHealth, QueuePage, QueueWalkOptions } from '../../src/platform/api.js';
import { PlatformError, type PlatformErrorCode } from '../../src/platform/errors.js';
import type { Entities, InvalidItem, PlatformDocument, QueueItem } from '../../src/contract/schemas.js';

export interface FakeLoan {
  item: QueueItem;
  entities: Entities;
  documents: PlatformDocument[];
  boarded: boolean;
}

/** A failure to inject: thrown by the next matching call(s). */
export interface FakeFault {
  op: 'queue' | 'entities' | 'documents' | 'ack' | 'getLoan';
  loanId?: string;
  code: PlatformErrorCode;
  status?: number;
  /** For ack: commit the ack first, then throw (a connection dropped after the server committed). */
  afterCommit?: boolean;
  times?: number;
}

export function fakeLoan(id: string, over: Partial<QueueItem> = {}): FakeLoan {
  return {
    item: {
      id,
      loanNumber: `LN-${id}`,
      status: 'funded',
      centsAmount: 1_000_000,
      bpsRate: 725,
      paymentFrequency: 'monthly',
      product: { id: 'p1', name: 'Term' },
      boarding: { id: `b-${id}`, releasedAt: '2026-01-01T00:00:00Z', boarded: false },
      ...over,
    },
    entities: {
      businesses: [{ id: `biz-${id}`, name: 'Acme', einLast4: '1234', role: 'borrower' }],
      people: [],
    },
    documents: [],
    boarded: false,
  };
}

/** In-memory PlatformApi with counters and fault injection, for unit tests of the pipeline. */
export class FakePlatform implements PlatformApi {
  readonly loans = new Map<string, FakeLoan>();
  readonly invalid: InvalidItem[] = [];
  readonly calls: Record<string, number> = {};
  /** loanId → keys of acks that committed (a replay with a known key does not count twice). */
  readonly acks = new Map<string, string[]>();
  readonly ackBodies = new Map<string, unknown[]>();
  faults: FakeFault[] = [];
  pageSize = 2;
  trafficStopped = false;

  add(...loans: FakeLoan[]): this {
    for (const l of loans) this.loans.set(l.item.id, l);
    return this;
  }

  private count(op: string): void {
    this.calls[op] = (this.calls[op] ?? 0) + 1;
  }

  private fault(op: FakeFault['op'], loanId?: string): FakeFault | undefined {
    const f = this.faults.find(
      (x) => x.op === op && (x.loanId === undefined || x.loanId === loanId) && (x.times ?? 1) > 0,
    );
    if (f) f.times = (f.times ?? 1) - 1;
    return f;
  }

  private throwFault(f: FakeFault, what: string): never {
    throw new PlatformError({
      code: f.code,
      status: f.status ?? null,
      message: `${what}: injected ${f.code}`,
    });
  }

  async *boardingQueue(opts: QueueWalkOptions = {}): AsyncGenerator<QueuePage, void, undefined> {
    const limit = opts.limit ?? this.pageSize;
    // Cursor = id of the last item of the previous page (stable while loans leave the queue).
    let cursor = opts.cursor ?? null;
    for (;;) {
      this.count('queue');
      await Promise.resolve();
      const f = this.fault('queue');
      if (f) this.throwFault(f, 'GET boarding-queue');
      if (cursor === 'expired')
        throw new PlatformError({ code: 'input.invalid', status: 400, message: 'cursor expired' });
      const all = [...this.loans.values()]
        .filter((l) => !l.boarded)
        .map((l) => l.item)
        .sort((a, b) => (a.id < b.id ? -1 : 1));
      const start = cursor === null ? 0 : all.findIndex((i) => i.id > (cursor as string));
      const rest = start < 0 ? [] : all.slice(start);
      const items = rest.slice(0, limit);
      const hasMore = rest.length > limit;
      const nextCursor = hasMore ? (items.at(-1)?.id ?? null) : null;
      const invalid = cursor === null ? this.invalid : [];
      yield { cursor, nextCursor, hasMore, items: structuredClone(items), invalid };
      if (!hasMore) return;
      cursor = nextCursor;
    }
  }

  async getLoan(id: string) {
    this.count('getLoan');
    await Promise.resolve();
    const l = this.loans.get(id);
    if (!l) throw new PlatformError({ code: 'loan.not_found', status: 404, message: 'no loan' });
    return structuredClone(l.item);
  }

  getLoanSummary(): never {
    throw new Error('not used');
  }

  async getEntities(loanId: string) {
    this.count('entities');
    await Promise.resolve();
    const f = this.fault('entities', loanId);
    if (f) this.throwFault(f, 'GET entities');
    const l = this.loans.get(loanId);
    if (!l) throw new PlatformError({ code: 'loan.not_found', status: 404, message: 'no loan' });
    return structuredClone(l.entities);
  }

  async listDocuments(loanId: string) {
    this.count('documents');
    await Promise.resolve();
    const f = this.fault('documents', loanId);
    if (f) this.throwFault(f, 'GET documents');
    return structuredClone(this.loans.get(loanId)?.documents ?? []);
  }

  getDownloadAddress(): never {
    throw new Error('not used');
  }

  download(_url: string, _sink: Writable): never {
    throw new Error('not used');
  }

  async acknowledgeBoarding(loanId: string, body: Record<string, unknown>, opts: { idempotencyKey: string }) {
    this.count('ack');
    await Promise.resolve();
    if (this.trafficStopped)
      throw new PlatformError({ code: 'rate_limit.traffic_stopped', message: 'traffic stopped' });
    const f = this.fault('ack', loanId);
    if (f && !f.afterCommit) this.throwFault(f, 'POST boarding');
    const keys = this.acks.get(loanId) ?? [];
    if (!keys.includes(opts.idempotencyKey)) {
      keys.push(opts.idempotencyKey);
      this.acks.set(loanId, keys);
      this.ackBodies.set(loanId, [...(this.ackBodies.get(loanId) ?? []), body]);
    }
    const l = this.loans.get(loanId);
    if (l) l.boarded = true;
    if (f) this.throwFault(f, 'POST boarding');
    return { data: { boarded: true } };
  }

  listProducts(): never {
    throw new Error('not used');
  }
  getProduct(): never {
    throw new Error('not used');
  }
  listWebhookEndpoints(): never {
    throw new Error('not used');
  }
  createWebhookEndpoint(): never {
    throw new Error('not used');
  }
  updateWebhookEndpoint(): never {
    throw new Error('not used');
  }

  health(): PlatformHealth {
    return {
      lastSuccessAt: null,
      strikes24h: this.trafficStopped ? 2 : 0,
      trafficStopped: this.trafficStopped,
      budgets: [],
    };
  }

  async close(): Promise<void> {}
}
