import { afterEach, describe, expect, it } from 'vitest';
import { createConnectorMetrics, platformMetricsSources } from '../../../src/observability/metrics.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { FakeClock } from '../../support/fake-clock.js';

const opened: Db[] = [];
afterEach(() => {
  for (const db of opened.splice(0)) db.close();
});

/** Every source attached, each with a value, so every family renders at least one sample. */
function everySource(clock: FakeClock) {
  const db = openDatabase(':memory:');
  opened.push(db);
  const now = clock.now();
  const store = sqliteStore(db);
  return createConnectorMetrics({
    clock,
    processMetrics: false,
    db: store,
    inbox: createWebhookInbox(store),
    ...platformMetricsSources({
      health: () => ({
        lastSuccessAt: now - 4_000,
        strikes24h: 1,
        trafficStopped: false,
        budgets: [
          { bucket: 'read', remaining: 80 },
          { bucket: 'write', remaining: 20 },
        ] as never,
      }),
      stats: () =>
        ({
          calls: { read: { '200': 7, '429': 1 }, write: { '201': 2 } },
          downloads: { ok: 3, failed: 1 },
        }) as never,
    }),
    mapping: () => ({ version: 'generic@3', lastReloadError: new Error('does not lint') }),
    numberPools: () =>
      Promise.resolve([{ pool: 'account', used: 25, capacity: 100, ratio: 0.25, warnAt: 0.8 }] as never),
    leadership: () => ({ role: 'leader', epoch: 4, holder: 'host:1:abc', acquisitions: 2 }),
    disk: () => ({
      ok: false,
      detail: 'store.path: 1 MB free',
      at: now,
      readings: [
        { key: 'store.path', dir: '/var/state', freeBytes: 1_048_576 },
        { key: 'core.file.dir', dir: '/var/core', freeBytes: null, error: 'EACCES' },
      ],
    }),
    coreOutage: () => true,
    clockSkew: () => ({ ok: true, detail: 'ok', offset: { offsetMs: 1_500, rttMs: 4 } }),
    imaging: () => ({ missing: false, waiting: 3, oldestWaitingMs: 2_700_000, stale: 1 }),
  });
}

describe('connector metrics', () => {
  // The names, help texts, types and labels are what dashboards and alerts are written against:
  // splitting createConnectorMetrics by family (issue #34) must not change a byte of them.
  it('renders every family with its name, help, type and labels (regression: the exposition must not change)', async () => {
    const clock = new FakeClock();
    const metrics = everySource(clock);
    metrics.webhookReceived('accepted', 'loan.funded');
    metrics.webhookReceived('duplicate', 'something.unknown');
    metrics.webhookRejected('bad_signature');
    metrics.observeCycle(0.3, 'ok');
    metrics.observeCycle(12, 'error', 'webhook');
    expect(await metrics.render()).toMatchInlineSnapshot(`
      "# HELP boarding_webhooks_received_total Webhook deliveries that passed verification, by outcome (accepted|duplicate) and event type
      # TYPE boarding_webhooks_received_total counter
      boarding_webhooks_received_total{outcome="accepted",event_type="loan.funded"} 1
      boarding_webhooks_received_total{outcome="duplicate",event_type="other"} 1

      # HELP boarding_webhooks_rejected_total Webhook deliveries refused, by reason (missing_headers, bad_signature, timestamp_out_of_tolerance, too_large, invalid_json, …)
      # TYPE boarding_webhooks_rejected_total counter
      boarding_webhooks_rejected_total{reason="bad_signature"} 1

      # HELP boarding_cycle_duration_seconds Duration of one boarding-queue cycle
      # TYPE boarding_cycle_duration_seconds histogram
      boarding_cycle_duration_seconds_bucket{le="0.05",outcome="ok",trigger="schedule"} 0
      boarding_cycle_duration_seconds_bucket{le="0.1",outcome="ok",trigger="schedule"} 0
      boarding_cycle_duration_seconds_bucket{le="0.25",outcome="ok",trigger="schedule"} 0
      boarding_cycle_duration_seconds_bucket{le="0.5",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="1",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="2.5",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="5",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="10",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="30",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="60",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="120",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="300",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="600",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="+Inf",outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_sum{outcome="ok",trigger="schedule"} 0.3
      boarding_cycle_duration_seconds_count{outcome="ok",trigger="schedule"} 1
      boarding_cycle_duration_seconds_bucket{le="0.05",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="0.1",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="0.25",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="0.5",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="1",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="2.5",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="5",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="10",outcome="error",trigger="webhook"} 0
      boarding_cycle_duration_seconds_bucket{le="30",outcome="error",trigger="webhook"} 1
      boarding_cycle_duration_seconds_bucket{le="60",outcome="error",trigger="webhook"} 1
      boarding_cycle_duration_seconds_bucket{le="120",outcome="error",trigger="webhook"} 1
      boarding_cycle_duration_seconds_bucket{le="300",outcome="error",trigger="webhook"} 1
      boarding_cycle_duration_seconds_bucket{le="600",outcome="error",trigger="webhook"} 1
      boarding_cycle_duration_seconds_bucket{le="+Inf",outcome="error",trigger="webhook"} 1
      boarding_cycle_duration_seconds_sum{outcome="error",trigger="webhook"} 12
      boarding_cycle_duration_seconds_count{outcome="error",trigger="webhook"} 1

      # HELP boarding_loans Loans by state in the local state database
      # TYPE boarding_loans gauge
      boarding_loans{state="queued"} 0
      boarding_loans{state="fetched"} 0
      boarding_loans{state="mapped"} 0
      boarding_loans{state="written"} 0
      boarding_loans{state="acknowledged"} 0
      boarding_loans{state="retry_wait"} 0
      boarding_loans{state="quarantined"} 0
      boarding_loans{state="skipped"} 0

      # HELP boarding_loans_boarded_total Loans boarded and acknowledged (all time, from the state database)
      # TYPE boarding_loans_boarded_total gauge
      boarding_loans_boarded_total 0

      # HELP boarding_loans_with_review_items Loans whose last mapping had review items (boarded with warnings), by state
      # TYPE boarding_loans_with_review_items gauge

      # HELP boarding_loans_quarantined Loans quarantined, by reason
      # TYPE boarding_loans_quarantined gauge

      # HELP boarding_retry_backlog Loans waiting for a retry (retry_wait), and how many of them are due now
      # TYPE boarding_retry_backlog gauge
      boarding_retry_backlog{due="true"} 0
      boarding_retry_backlog{due="false"} 0

      # HELP boarding_oldest_unacknowledged_age_seconds Age of the oldest loan seen but not yet acknowledged (0 when none)
      # TYPE boarding_oldest_unacknowledged_age_seconds gauge
      boarding_oldest_unacknowledged_age_seconds 0

      # HELP boarding_state_backup_last_success_timestamp_seconds Unix time of the last verified \`state backup\` of the SQLite state (0: never; absent on PostgreSQL)
      # TYPE boarding_state_backup_last_success_timestamp_seconds gauge
      boarding_state_backup_last_success_timestamp_seconds 0

      # HELP boarding_number_pool_used_ratio Share of a number pool's sequences used (account, customer); boarding stops at 1: add a range to identity.*.pool.ranges
      # TYPE boarding_number_pool_used_ratio gauge
      boarding_number_pool_used_ratio{pool="account"} 0.25

      # HELP boarding_number_pool_remaining Sequences left in a number pool (account, customer)
      # TYPE boarding_number_pool_remaining gauge
      boarding_number_pool_remaining{pool="account"} 75

      # HELP boarding_webhook_inbox Webhook inbox rows by status
      # TYPE boarding_webhook_inbox gauge
      boarding_webhook_inbox{status="pending"} 0
      boarding_webhook_inbox{status="processed"} 0
      boarding_webhook_inbox{status="failed"} 0

      # HELP boarding_webhook_inbox_oldest_pending_age_seconds Age of the oldest unprocessed webhook delivery (0 when none)
      # TYPE boarding_webhook_inbox_oldest_pending_age_seconds gauge
      boarding_webhook_inbox_oldest_pending_age_seconds 0

      # HELP boarding_platform_api_calls_total Platform API calls by class (rate bucket) and HTTP status, as counted by the client
      # TYPE boarding_platform_api_calls_total gauge
      boarding_platform_api_calls_total{bucket="read",status="200"} 7
      boarding_platform_api_calls_total{bucket="read",status="429"} 1
      boarding_platform_api_calls_total{bucket="write",status="201"} 2
      boarding_platform_api_calls_total{bucket="download",status="ok"} 3
      boarding_platform_api_calls_total{bucket="download",status="failed"} 1

      # HELP boarding_platform_rate_limit_strikes_24h 429 strikes in the last 24 h not cleared by an operator (a live key is revoked at 3)
      # TYPE boarding_platform_rate_limit_strikes_24h gauge
      boarding_platform_rate_limit_strikes_24h 1

      # HELP boarding_platform_traffic_stopped 1 when writes are stopped after 2 strikes in 24 h
      # TYPE boarding_platform_traffic_stopped gauge
      boarding_platform_traffic_stopped 0

      # HELP boarding_platform_budget_remaining Requests this process's client still allows itself in the current rate window, by bucket (store.engine postgres: this process's own calls only; the budget itself is shared by every replica)
      # TYPE boarding_platform_budget_remaining gauge
      boarding_platform_budget_remaining{bucket="read"} 80
      boarding_platform_budget_remaining{bucket="write"} 20

      # HELP boarding_platform_last_success_age_seconds Seconds since the last successful platform call (-1 when none yet)
      # TYPE boarding_platform_last_success_age_seconds gauge
      boarding_platform_last_success_age_seconds 4

      # HELP boarding_leader 1 while this replica leads (boards, runs the scheduled jobs), 0 on a standby
      # TYPE boarding_leader gauge
      boarding_leader 1

      # HELP boarding_leader_epoch The lease epoch this replica leads in (the fencing token); 0 on a standby
      # TYPE boarding_leader_epoch gauge
      boarding_leader_epoch 4

      # HELP boarding_leadership_acquisitions_total Times this replica became leader (a takeover after a failover, or a start)
      # TYPE boarding_leadership_acquisitions_total counter
      boarding_leadership_acquisitions_total 2

      # HELP boarding_mapping_info The mapping version loans are mapped with (value 1; the version is the label)
      # TYPE boarding_mapping_info gauge
      boarding_mapping_info{version="generic@3"} 1

      # HELP boarding_mapping_reload_failed 1 when the last mapping reload was refused (the set on disk does not lint; the loaded one keeps boarding)
      # TYPE boarding_mapping_reload_failed gauge
      boarding_mapping_reload_failed 1

      # HELP boarding_disk_free_bytes Free bytes where the connector writes, by config key (store.path: the state directory; core.file.dir); boarding stops below boarding.minFreeDiskMb
      # TYPE boarding_disk_free_bytes gauge
      boarding_disk_free_bytes{dir="store.path"} 1048576

      # HELP boarding_disk_full 1 while a watched directory has less than boarding.minFreeDiskMb free (boarding stopped)
      # TYPE boarding_disk_full gauge
      boarding_disk_full 1

      # HELP boarding_core_outage 1 while the last boarding pass stopped because the core did not take writes (down, timing out, or its disk full)
      # TYPE boarding_core_outage gauge
      boarding_core_outage 1

      # HELP boarding_clock_offset_seconds The state database's clock minus this host's (PostgreSQL; positive: this host is behind); /readyz fails at store.maxClockSkewMs
      # TYPE boarding_clock_offset_seconds gauge
      boarding_clock_offset_seconds 1.5

      # HELP boarding_imaging_folder_missing 1 while imaging.dir does not exist or cannot be read (loans wait for it)
      # TYPE boarding_imaging_folder_missing gauge
      boarding_imaging_folder_missing 0

      # HELP boarding_imaging_batches_waiting Batch folders in imaging.dir with their ready marker, not taken by the importer yet
      # TYPE boarding_imaging_batches_waiting gauge
      boarding_imaging_batches_waiting 3

      # HELP boarding_imaging_oldest_waiting_seconds Age of the oldest waiting batch folder's ready marker (0 when none waits)
      # TYPE boarding_imaging_oldest_waiting_seconds gauge
      boarding_imaging_oldest_waiting_seconds 2700

      # HELP boarding_imaging_stale_batches Batch folders waiting longer than imaging.staleAfter: the importer is not draining the folder
      # TYPE boarding_imaging_stale_batches gauge
      boarding_imaging_stale_batches 1

      # HELP boarding_trace_spans_exported_total Spans the OTLP collector took (telemetry.otlp.endpoint; 0 while traces are off)
      # TYPE boarding_trace_spans_exported_total counter
      boarding_trace_spans_exported_total 0

      # HELP boarding_trace_spans_dropped_total Spans lost instead of exported, by reason: queue_full (the bounded queue had no room), export_failed (the collector refused, was down or slower than telemetry.otlp.timeoutMs)
      # TYPE boarding_trace_spans_dropped_total counter

      # HELP boarding_metric_source_up 1 when a metrics source answered at this scrape, 0 when it failed (the metrics it feeds are left out of the scrape; the log says why)
      # TYPE boarding_metric_source_up gauge
      boarding_metric_source_up{source="api_calls"} 1
      boarding_metric_source_up{source="clock_skew"} 1
      boarding_metric_source_up{source="core_outage"} 1
      boarding_metric_source_up{source="db"} 1
      boarding_metric_source_up{source="disk"} 1
      boarding_metric_source_up{source="imaging"} 1
      boarding_metric_source_up{source="inbox"} 1
      boarding_metric_source_up{source="leadership"} 1
      boarding_metric_source_up{source="mapping"} 1
      boarding_metric_source_up{source="number_pools"} 1
      boarding_metric_source_up{source="platform"} 1
      "
    `);
  });

  it('a source that throws leaves its family empty and the scrape whole', async () => {
    const metrics = createConnectorMetrics({
      clock: new FakeClock(),
      processMetrics: false,
      mapping: () => {
        throw new Error('mapping set reloading');
      },
      numberPools: () => Promise.reject(new Error('pool table busy')),
    });
    const text = await metrics.render();
    expect(text).toContain('# TYPE boarding_clock_offset_seconds gauge');
    expect(text).not.toMatch(/^boarding_number_pool_used_ratio\{/m);
    expect(text).not.toMatch(/^boarding_mapping_info\{/m);
  });

  it('a gauge whose source is missing or throws is left out of the scrape, not 0 ("standby", "disk fine") nor the last scrape that worked', async () => {
    let leadershipUp = true;
    const metrics = createConnectorMetrics({
      clock: new FakeClock(),
      processMetrics: false,
      leadership: () => {
        if (!leadershipUp) throw new Error('database unreachable');
        return { role: 'leader', epoch: 7, holder: 'h', acquisitions: 1 };
      },
      disk: () => {
        throw new Error('statfs failed');
      },
    });
    const first = await metrics.render();
    expect(first).toMatch(/^boarding_leader 1$/m);
    expect(first).toMatch(/^boarding_leader_epoch 7$/m);
    expect(first).not.toMatch(/^boarding_disk_full\s/m);
    expect(first).toMatch(/^boarding_metric_source_up\{source="disk"\} 0$/m);
    // No source at all in this process: nothing to say, not "not stopped".
    expect(first).not.toMatch(/^boarding_platform_traffic_stopped\s/m);
    expect(first).not.toMatch(/^boarding_core_outage\s/m);
    expect(first).not.toMatch(/source="platform"/);
    leadershipUp = false;
    const second = await metrics.render();
    expect(second).not.toMatch(/^boarding_leader\s/m);
    expect(second).not.toMatch(/^boarding_leader_epoch\s/m);
    expect(second).not.toMatch(/NaN/i);
    expect(second).toMatch(/^boarding_metric_source_up\{source="leadership"\} 0$/m);
  });
});
