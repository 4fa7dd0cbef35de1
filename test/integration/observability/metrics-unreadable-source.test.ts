import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { createLogger } from '../../../src/lib/logger.js';
import { createApp } from '../../../src/http/app.js';
import { startHttpServer } from '../../../src/http/server.js';
import { createConnectorMetrics } from '../../../src/observability/metrics.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The ops listener of a connector whose leadership view throws (the database is unreachable). */
async function startScrape(opts: { leadershipFails: () => boolean; platformFails: () => boolean }) {
  const dir = mkdtempSync(join(tmpdir(), 'metrics-source-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  const store = sqliteStore(db);
  const inbox = createWebhookInbox(store);
  const logs: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(s) } });
  const metrics = createConnectorMetrics({
    clock: systemClock,
    processMetrics: false,
    db: store,
    inbox,
    logger,
    leadership: () => {
      if (opts.leadershipFails()) throw new Error('connect ECONNREFUSED 10.0.0.5:5432');
      return { role: 'leader', epoch: 3, holder: 'h:1:a', acquisitions: 1 };
    },
    platformHealth: () => {
      if (opts.platformFails()) throw new Error('rate ledger unreadable');
      return { lastSuccessAt: null, strikes24h: 0, trafficStopped: false, budgets: [] };
    },
  });
  const app = createApp({
    clock: systemClock,
    config: { scheme: 'standard', secrets: [], toleranceSeconds: 300, maxBodyBytes: 65_536 },
    inbox,
    logger,
    metrics,
  });
  const server = await startHttpServer(app, '127.0.0.1', 0);
  cleanups.push(async () => {
    await server.close(100);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const scrape = async () => {
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    return res.text();
  };
  return { scrape, logs, db };
}

describe('/metrics with a source that cannot be read', () => {
  it('leaves boarding_leader out (never "0", which reads as standby), says source_up 0, and logs the reason once', async () => {
    let leadershipFails = false;
    const { scrape, logs } = await startScrape({
      leadershipFails: () => leadershipFails,
      platformFails: () => false,
    });

    const healthy = await scrape();
    expect(healthy).toMatch(/^boarding_leader 1$/m);
    expect(healthy).toMatch(/^boarding_metric_source_up\{source="leadership"\} 1$/m);
    expect(healthy).toMatch(/^boarding_platform_traffic_stopped 0$/m);

    leadershipFails = true;
    const failing = await scrape();
    // No sample at all: not 0 ("standby"), not NaN, not the last value read (1).
    expect(failing).not.toMatch(/^boarding_leader\s/m);
    expect(failing).not.toMatch(/^boarding_leader_epoch\s/m);
    expect(failing).toMatch(/^boarding_metric_source_up\{source="leadership"\} 0$/m);
    // The other sources are untouched.
    expect(failing).toMatch(/^boarding_metric_source_up\{source="platform"\} 1$/m);
    expect(failing).toMatch(/^boarding_loans\{state="queued"\} 0$/m);
    await scrape();
    const warned = logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l['source'] === 'leadership');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, reason: 'connect ECONNREFUSED 10.0.0.5:5432' });

    leadershipFails = false;
    const recovered = await scrape();
    expect(recovered).toMatch(/^boarding_leader 1$/m);
    expect(recovered).toMatch(/^boarding_metric_source_up\{source="leadership"\} 1$/m);
  });

  it('leaves the platform gauges out when the platform health throws, not traffic_stopped 0 ("not stopped")', async () => {
    const { scrape } = await startScrape({ leadershipFails: () => false, platformFails: () => true });
    const text = await scrape();
    expect(text).not.toMatch(/^boarding_platform_traffic_stopped\s/m);
    expect(text).not.toMatch(/^boarding_platform_rate_limit_strikes_24h\s/m);
    expect(text).toMatch(/^boarding_metric_source_up\{source="platform"\} 0$/m);
    expect(text).toMatch(/^boarding_leader 1$/m);
  });

  it('leaves the database counts out when the state database is closed, not loans_boarded_total 0', async () => {
    const { scrape, db } = await startScrape({ leadershipFails: () => false, platformFails: () => false });
    expect(await scrape()).toMatch(/^boarding_loans_boarded_total 0$/m);
    db.close();
    const text = await scrape();
    expect(text).not.toMatch(/^boarding_loans_boarded_total\s/m);
    expect(text).not.toMatch(/^boarding_oldest_unacknowledged_age_seconds\s/m);
    expect(text).toMatch(/^boarding_metric_source_up\{source="db"\} 0$/m);
  });
});
