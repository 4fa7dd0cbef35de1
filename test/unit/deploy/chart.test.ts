import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import * as k8s from 'kubernetes-models';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { loadConfig } from '../../../src/config/load.js';
import { tracingSettings } from '../../../src/observability/tracing.js';
import { chartRenderer, find, renderChart, type K8sObject } from '../../support/chart.js';

/**
 * The Helm chart (deploy/helm/boarding-connector) as a cluster would take it: every documented values
 * file rendered (helm template, or scripts/chart-render where this machine has no helm: see
 * test/support/chart.ts), every object validated against the Kubernetes API schemas of
 * kubernetes-models (and the Prometheus Operator's for ServiceMonitor/PrometheusRule), and the rules
 * that decide failover: probes, grace period, rollout, disruption budget, secrets, security context.
 */
const renderer = chartRenderer();
const skip = renderer.kind === 'none' ? renderer.reason : null;
if (skip) process.stderr.write(`\n[chart tests] SKIPPED: ${skip}\n\n`);

const SECRETS = {
  apiKey: 'pk_live_chart_test_key_1',
  webhookSecrets: 'whsec_Y2hhcnQtdGVzdC1zZWNyZXQ=',
  storePassword: 'chart-test-db-password',
  tinHashKey: 'chart-test-tin-hash-key',
};

/** The documented values files, as docs/deploy.md "Kubernetes" installs them. */
const PROFILES: Array<{ name: string; files: string[]; values: Record<string, unknown> }> = [
  { name: 'values.yaml (defaults, secrets given)', files: [], values: { secrets: SECRETS } },
  { name: 'values-production.yaml', files: ['values-production.yaml'], values: {} },
  { name: 'values-sqlite.yaml', files: ['values-sqlite.yaml'], values: {} },
];

/** kubernetes-models' class for an apiVersion/kind, e.g. apps/v1 Deployment → k8s.apps.v1.Deployment. */
function modelOf(o: K8sObject): { validate(): void } {
  if (o.apiVersion === 'monitoring.coreos.com/v1' && o.kind === 'PrometheusRule')
    return new PrometheusRule(o as never);
  if (o.apiVersion === 'monitoring.coreos.com/v1' && o.kind === 'ServiceMonitor')
    return new ServiceMonitor(o as never);
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const ns = group === '' ? (k8s as Record<string, unknown>)[version!] : groupModule(group!)?.[version!];
  const Model = (ns as Record<string, new (o: unknown) => { validate(): void }> | undefined)?.[o.kind];
  if (!Model) throw new Error(`no Kubernetes schema for ${o.apiVersion} ${o.kind}`);
  return new Model(o);
}
function groupModule(group: string): Record<string, unknown> | undefined {
  // networking.k8s.io → networkingK8sIo; apps → apps; policy → policy
  const key = group.replace(/\.([a-z])/g, (_, c: string) => c.toUpperCase());
  return (k8s as Record<string, Record<string, unknown>>)[key];
}

const deployment = (objects: K8sObject[]) =>
  find(objects, 'Deployment') as K8sObject & {
    spec: {
      replicas: number;
      strategy: { type: string; rollingUpdate?: { maxSurge: number; maxUnavailable: number } };
      template: {
        metadata: { annotations: Record<string, string> };
        spec: {
          terminationGracePeriodSeconds: number;
          securityContext: Record<string, unknown>;
          affinity: Record<string, unknown>;
          containers: Array<{
            args: string[];
            env: Array<{ name: string; value?: string }>;
            envFrom: Array<{ secretRef: { name: string } }>;
            securityContext: Record<string, unknown>;
            livenessProbe: { httpGet: { path: string; port: string } };
            readinessProbe: { httpGet: { path: string; port: string } };
            startupProbe: { httpGet: { path: string; port: string } };
            volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
          }>;
          volumes: Array<{ name: string; emptyDir?: unknown; persistentVolumeClaim?: { claimName: string } }>;
        };
      };
    };
  };

describe.skipIf(skip !== null)(`the Helm chart (rendered with ${renderer.kind})`, () => {
  for (const p of PROFILES) {
    it(`${p.name}: every rendered object validates against the Kubernetes API schema`, () => {
      const { objects } = renderChart(renderer, { files: p.files, values: p.values });
      expect(objects.length).toBeGreaterThan(5);
      for (const o of objects) {
        expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe('boarding');
        expect(() => modelOf(o).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
      }
    });

    it(`${p.name}: the ConfigMap is a config the connector loads (with the Secret's env), and holds no secret`, () => {
      const { objects } = renderChart(renderer, { files: p.files, values: p.values });
      const cm = find(objects, 'ConfigMap') as K8sObject & { data: Record<string, string> };
      const text = cm.data['config.yaml']!;
      for (const secret of Object.values(SECRETS)) expect(text).not.toContain(secret);
      const secret = objects.find((o) => o.kind === 'Secret') as
        (K8sObject & { data: Record<string, string> }) | undefined;
      // values-production/values-sqlite name an existing Secret: stand-ins for its keys.
      const env: Record<string, string> = {
        BOARDING_API_KEY: 'pk_live_from_existing_secret',
        BOARDING_STORE_PASSWORD: 'existing-secret-db-password',
        BOARDING_TIN_HASH_KEY: 'existing-secret-tin-hash-key',
        // Only an HTTP core needs its password: a file core must load without one.
        ...(text.includes('adapter: "http"')
          ? { BOARDING_CORE_PASSWORD: 'existing-secret-core-password' }
          : {}),
      };
      for (const [k, v] of Object.entries(secret?.data ?? {}))
        env[k] = Buffer.from(v, 'base64').toString('utf8');
      const config = loadConfig({
        fileText: text,
        filePath: 'config.yaml (ConfigMap)',
        env,
        cwd: '/app',
        exists: () => true,
      });
      expect(config.webhooks.host).toBe('0.0.0.0');
      expect(config.admin.host).toBe('0.0.0.0');
      expect(config.admin.allowedHosts).toContain('localhost');
      const d = deployment(objects);
      // The env holds no literal secret: secrets come only through envFrom's secretRef.
      for (const e of d.spec.template.spec.containers[0]!.env)
        expect(e.name).not.toMatch(/KEY|SECRET|PASSWORD/);
    });
  }

  it('probes follow the daemon: liveness is the process (/healthz on the admin listener, also while it waits for its database), readiness is /readyz', () => {
    const { objects } = renderChart(renderer, { values: { secrets: SECRETS } });
    const c = deployment(objects).spec.template.spec.containers[0]!;
    expect(c.livenessProbe.httpGet).toMatchObject({ path: '/healthz', port: 'admin' });
    expect(c.startupProbe.httpGet).toMatchObject({ path: '/healthz', port: 'admin' });
    expect(c.readinessProbe.httpGet).toMatchObject({ path: '/readyz', port: 'admin' });
    expect(c.args).toEqual(['run', '--config', '/etc/boarding-connector/config.yaml']);
  });

  it('the grace period outlasts the shutdown (shutdownTimeoutMs + 30 s), and a shorter one is refused naming the key', () => {
    const grace = (values: Record<string, unknown>) =>
      deployment(renderChart(renderer, { values: { secrets: SECRETS, ...values } }).objects).spec.template
        .spec.terminationGracePeriodSeconds;
    expect(grace({})).toBe(60);
    expect(grace({ config: { boarding: { shutdownTimeoutMs: 90_000 } } })).toBe(120);
    expect(grace({ terminationGracePeriodSeconds: 45 })).toBe(45);
    expect(() =>
      renderChart(renderer, { values: { secrets: SECRETS, terminationGracePeriodSeconds: 20 } }),
    ).toThrow(/terminationGracePeriodSeconds 20 is below config.boarding.shutdownTimeoutMs/);
  });

  it('replicas on PostgreSQL roll one at a time and never both down: maxUnavailable 0, PDB maxUnavailable 1, spread across nodes', () => {
    const { objects } = renderChart(renderer, { values: { secrets: SECRETS } });
    const d = deployment(objects);
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    });
    const pdb = find(objects, 'PodDisruptionBudget') as K8sObject & { spec: { maxUnavailable: number } };
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(JSON.stringify(d.spec.template.spec.affinity)).toContain('kubernetes.io/hostname');
  });

  it('restricted security context: non-root, read-only root, no escalation, no capabilities, RuntimeDefault seccomp; writable volumes only for data and /tmp', () => {
    const { objects } = renderChart(renderer, { values: { secrets: SECRETS } });
    const spec = deployment(objects).spec.template.spec;
    expect(spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const c = spec.containers[0]!;
    expect(c.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const writable = c.volumeMounts
      .filter((m) => m.readOnly !== true)
      .map((m) => m.mountPath)
      .sort();
    expect(writable).toEqual(['/tmp', '/var/lib/boarding-connector']);
  });

  it('the NetworkPolicy admits the webhook port from the ingress namespace and the admin port from monitoring only', () => {
    const { objects } = renderChart(renderer, { values: { secrets: SECRETS } });
    const np = find(objects, 'NetworkPolicy') as K8sObject & {
      spec: { policyTypes: string[]; ingress: Array<{ from: unknown[]; ports: Array<{ port: string }> }> };
    };
    expect(np.spec.policyTypes).toEqual(['Ingress']);
    expect(np.spec.ingress.map((r) => r.ports.map((p) => p.port))).toEqual([['webhook'], ['admin']]);
    expect(JSON.stringify(np.spec.ingress[0]!.from)).toContain('ingress-nginx');
    expect(JSON.stringify(np.spec.ingress[1]!.from)).toContain('monitoring');
  });

  it('values-production.yaml: Ingress publishes only the receiver route; ServiceMonitor scrapes the admin port; the PrometheusRule carries every alert with the runbook base', () => {
    const { objects } = renderChart(renderer, {
      files: ['values-production.yaml'],
      values: { prometheusRule: { runbookBaseUrl: 'https://wiki.bank.example/bc/' } },
    });
    const ing = find(objects, 'Ingress') as K8sObject & {
      spec: {
        rules: Array<{
          http: { paths: Array<{ path: string; backend: { service: { port: { name: string } } } }> };
        }>;
      };
    };
    expect(ing.spec.rules[0]!.http.paths).toEqual([
      expect.objectContaining({
        path: '/webhooks/platform',
        backend: expect.objectContaining({ service: expect.objectContaining({ port: { name: 'webhook' } }) }),
      }),
    ]);
    const sm = find(objects, 'ServiceMonitor') as K8sObject & {
      spec: { endpoints: Array<{ port: string; path: string }> };
    };
    expect(sm.spec.endpoints[0]).toMatchObject({ port: 'admin', path: '/metrics' });
    const rule = find(objects, 'PrometheusRule') as K8sObject & {
      spec: { groups: Array<{ rules: Array<{ alert: string; annotations: { runbook_url: string } }> }> };
    };
    const rules = rule.spec.groups.flatMap((g) => g.rules);
    expect(rules.length).toBeGreaterThanOrEqual(10);
    for (const r of rules)
      expect(r.annotations.runbook_url, r.alert).toMatch(
        /^https:\/\/wiki\.bank\.example\/bc\/docs\/(operations|deploy)\.md#/,
      );
    expect(objects.some((o) => o.kind === 'Secret')).toBe(false); // existingSecret
    expect(deployment(objects).spec.template.spec.containers[0]!.envFrom[0]!.secretRef.name).toBe(
      'boarding-connector-secrets',
    );
  });

  it('values-sqlite.yaml: one pod, Recreate (a ReadWriteOnce volume), the state on a claim; several replicas on SQLite are refused', () => {
    const { objects } = renderChart(renderer, { files: ['values-sqlite.yaml'] });
    const d = deployment(objects);
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.strategy).toEqual({ type: 'Recreate' });
    const data = d.spec.template.spec.volumes.find((v) => v.name === 'data')!;
    expect(data.persistentVolumeClaim?.claimName).toBe(find(objects, 'PersistentVolumeClaim').metadata.name);
    expect(objects.some((o) => o.kind === 'PodDisruptionBudget')).toBe(false);
    expect(() =>
      renderChart(renderer, { files: ['values-sqlite.yaml'], values: { replicaCount: 2 } }),
    ).toThrow(/replicaCount 2 with config.store.engine sqlite/);
  });

  it('a secret put in config is refused, naming the key and where it belongs', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { platform: { apiKey: 'pk_live_oops' } },
        /config\.platform\.apiKey: a secret in the ConfigMap; set secrets\.apiKey/,
      ],
      [{ webhooks: { secrets: ['whsec_x'] } }, /config\.webhooks\.secrets/],
      [{ store: { postgres: { password: 'pw' } } }, /config\.store\.postgres\.password/],
      [{ customers: { tinHashKey: 'k' } }, /config\.customers\.tinHashKey/],
    ];
    for (const [config, message] of cases)
      expect(() => renderChart(renderer, { values: { secrets: SECRETS, config } })).toThrow(message);
    expect(() => renderChart(renderer, {})).toThrow(
      /secrets\.apiKey \(or secrets\.existingSecret\) is required/,
    );
  });

  it('traces: config.telemetry reaches the ConfigMap, the collector headers only the Secret, and the pod turns traces on', () => {
    const headers = 'x-vendor-key=otlp-secret-4f1c';
    const { objects } = renderChart(renderer, {
      values: {
        secrets: { ...SECRETS, corePassword: 'chart-test-core-password', otlpHeaders: headers },
        config: {
          telemetry: {
            otlp: { endpoint: 'http://otel-collector.observability:4318' },
            sampling: { ratio: 0.5 },
          },
        },
      },
    });
    const text = (find(objects, 'ConfigMap') as K8sObject & { data: Record<string, string> }).data[
      'config.yaml'
    ]!;
    expect(text).not.toContain('otlp-secret-4f1c');
    const secret = find(objects, 'Secret') as K8sObject & { data: Record<string, string> };
    const env = Object.fromEntries(
      Object.entries(secret.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );
    expect(env['OTEL_EXPORTER_OTLP_HEADERS']).toBe(headers);
    const config = loadConfig({ fileText: text, env, cwd: '/app', exists: () => true });
    expect(tracingSettings(config.telemetry, env, 'v')).toMatchObject({
      url: 'http://otel-collector.observability:4318/v1/traces',
      sampleRatio: 0.5,
    });
  });

  it('a config change rolls the pods (checksum of the config in the pod template)', () => {
    const a = deployment(renderChart(renderer, { values: { secrets: SECRETS } }).objects);
    const b = deployment(
      renderChart(renderer, { values: { secrets: SECRETS, config: { bank: { timeZone: 'Europe/Berlin' } } } })
        .objects,
    );
    expect(a.spec.template.metadata.annotations['checksum/config']).toMatch(/^[0-9a-f]{64}$/);
    expect(b.spec.template.metadata.annotations['checksum/config']).not.toBe(
      a.spec.template.metadata.annotations['checksum/config'],
    );
  });
});

describe('values.schema.json', () => {
  it('parses and describes every top-level key of values.yaml', async () => {
    const { readFileSync } = await import('node:fs');
    const { CHART_DIR } = await import('../../support/chart.js');
    const schema = JSON.parse(readFileSync(`${CHART_DIR}/values.schema.json`, 'utf8')) as {
      properties: Record<string, unknown>;
      additionalProperties: boolean;
    };
    const values = parse(readFileSync(`${CHART_DIR}/values.yaml`, 'utf8')) as Record<string, unknown>;
    expect(Object.keys(schema.properties).sort()).toEqual(Object.keys(values).sort());
    expect(schema.additionalProperties).toBe(false);
  });
});
