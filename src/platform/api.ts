import type { Writable } from 'node:stream';
import type {
  Business,
  DownloadAddress,
  Entities,
  InvalidItem,
  Loan,
  LoanSummary,
  PlatformDocument,
  Product,
  QueueItem,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
} from '../contract/schemas.js';

export type Bucket = 'read' | 'write';

export interface QueuePage {
  /** Cursor used to fetch this page (null for the first page). */
  cursor: string | null;
  /** Cursor of the next page: checkpoint this after the page's items are handled. */
  nextCursor: string | null;
  hasMore: boolean;
  items: QueueItem[];
  /** Items that failed validation, reported per item. */
  invalid: InvalidItem[];
}

export interface QueueWalkOptions {
  /** Resume a walk from a saved cursor. */
  cursor?: string | null;
  limit?: number;
  /** true: already boarded loans (reconciliation). */
  boarded?: boolean;
  /** With boarded=true: ISO date-time lower bound. */
  boardedSince?: string;
  signal?: AbortSignal;
}

export interface DownloadResult {
  sha256: string;
  bytes: number;
  contentType: string | null;
}

export interface BudgetSnapshot {
  bucket: Bucket;
  limit: number;
  allowed: number;
  /**
   * Tokens this process took in the last window. With the shared ledger (store.engine postgres)
   * the window is shared by every process on the key, so this and `remaining` are this process's
   * view only (the leader's is nearly all of it: it is the one that boards).
   */
  spentInWindow: number;
  remaining: number;
  pausedUntil: number | null;
}

/** The last platform call that failed for a reason of the platform or the key (not a per-loan 4xx). */
export interface PlatformCallFailure {
  at: number;
  code: string;
  /** Short, no secret (HTTP method, path template and status or network code). */
  detail: string;
}

export interface PlatformHealth {
  lastSuccessAt: number | null;
  /** The last failed attempt (network, timeout, 5xx, 429, auth, traffic stop), from the first one after start. */
  lastFailure?: PlatformCallFailure | null;
  strikes24h: number;
  /**
   * true after 2 strikes in 24 h: ALL platform calls (reads too) stop until the ledger ages out (or an
   * operator clears it).
   */
  trafficStopped: boolean;
  /** The same as trafficStopped (the budget's own name for it). */
  stopped?: boolean;
  budgets: BudgetSnapshot[];
}

/**
 * Why a platform call is waiting, as the rate budget and the client know it (a progress line on
 * the terminal shows it: `waiting 12 s for the read budget`, `paused after a 429 until T`).
 */
export type PlatformWait =
  /**
   * The budget holds the call: our own window is full (`window`) or the platform's X-RateLimit-Remaining is 0
   * (`server`).
   */
  | { kind: 'budget'; bucket: Bucket; reason: 'window' | 'server'; until: number }
  /** The bucket is paused after a 429 (this process's or, on a shared state database, another's). */
  | { kind: 'paused'; bucket: Bucket; until: number }
  /** A call failed transiently (5xx, network) and is tried again at `until`. */
  | { kind: 'retry'; bucket: Bucket; operation: string; cause: string; until: number }
  /** A call that waited went out. */
  | { kind: 'resumed'; bucket: Bucket };

export interface WriteOptions {
  /** Required on every write; reused verbatim on every retry (≤ 255 chars). */
  idempotencyKey: string;
  signal?: AbortSignal;
}

export interface ReadOptions {
  signal?: AbortSignal;
}

/**
 * The Loan Platform operations the connector uses. Implemented by src/platform/client.ts (endpoints.ts over
 * transport.ts).
 */
export interface PlatformApi {
  boardingQueue(opts?: QueueWalkOptions): AsyncGenerator<QueuePage, void, undefined>;
  getLoan(id: string, opts?: ReadOptions): Promise<Loan>;
  getLoanSummary(id: string, opts?: ReadOptions): Promise<LoanSummary>;
  getEntities(loanId: string, opts?: ReadOptions): Promise<Entities>;
  listDocuments(loanId: string, opts?: ReadOptions): Promise<PlatformDocument[]>;
  getDownloadAddress(documentId: string, opts?: ReadOptions): Promise<DownloadAddress>;
  /** Streams a presigned URL into sink with no Authorization header; enforces maxBytes. */
  download(
    url: string,
    sink: Writable,
    opts: { maxBytes: number; signal?: AbortSignal; deadlineMs?: number },
  ): Promise<DownloadResult>;
  acknowledgeBoarding(loanId: string, body: Record<string, unknown>, opts: WriteOptions): Promise<unknown>;
  listProducts(opts?: ReadOptions): Promise<Product[]>;
  getProduct(id: string, opts?: ReadOptions): Promise<Product>;
  createBusiness?(loanId: string, body: Record<string, unknown>, opts: WriteOptions): Promise<Business>;
  listWebhookEndpoints(opts?: ReadOptions): Promise<WebhookEndpoint[]>;
  createWebhookEndpoint(
    body: { name: string; url: string; subscribedEvents: string[] },
    opts: WriteOptions,
  ): Promise<WebhookEndpointWithSecret>;
  updateWebhookEndpoint(
    id: string,
    patch: Record<string, unknown>,
    opts: WriteOptions,
  ): Promise<WebhookEndpoint>;
  health(): PlatformHealth;
  /** Subscribes to the waits of platform calls (rate budget, 429 pause, retry backoff); returns the unsubscribe. */
  onWait?(listener: (wait: PlatformWait) => void): () => void;
  close(): Promise<void>;
}
