import type { Writable } from 'node:stream';
import type { PlatformApi, ReadOptions, WriteOptions } from './api.js';
import type { Business } from '../contract/schemas.js';
import { downloadPresigned } from './download.js';
import * as endpoints from './endpoints.js';
import { createTransport, type PlatformStats, type TransportOptions } from './transport.js';

export { DEFAULT_USER_AGENT, type PlatformStats } from './transport.js';

/**
 * The platform client: the endpoint catalogue (endpoints.ts) bound to one transport
 * (transport.ts: pool, rate budget, retries, 429s, errors) and the presigned download
 * (download.ts, through the transport's guarded agent that never sees the API key).
 */
export interface PlatformClientOptions extends TransportOptions {
  /** Refuse presigned download addresses that are not https (production). */
  httpsDownloadsOnly?: boolean;
  pageSize: number;
}

export interface PlatformClient extends PlatformApi {
  createBusiness(loanId: string, body: Record<string, unknown>, opts: WriteOptions): Promise<Business>;
  stats(): PlatformStats;
  /** Operator action: forget the 429-strike ledger (after the platform confirmed the key is fine). */
  clearStrikes(by: string): Promise<number>;
}

export function createPlatformClient(opts: PlatformClientOptions): PlatformClient {
  const t = createTransport(opts);
  const download = (
    url: string,
    sink: Writable,
    o: { maxBytes: number; signal?: AbortSignal; deadlineMs?: number },
  ): ReturnType<PlatformApi['download']> =>
    downloadPresigned(
      {
        dispatcher: t.downloadAgent,
        guard: t.guard,
        logger: t.logger,
        userAgent: t.userAgent,
        httpsOnly: opts.httpsDownloadsOnly === true,
        onOutcome: (outcome) => t.noteDownload(outcome),
      },
      url,
      sink,
      o,
    );
  return {
    boardingQueue: (walk) => endpoints.boardingQueue(t, { pageSize: opts.pageSize, logger: t.logger }, walk),
    getLoan: (id, o?: ReadOptions) => endpoints.getLoan(t, id, o),
    getLoanSummary: (id, o?: ReadOptions) => endpoints.getLoanSummary(t, id, o),
    getEntities: (loanId, o?: ReadOptions) => endpoints.getEntities(t, loanId, o),
    listDocuments: (loanId, o?: ReadOptions) => endpoints.listDocuments(t, loanId, o),
    getDownloadAddress: (documentId, o?: ReadOptions) => endpoints.getDownloadAddress(t, documentId, o),
    download,
    acknowledgeBoarding: (loanId, body, o) => endpoints.acknowledgeBoarding(t, loanId, body, o),
    listProducts: (o?: ReadOptions) => endpoints.listProducts(t, o),
    getProduct: (id, o?: ReadOptions) => endpoints.getProduct(t, id, o),
    createBusiness: (loanId, body, o) => endpoints.createBusiness(t, loanId, body, o),
    listWebhookEndpoints: (o?: ReadOptions) => endpoints.listWebhookEndpoints(t, o),
    createWebhookEndpoint: (body, o) => endpoints.createWebhookEndpoint(t, body, o),
    updateWebhookEndpoint: (id, patch, o) => endpoints.updateWebhookEndpoint(t, id, patch, o),
    health: () => t.health(),
    stats: () => t.stats(),
    clearStrikes: (by) => t.clearStrikes(by),
    onWait: (listener) => t.onWait(listener),
    close: () => t.close(),
  };
}
