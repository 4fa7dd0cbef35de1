import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import type { WebhookService } from '../../../src/app/webhook-service.js';
import { startWebhookService } from '../../support/webhook-service.js';
import { CHART_DIR } from '../../support/chart.js';

/**
 * The alerts (files/alerts.yaml, the chart's PrometheusRule) and the Grafana dashboard
 * (files/dashboard.json) name only metrics the daemon exports: every `boarding_*` name in every
 * expression is looked up in a live scrape of /metrics from the admin listener as `run` builds it.
 * promtool (Debian's `prometheus`, installed by scripts/ci-setup.sh) checks the rules and, as
 * recording rules, every panel's query.
 */
const ALERTS = join(CHART_DIR, 'files/alerts.yaml');
const DASHBOARD = join(CHART_DIR, 'files/dashboard.json');

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}
const rules = (parse(readFileSync(ALERTS, 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap(
  (g) => g.rules,
);
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
  panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
};
const panelQueries = dashboard.panels.flatMap((p) =>
  p.targets.map((t) => ({ title: p.title, expr: t.expr })),
);

/** The metric names a PromQL expression reads (a histogram's _bucket/_count/_sum series by its family). */
function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\bboarding_[a-z0-9_]+/g)].map((m) => m[0]))];
}

function family(name: string, exported: Set<string>): string | null {
  if (exported.has(name)) return name;
  const base = name.replace(/_(bucket|count|sum)$/, '');
  return exported.has(base) ? base : null;
}

let svc: WebhookService;
let db: Db;
let exported: Set<string>;
beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'monitoring-'));
  db = openDatabase(join(dir, 'state.sqlite'));
  svc = await startWebhookService({ db, dir, secret: 'whsec_bW9uaXRvcmluZy10ZXN0LXNlY3JldA==' });
  const text = await (await fetch(`${svc.adminUrl()!}/metrics`)).text();
  exported = new Set([...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]!));
});
afterAll(async () => {
  await svc?.stop();
  db?.close();
});

describe('alerts and dashboard name only exported metrics', () => {
  it('the live scrape exports the families the rules are about', () => {
    for (const name of ['boarding_leader', 'boarding_loans', 'boarding_platform_rate_limit_strikes_24h'])
      expect(exported.has(name), name).toBe(true);
  });

  it('every alert expression names only exported metrics', () => {
    expect(rules.length).toBeGreaterThanOrEqual(10);
    for (const r of rules) {
      const names = metricNames(r.expr);
      expect(names.length, `${r.alert}: names no boarding_ metric`).toBeGreaterThan(0);
      for (const n of names) expect(family(n, exported), `${r.alert}: ${n} is not exported`).not.toBeNull();
    }
  });

  it('every dashboard panel query names only exported metrics', () => {
    expect(panelQueries.length).toBeGreaterThanOrEqual(20);
    for (const q of panelQueries)
      for (const n of metricNames(q.expr))
        expect(family(n, exported), `panel "${q.title}": ${n} is not exported`).not.toBeNull();
  });

  it('the check itself catches a name the daemon does not export', () => {
    expect(family('boarding_backups_taken_total', exported)).toBeNull();
    expect(family('boarding_cycle_duration_seconds_bucket', exported)).toBe(
      'boarding_cycle_duration_seconds',
    );
  });

  it('the alerts the issue asks for are there, each with a runbook link into the docs', () => {
    const names = rules.map((r) => r.alert);
    for (const a of [
      'BoardingConnectorNoLeader',
      'BoardingConnectorTwoLeaders',
      'BoardingConnectorRateLimitStrike',
      'BoardingConnectorTrafficStopped',
      'BoardingConnectorQuarantineGrowing',
      'BoardingConnectorOldestLoanWaiting',
      'BoardingConnectorDiskFull',
      'BoardingConnectorClockSkew',
      'BoardingConnectorWebhooksRejected',
      'BoardingConnectorPlatformSilent',
      'BoardingConnectorBackupsNotTaken',
    ])
      expect(names).toContain(a);
    const docs = {
      'operations.md': readFileSync('docs/operations.md', 'utf8'),
      'deploy.md': readFileSync('docs/deploy.md', 'utf8'),
    };
    const anchors = (md: string) =>
      new Set(
        [...md.matchAll(/^#+ (.+)$/gm)].map((m) =>
          m[1]!
            .toLowerCase()
            .replace(/[^a-z0-9 -]/g, '')
            .replace(/ /g, '-'),
        ),
      );
    for (const r of rules) {
      const m = /docs\/(operations\.md|deploy\.md)#([a-z0-9-]+)$/.exec(r.annotations?.['runbook_url'] ?? '');
      expect(m, `${r.alert}: runbook_url`).not.toBeNull();
      expect(anchors(docs[m![1] as keyof typeof docs]).has(m![2]!), `${r.alert}: #${m![2]} in ${m![1]}`).toBe(
        true,
      );
    }
  });
});

const promtool = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim();
if (!promtool)
  process.stderr.write('\n[monitoring tests] promtool SKIPPED: not installed (scripts/ci-setup.sh)\n\n');

describe.skipIf(!promtool)('promtool', () => {
  it('check rules: the alert file is valid', () => {
    const r = spawnSync(promtool, ['check', 'rules', ALERTS], { encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  it('check rules: every dashboard query parses as PromQL (as recording rules)', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'dashboard-rules-')), 'dashboard.rules.yaml');
    writeFileSync(
      file,
      stringify({
        groups: [
          {
            name: 'dashboard',
            rules: panelQueries.map((q, i) => ({ record: `dashboard:panel_${i}`, expr: q.expr })),
          },
        ],
      }),
    );
    const r = spawnSync(promtool, ['check', 'rules', file], { encoding: 'utf8' });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });
});
