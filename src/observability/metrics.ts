import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { PlatformHealth } from '../platform/api.js';
import type { PlatformStats } from '../platform/client.js';
import { WEBHOOK_EVENTS } from '../contract/schemas.js';
import type { StoreDb } from '../store/sql.js';
import { LOAN_STATES } from '../store/loan-states.js';
import {
  createCheckpointStore,
  STATE_BACKUP_CHECKPOINT,
  type CheckpointStore,
} from '../store/checkpoints.js';
import { createLoanStats, type LoanStats } from '../store/loan-stats.js';
import type { WebhookInbox } from '../store/inbox.js';
import type { PoolUsage } from '../store/identity/numbers.js';
import type { RejectReason } from '../webhooks/signature.js';
import type { DiskStatus } from './disk-space.js';
import type { ClockSkewStatus } from './clock-skew.js';
import type { TraceExportStats } from './tracing.js';

/** One row of the platform client's call statistics (whatever its own shape, adapted to this). */
export interface ApiCallCount {
  /** Request class / rate bucket: read | write (or finer, e.g. download). */
  bucket: string;
  /** HTTP status as text, or an error class such as `network`. */
  status: string;
  count: number;
}

/** Where scrape-time values come from; every source is optional and may be attached later. */
export interface MetricsSources {
  /** The state database: loans by state, boarded, quarantined, retry backlog, oldest unacknowledged. */
  db?: StoreDb;
  inbox?: WebhookInbox;
  /** Platform client health: 429 strikes in 24 h and budget remaining per bucket. */
  platformHealth?: () => PlatformHealth;
  /** Platform client call counters by bucket and status. */
  apiCalls?: () => Iterable<ApiCallCount>;
  /** The mapping set in use and whether its last reload was refused. */
  mapping?: () => { version: string; lastReloadError: unknown };
  /** Usage of the bank's number pools in use (identity.*.source pool). */
  numberPools?: () => Promise<readonly PoolUsage[]>;
  /** This replica's role among those sharing the state (store/leadership/leadership.ts). */
  leadership?: () => LeadershipView;
  /** Free space where the connector writes (the last reading). */
  disk?: () => DiskStatus;
  /** 1 while the last pass stopped on a core outage. */
  coreOutage?: () => boolean;
  /** This host's clock against the database's (the last reading). */
  clockSkew?: () => ClockSkewStatus | null;
  /** The imaging folder (src/imaging/folder-watch.ts; the last reading). */
  imaging?: () => ImagingFolderReading;
  /** Spans exported and dropped (src/observability/tracing.ts); absent when traces are off. */
  traces?: () => TraceExportStats;
  /** Where a source that stops answering (and recovers) is logged, with the reason. */
  logger?: Logger;
}

/** The names `boarding_metric_source_up{source}` gives the sources above. */
export type MetricSourceName =
  | 'db'
  | 'inbox'
  | 'platform'
  | 'api_calls'
  | 'mapping'
  | 'number_pools'
  | 'leadership'
  | 'disk'
  | 'core_outage'
  | 'clock_skew'
  | 'imaging'
  | 'traces';

/** What /metrics says of the imaging folder (structural: src/imaging/folder-watch.ts's status). */
export interface ImagingFolderReading {
  missing: boolean;
  waiting: number;
  oldestWaitingMs: number | null;
  stale: number;
}

/** What /readyz and /metrics say of leadership. */
export interface LeadershipView {
  role: 'leader' | 'standby';
  /** The epoch this replica leads in; null on a standby. */
  epoch: number | null;
  /** This replica's holder id (host:pid:random). */
  holder: string;
  /** How many times this replica became leader since it started. */
  acquisitions: number;
}

export type CycleOutcome = 'ok' | 'error' | 'aborted';

/**
 * The connector's Prometheus metrics, on a registry of its own (never prom-client's global one, so
 * tests and several apps in one process do not collide). Values that live in SQLite or the
 * platform client are read at scrape time; the daemon pushes what only it knows (cycle duration).
 *
 * Usage: the run command creates one `createConnectorMetrics({ db, inbox, platformHealth, apiCalls })`,
 * hands it to the daemon (`metrics.observeCycle(seconds, outcome)` after each cycle) and to
 * `createApp({ metrics, ... })`, which serves it at GET /metrics.
 */
export interface ConnectorMetrics {
  readonly registry: Registry;
  /** A delivery passed verification: new (`accepted`) or a redelivery (`duplicate`). */
  webhookReceived(outcome: 'accepted' | 'duplicate', eventType: string): void;
  webhookRejected(reason: RejectReason): void;
  /** Duration of one boarding-queue cycle; `trigger` is e.g. schedule | webhook | startup. */
  observeCycle(seconds: number, outcome: CycleOutcome, trigger?: string): void;
  /** Attach or replace sources (the daemon and client may be built after the app). */
  setSources(sources: MetricsSources): void;
  /** Prometheus text exposition. */
  render(): Promise<string>;
  readonly contentType: string;
}

export interface ConnectorMetricsOptions extends MetricsSources {
  clock: Clock;
  /** Process metrics (CPU, memory, event loop lag); default true. */
  processMetrics?: boolean;
  prefix?: string;
}

const KNOWN_EVENTS = new Set<string>(WEBHOOK_EVENTS);

export function createConnectorMetrics(opts: ConnectorMetricsOptions): ConnectorMetrics {
  const p = opts.prefix ?? 'boarding_';
  const registry = new Registry();
  let sources: MetricsSources = { ...opts };
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: p });
  const book = new SourceBook(() => sources.logger);
  const family: Family = { p, registry, clock: opts.clock, sources: () => sources, book };

  // Registration order is the exposition's order: dashboards do not care, but diffs of it do.
  const pushed = pushedMetrics(family);
  boardingMetrics(family);
  stateBackupMetric(family);
  numberPoolMetrics(family);
  webhookInboxMetrics(family);
  platformMetrics(family);
  leadershipMetrics(family);
  mappingMetrics(family);
  hostMetrics(family);
  imagingMetrics(family);
  traceMetrics(family);

  return {
    registry,
    contentType: registry.contentType,
    webhookReceived(outcome, eventType) {
      // Unknown types come from outside: bound the label's cardinality.
      pushed.received.inc({ outcome, event_type: KNOWN_EVENTS.has(eventType) ? eventType : 'other' });
    },
    webhookRejected(reason) {
      pushed.rejected.inc({ reason });
    },
    observeCycle(seconds, outcome, trigger = 'schedule') {
      pushed.cycle.observe({ outcome, trigger }, seconds);
    },
    setSources(s) {
      sources = { ...sources, ...s };
    },
    render: async () => {
      // The source-up family is rendered after every other collect has run (some are async), so
      // it tells what this scrape saw, not the last one.
      book.begin();
      const text = await registry.metrics();
      return text + (await book.render(p));
    },
  };
}

/**
 * Which sources answered during one scrape. A value that cannot be read is left out of the scrape
 * (no sample), never written as 0 ("standby", "disk fine") nor as the last value read; this book
 * says why it is missing: `boarding_metric_source_up{source} 0`, and one log line with the reason
 * when a source stops answering (one more when it answers again).
 */
class SourceBook {
  private scrape = new Map<MetricSourceName, unknown>();
  private readonly failing = new Set<MetricSourceName>();
  constructor(private readonly logger: () => Logger | undefined) {}

  begin(): void {
    this.scrape = new Map();
  }

  ok(source: MetricSourceName): void {
    if (!this.scrape.has(source)) this.scrape.set(source, null);
  }

  failed(source: MetricSourceName, err: unknown): void {
    if (this.scrape.get(source) == null) this.scrape.set(source, err ?? new Error('no answer'));
  }

  /** Runs a source, booking its answer; undefined when it is not attached or threw. */
  read<T>(source: MetricSourceName, fn: (() => T) | undefined): T | undefined {
    if (!fn) return undefined;
    try {
      const v = fn();
      this.ok(source);
      return v;
    } catch (err) {
      this.failed(source, err);
      return undefined;
    }
  }

  async readAsync<T>(source: MetricSourceName, fn: (() => Promise<T>) | undefined): Promise<T | undefined> {
    if (!fn) return undefined;
    try {
      const v = await fn();
      this.ok(source);
      return v;
    } catch (err) {
      this.failed(source, err);
      return undefined;
    }
  }

  async render(p: string): Promise<string> {
    const registry = new Registry();
    const up = new Gauge({
      name: `${p}metric_source_up`,
      help:
        '1 when a metrics source answered at this scrape, 0 when it failed (the metrics it feeds are ' +
        'left out of the scrape; the log says why)',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    for (const [source, err] of [...this.scrape].sort(([a], [b]) => a.localeCompare(b))) {
      up.set({ source }, err == null ? 1 : 0);
      const log = this.logger();
      if (err != null && !this.failing.has(source)) {
        this.failing.add(source);
        log?.warn(
          { source, reason: err instanceof Error ? err.message : JSON.stringify(err) },
          'metrics: a source did not answer; its metrics are left out of /metrics until it does',
        );
      } else if (err == null && this.failing.delete(source)) {
        log?.info({ source }, 'metrics: a source answers again');
      }
    }
    if (this.scrape.size === 0) return '';
    return '\n' + (await registry.metrics());
  }
}

/**
 * An unlabelled gauge whose value is read at scrape time: absent from the exposition (no sample)
 * when `read` gives undefined, instead of prom-client's 0 for a reset unlabelled gauge.
 */
class ReadingGauge extends Gauge {
  private known = false;
  constructor(
    name: string,
    help: string,
    registry: Registry,
    read: () => number | undefined | Promise<number | undefined>,
  ) {
    super({
      name,
      help,
      registers: [registry],
      async collect() {
        const v = await read();
        (this as ReadingGauge).known = v !== undefined;
        this.set(v ?? 0);
      },
    });
  }

  override async get() {
    const m = await super.get();
    return this.known ? m : { ...m, values: [] };
  }
}

/** What every metric family is registered with; `sources()` is read at scrape time (they may be replaced). */
interface Family {
  p: string;
  registry: Registry;
  clock: Clock;
  sources: () => MetricsSources;
  book: SourceBook;
}

/** Counters and the histogram the receiver and the daemon push (the only values not read at scrape time). */
function pushedMetrics({ p, registry }: Family) {
  const received = new Counter({
    name: `${p}webhooks_received_total`,
    help: 'Webhook deliveries that passed verification, by outcome (accepted|duplicate) and event type',
    labelNames: ['outcome', 'event_type'] as const,
    registers: [registry],
  });
  const rejected = new Counter({
    name: `${p}webhooks_rejected_total`,
    help:
      'Webhook deliveries refused, by reason (missing_headers, bad_signature, timestamp_out_of_tolerance, ' +
      'too_large, invalid_json, …)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const cycle = new Histogram({
    name: `${p}cycle_duration_seconds`,
    help: 'Duration of one boarding-queue cycle',
    labelNames: ['outcome', 'trigger'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
    registers: [registry],
  });
  return { received, rejected, cycle };
}

/** The pipeline's loans, read from the state database at scrape time. */
function boardingMetrics({ p, registry, clock, sources, book }: Family): void {
  // Prepared lazily per Db: the loans table belongs to the pipeline, read here only.
  let statsDb: StoreDb | undefined;
  let stats: LoanStats | undefined;
  const loanStats = (db: StoreDb): LoanStats => {
    if (stats && statsDb === db) return stats;
    statsDb = db;
    stats = createLoanStats(db);
    return stats;
  };

  // A scrape must never fail because of one source (e.g. the table is busy migrating): a family
  // whose read fails is left empty and the source-up family says so.
  const dbGauge = (
    name: string,
    help: string,
    labelNames: string[],
    fill: (g: Gauge, db: StoreDb) => Promise<void>,
  ): Gauge =>
    new Gauge({
      name: `${p}${name}`,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        const db = sources().db;
        if (!db) return;
        const filled = await book.readAsync('db', async () => {
          if (!db.isOpen) throw new Error('the state database is closed');
          await fill(this, db);
          return true;
        });
        if (!filled) this.reset();
      },
    });
  /** An unlabelled number from the state database: absent when it cannot be read. */
  const dbReading = (name: string, help: string, read: (db: StoreDb) => Promise<number>): void => {
    new ReadingGauge(`${p}${name}`, help, registry, () => {
      const db = sources().db;
      return book.readAsync(
        'db',
        db &&
          (() => {
            if (!db.isOpen) throw new Error('the state database is closed');
            return read(db);
          }),
      );
    });
  };
  dbGauge('loans', 'Loans by state in the local state database', ['state'], async (g, db) => {
    // Every known state is present (0 when empty) so alerts on a state never see "no data".
    for (const state of LOAN_STATES) g.set({ state }, 0);
    for (const r of await loanStats(db).countByState()) g.set({ state: r.state }, r.n);
  });
  dbReading(
    'loans_boarded_total',
    'Loans boarded and acknowledged (all time, from the state database)',
    async (db) => (await loanStats(db).countByState()).find((r) => r.state === 'acknowledged')?.n ?? 0,
  );
  dbGauge(
    'loans_with_review_items',
    'Loans whose last mapping had review items (boarded with warnings), by state',
    ['state'],
    async (g, db) => {
      for (const r of await loanStats(db).reviewedByState()) g.set({ state: r.state }, r.n);
    },
  );
  dbGauge('loans_quarantined', 'Loans quarantined, by reason', ['reason'], async (g, db) => {
    for (const r of await loanStats(db).quarantinedByReason()) g.set({ reason: r.reason ?? 'unknown' }, r.n);
  });
  dbGauge(
    'retry_backlog',
    'Loans waiting for a retry (retry_wait), and how many of them are due now',
    ['due'],
    async (g, db) => {
      const s = loanStats(db);
      const total = (await s.countByState()).find((r) => r.state === 'retry_wait')?.n ?? 0;
      const due = await s.dueRetries(clock.now());
      g.set({ due: 'true' }, due);
      g.set({ due: 'false' }, total - due);
    },
  );
  dbReading(
    'oldest_unacknowledged_age_seconds',
    'Age of the oldest loan seen but not yet acknowledged (0 when none)',
    async (db) => {
      const oldest = await loanStats(db).oldestUnacknowledgedAt();
      return oldest === null ? 0 : Math.max(0, (clock.now() - oldest) / 1000);
    },
  );
}

/**
 * When `state backup` last wrote a verified copy of the SQLite state (it runs as its own process, so
 * the time is read from the state database). 0 when never: the "backups not taken" alert fires on
 * a state that was never backed up too. No sample on PostgreSQL, whose backups are the bank's own.
 */
function stateBackupMetric({ p, registry, sources, book }: Family): void {
  let checkpoints: { db: StoreDb; store: CheckpointStore } | undefined;
  new ReadingGauge(
    `${p}state_backup_last_success_timestamp_seconds`,
    'Unix time of the last verified `state backup` of the SQLite state (0: never; absent on PostgreSQL)',
    registry,
    async () => {
      const db = sources().db;
      if (!db || db.sqlite === null) return undefined;
      return book.readAsync('db', async () => {
        if (!db.isOpen) throw new Error('the state database is closed');
        if (checkpoints?.db !== db) checkpoints = { db, store: createCheckpointStore(db) };
        const row = await checkpoints.store.get(STATE_BACKUP_CHECKPOINT);
        return row === null ? 0 : Math.floor(row.updatedAt / 1000);
      });
    },
  );
}

/** The bank's number pools (identity.*.source pool): boarding stops when one runs out. */
function numberPoolMetrics({ p, registry, sources, book }: Family): void {
  new Gauge({
    name: `${p}number_pool_used_ratio`,
    help:
      "Share of a number pool's sequences used (account, customer); boarding stops at 1: add a range " +
      'to identity.*.pool.ranges',
    labelNames: ['pool'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const u of (await book.readAsync('number_pools', sources().numberPools)) ?? [])
        this.set({ pool: u.pool }, u.ratio);
    },
  });
  new Gauge({
    name: `${p}number_pool_remaining`,
    help: 'Sequences left in a number pool (account, customer)',
    labelNames: ['pool'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const u of (await book.readAsync('number_pools', sources().numberPools)) ?? [])
        this.set({ pool: u.pool }, Math.max(0, u.capacity - u.used));
    },
  });
}

/** Deliveries received but not yet processed. */
function webhookInboxMetrics({ p, registry, clock, sources, book }: Family): void {
  const stats = () => {
    const inbox = sources().inbox;
    return book.readAsync('inbox', inbox && (() => inbox.stats()));
  };
  new Gauge({
    name: `${p}webhook_inbox`,
    help: 'Webhook inbox rows by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const s = await stats();
      if (!s) return;
      this.set({ status: 'pending' }, s.pending);
      this.set({ status: 'processed' }, s.processed);
      this.set({ status: 'failed' }, s.failed);
    },
  });
  new ReadingGauge(
    `${p}webhook_inbox_oldest_pending_age_seconds`,
    'Age of the oldest unprocessed webhook delivery (0 when none)',
    registry,
    async () => {
      const s = await stats();
      if (!s) return undefined;
      return s.oldestPendingAt == null ? 0 : Math.max(0, (clock.now() - s.oldestPendingAt) / 1000);
    },
  );
}

/** The platform client: calls, 429 strikes, the rate budget. */
function platformMetrics({ p, registry, clock, sources, book }: Family): void {
  const health = () => book.read('platform', sources().platformHealth);
  new Gauge({
    name: `${p}platform_api_calls_total`,
    help: 'Platform API calls by class (rate bucket) and HTTP status, as counted by the client',
    labelNames: ['bucket', 'status'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const apiCalls = sources().apiCalls;
      const calls = book.read('api_calls', apiCalls && (() => [...apiCalls()]));
      for (const c of calls ?? []) this.set({ bucket: c.bucket, status: c.status }, c.count);
    },
  });
  new ReadingGauge(
    `${p}platform_rate_limit_strikes_24h`,
    '429 strikes in the last 24 h not cleared by an operator (a live key is revoked at 3)',
    registry,
    () => health()?.strikes24h,
  );
  new ReadingGauge(
    `${p}platform_traffic_stopped`,
    '1 when writes are stopped after 2 strikes in 24 h',
    registry,
    () => {
      const h = health();
      return h && (h.trafficStopped ? 1 : 0);
    },
  );
  new Gauge({
    name: `${p}platform_budget_remaining`,
    help:
      "Requests this process's client still allows itself in the current rate window, by bucket " +
      "(store.engine postgres: this process's own calls only; the budget itself is shared by every " +
      'replica)',
    labelNames: ['bucket'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const b of health()?.budgets ?? []) this.set({ bucket: b.bucket }, b.remaining);
    },
  });
  new ReadingGauge(
    `${p}platform_last_success_age_seconds`,
    'Seconds since the last successful platform call (-1 when none yet)',
    registry,
    () => {
      const h = health();
      if (!h) return undefined;
      return h.lastSuccessAt == null ? -1 : Math.max(0, (clock.now() - h.lastSuccessAt) / 1000);
    },
  );
}

/** This replica's role among those sharing the state. */
function leadershipMetrics({ p, registry, sources, book }: Family): void {
  const leadership = () => book.read('leadership', sources().leadership);
  new ReadingGauge(
    `${p}leader`,
    '1 while this replica leads (boards, runs the scheduled jobs), 0 on a standby',
    registry,
    () => {
      const l = leadership();
      return l && (l.role === 'leader' ? 1 : 0);
    },
  );
  new ReadingGauge(
    `${p}leader_epoch`,
    'The lease epoch this replica leads in (the fencing token); 0 on a standby',
    registry,
    () => {
      const l = leadership();
      return l && (l.epoch ?? 0);
    },
  );
  new Counter({
    name: `${p}leadership_acquisitions_total`,
    help: 'Times this replica became leader (a takeover after a failover, or a start)',
    registers: [registry],
    collect() {
      const l = leadership();
      if (l) {
        this.reset();
        this.inc(l.acquisitions);
      }
    },
  });
}

/** The mapping set in use. */
function mappingMetrics({ p, registry, sources, book }: Family): void {
  const mapping = () => book.read('mapping', sources().mapping);
  new Gauge({
    name: `${p}mapping_info`,
    help: 'The mapping version loans are mapped with (value 1; the version is the label)',
    labelNames: ['version'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const m = mapping();
      if (m) this.set({ version: m.version }, 1);
    },
  });
  new ReadingGauge(
    `${p}mapping_reload_failed`,
    '1 when the last mapping reload was refused (the set on disk does not lint; the loaded one keeps boarding)',
    registry,
    () => {
      const m = mapping();
      return m && (m.lastReloadError ? 1 : 0);
    },
  );
}

/** What stops boarding from outside: disk space, the core, the clock. */
function hostMetrics({ p, registry, sources, book }: Family): void {
  const disk = () => book.read('disk', sources().disk);
  new Gauge({
    name: `${p}disk_free_bytes`,
    help:
      'Free bytes where the connector writes, by config key (store.path: the state directory; ' +
      'core.file.dir); boarding stops below boarding.minFreeDiskMb',
    labelNames: ['dir'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const d = disk();
      for (const r of d?.readings ?? []) if (r.freeBytes !== null) this.set({ dir: r.key }, r.freeBytes);
    },
  });
  new ReadingGauge(
    `${p}disk_full`,
    '1 while a watched directory has less than boarding.minFreeDiskMb free (boarding stopped)',
    registry,
    () => {
      const d = disk();
      return d && (d.ok ? 0 : 1);
    },
  );
  new ReadingGauge(
    `${p}core_outage`,
    '1 while the last boarding pass stopped because the core did not take writes (down, timing out, ' +
      'or its disk full)',
    registry,
    () => {
      const o = book.read('core_outage', sources().coreOutage);
      return o === undefined ? undefined : o ? 1 : 0;
    },
  );
  // No reading yet (or SQLite, where the database's clock is this host's): no sample, not "in sync".
  new ReadingGauge(
    `${p}clock_offset_seconds`,
    "The state database's clock minus this host's (PostgreSQL; positive: this host is behind); " +
      '/readyz fails at store.maxClockSkewMs',
    registry,
    () => {
      const c = book.read('clock_skew', sources().clockSkew);
      return c?.offset ? c.offset.offsetMs / 1000 : undefined;
    },
  );
}

/** The imaging folder: missing, waiting for the importer, not drained (imaging.staleAfter). */
function imagingMetrics({ p, registry, sources, book }: Family): void {
  const folder = () => book.read('imaging', sources().imaging);
  new ReadingGauge(
    `${p}imaging_folder_missing`,
    '1 while imaging.dir does not exist or cannot be read (loans wait for it)',
    registry,
    () => {
      const f = folder();
      return f && (f.missing ? 1 : 0);
    },
  );
  new ReadingGauge(
    `${p}imaging_batches_waiting`,
    'Batch folders in imaging.dir with their ready marker, not taken by the importer yet',
    registry,
    () => folder()?.waiting,
  );
  new ReadingGauge(
    `${p}imaging_oldest_waiting_seconds`,
    "Age of the oldest waiting batch folder's ready marker (0 when none waits)",
    registry,
    () => {
      const f = folder();
      return f && (f.oldestWaitingMs ?? 0) / 1000;
    },
  );
  new ReadingGauge(
    `${p}imaging_stale_batches`,
    'Batch folders waiting longer than imaging.staleAfter: the importer is not draining the folder',
    registry,
    () => folder()?.stale,
  );
}

/** The trace exporter's own counts: a dead or slow collector costs spans, never boards. */
function traceMetrics({ p, registry, sources, book }: Family): void {
  new Counter({
    name: `${p}trace_spans_exported_total`,
    help: 'Spans the OTLP collector took (telemetry.otlp.endpoint; 0 while traces are off)',
    registers: [registry],
    collect() {
      this.reset();
      const t = book.read('traces', sources().traces);
      if (t) this.inc(t.exported);
    },
  });
  new Counter({
    name: `${p}trace_spans_dropped_total`,
    help:
      'Spans lost instead of exported, by reason: queue_full (the bounded queue had no room), ' +
      'export_failed (the collector refused, was down or slower than telemetry.otlp.timeoutMs)',
    labelNames: ['reason'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const t = book.read('traces', sources().traces);
      if (!t) return;
      this.inc({ reason: 'queue_full' }, t.dropped.queue_full);
      this.inc({ reason: 'export_failed' }, t.dropped.export_failed);
    },
  });
}

/** Metrics sources from the platform client (`health()` and `stats()`). */
export function platformMetricsSources(client: {
  health(): PlatformHealth;
  stats(): PlatformStats;
}): Pick<MetricsSources, 'platformHealth' | 'apiCalls'> {
  return {
    platformHealth: () => client.health(),
    apiCalls: () => {
      const { calls, downloads } = client.stats();
      const rows: ApiCallCount[] = [];
      for (const [bucket, byStatus] of Object.entries(calls)) {
        for (const [status, count] of Object.entries(byStatus)) rows.push({ bucket, status, count });
      }
      rows.push(
        { bucket: 'download', status: 'ok', count: downloads.ok },
        { bucket: 'download', status: 'failed', count: downloads.failed },
      );
      return rows;
    },
  };
}
