import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { safeId } from '../../src/core/safe-name.js';
import { chartRenderer, find, renderChart, type K8sObject } from '../support/chart.js';
import {
  MAIN,
  coreRecords,
  loanStates,
  sealOpenBatches,
  sleep,
  startFailoverSet,
  startPgServer,
  until,
  type FailoverSet,
  type PgServer,
} from '../support/failover.js';

/**
 * The chart's rollout rule, run as a cluster would run it (issue 46): two replicas started exactly as
 * the rendered Deployment's container says (its args, its env, the rendered Secret's keys as
 * environment, the rendered ConfigMap as the config file), probed as the kubelet probes them (the
 * chart's paths, ports, Host header, periods and thresholds), and rolled as the Deployment
 * controller rolls them with the chart's strategy (maxSurge 1, maxUnavailable 0: a new pod must be
 * ready before an old one gets SIGTERM; SIGKILL at terminationGracePeriodSeconds) against the
 * sandbox and the test PostgreSQL, while loans board. Nothing may be lost or boarded twice.
 * The one deviation: pods have their own addresses, processes on one host do not, so each
 * replica's copy of the config gets its own ports.
 */
const LOANS = 120;
const RATE = { windowMs: 2000, readsPerWindow: 40, writesPerWindow: 10 };
const LEASE = { ttlMs: 4000, renewEveryMs: 1000 };

const renderer = chartRenderer();
const server: PgServer | { skip: string } = startPgServer();
const skip = renderer.kind === 'none' ? renderer.reason : 'skip' in server ? server.skip : null;
if (skip) process.stderr.write(`\n[helm rollout] SKIPPED: ${skip}\n\n`);
const pgServer = server as PgServer;

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  if (!('skip' in server)) pgServer.destroy();
});

interface Probe {
  httpGet: { path: string; port: string; httpHeaders?: Array<{ name: string; value: string }> };
  periodSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
}
interface Container {
  args: string[];
  env: Array<{ name: string; value: string }>;
  envFrom: Array<{ secretRef: { name: string } }>;
  ports: Array<{ name: string; containerPort: number }>;
  volumeMounts: Array<{ name: string; mountPath: string }>;
  startupProbe: Probe;
  livenessProbe: Probe;
  readinessProbe: Probe;
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

/** One kubelet HTTP probe: success is a 2xx/3xx answer within timeoutSeconds. */
function probeOnce(p: Probe, ports: Record<string, number>): Promise<boolean> {
  const headers = Object.fromEntries((p.httpGet.httpHeaders ?? []).map((h) => [h.name, h.value]));
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: ports[p.httpGet.port],
        path: p.httpGet.path,
        headers,
        timeout: p.timeoutSeconds * 1000,
      },
      (res) => {
        res.resume();
        resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** A pod: the container's process, and the kubelet's three probes on it at the chart's periods. */
class Pod {
  child: ChildProcess;
  started = false;
  ready = false;
  terminating = false;
  livenessKills = 0;
  private timers: NodeJS.Timeout[] = [];
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly name: string,
    readonly c: Container,
    readonly ports: Record<string, number>,
    configPath: string,
    env: Record<string, string>,
    logDir: string,
  ) {
    // The image's ENTRYPOINT is ["node", "dist/main.js"]; the chart gives the args; the mount path
    // of the ConfigMap is where this pod's copy of config.yaml is.
    const mount = c.volumeMounts.find((m) => m.name === 'config')!.mountPath;
    const args = c.args.map((a) => (a === `${mount}/config.yaml` ? configPath : a));
    const containerEnv = Object.fromEntries(
      c.env.map((e) => [e.name, e.value === `${mount}/config.yaml` ? configPath : e.value]),
    );
    this.child = spawn(process.execPath, [MAIN, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      // A container's environment: the image's ENV, the container's env and envFrom; nothing of ours.
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', NODE_ENV: 'production', ...containerEnv, ...env },
    });
    this.child.stderr!.pipe(createWriteStream(join(logDir, `${name}.log`)));
    this.exit = new Promise((r) => this.child.once('exit', (code, signal) => r({ code, signal })));
    this.kubelet();
  }

  private every(p: Probe, fn: (ok: boolean) => void): void {
    let inFlight = false;
    this.timers.push(
      setInterval(() => {
        if (inFlight) return;
        inFlight = true;
        void probeOnce(p, this.ports).then((ok) => {
          inFlight = false;
          fn(ok);
        });
      }, p.periodSeconds * 1000),
    );
  }

  /** Startup first; then liveness (failureThreshold misses in a row: the kubelet kills) and readiness. */
  private kubelet(): void {
    let startupMisses = 0;
    let livenessMisses = 0;
    this.every(this.c.startupProbe, (ok) => {
      if (this.started) return;
      if (ok) this.started = true;
      else if (++startupMisses >= this.c.startupProbe.failureThreshold) this.livenessKills += 1;
    });
    this.every(this.c.livenessProbe, (ok) => {
      if (!this.started || this.terminating) return;
      livenessMisses = ok ? 0 : livenessMisses + 1;
      if (livenessMisses >= this.c.livenessProbe.failureThreshold) this.livenessKills += 1;
    });
    this.every(this.c.readinessProbe, (ok) => {
      if (!this.started) return;
      this.ready = ok && !this.terminating;
    });
  }

  /** The kubelet's stop: SIGTERM, then SIGKILL once the grace period has passed. */
  async terminate(
    graceSeconds: number,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean }> {
    this.terminating = true;
    this.ready = false;
    this.child.kill('SIGTERM');
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      this.child.kill('SIGKILL');
    }, graceSeconds * 1000);
    const r = await this.exit;
    clearTimeout(timer);
    this.stopProbes();
    return { ...r, killed };
  }

  stopProbes(): void {
    for (const t of this.timers) clearInterval(t);
  }
}

describe.skipIf(skip !== null)('helm chart rollout: two replicas as the chart runs them', () => {
  it('a rolling restart of both replicas (maxSurge 1, maxUnavailable 0, SIGTERM then SIGKILL at the grace period) loses and duplicates nothing', async () => {
    const set: FailoverSet = await startFailoverSet({
      pg: pgServer,
      loans: LOANS,
      seed: 46,
      ...RATE,
      leadership: LEASE,
    });
    cleanups.push(() => set.close());
    // The failover harness's config (sandbox, PostgreSQL over TLS, shared file core) as chart values:
    // its secrets move to the Secret, its listeners are the chart's.
    const base = parse(readFileSync(set.configPath, 'utf8')) as Record<string, Record<string, unknown>>;
    const apiKey = base['platform']!['apiKey'] as string;
    const tinHashKey = base['customers']!['tinHashKey'] as string;
    delete base['platform']!['apiKey'];
    delete base['customers'];
    delete base['webhooks'];
    delete base['admin'];
    // The defaults' Fineract settings do not apply to this file core (null deletes a default).
    base['core'] = { ...base['core'], http: null };
    const { objects } = renderChart(renderer, {
      values: {
        config: base,
        secrets: {
          apiKey,
          tinHashKey,
          storePassword: pgServer.password,
          webhookSecrets: 'whsec_cm9sbG91dC10ZXN0LXNlY3JldA==',
        },
        persistence: { enabled: true, existingClaim: 'shared-core' },
      },
    });
    const deployment = find(objects, 'Deployment') as K8sObject & {
      spec: {
        replicas: number;
        strategy: { rollingUpdate: { maxSurge: number; maxUnavailable: number } };
        template: { spec: { terminationGracePeriodSeconds: number; containers: Container[] } };
      };
    };
    const container = deployment.spec.template.spec.containers[0]!;
    const grace = deployment.spec.template.spec.terminationGracePeriodSeconds;
    expect(deployment.spec.strategy.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    const configText = (find(objects, 'ConfigMap') as K8sObject & { data: Record<string, string> }).data[
      'config.yaml'
    ]!;
    const secret = find(objects, 'Secret') as K8sObject & { data: Record<string, string> };
    expect(container.envFrom[0]!.secretRef.name).toBe(secret.metadata.name);
    const secretEnv = Object.fromEntries(
      Object.entries(secret.data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );

    const dir = join(set.logDir, '..', 'pods');
    mkdirSync(dir, { recursive: true });
    let podSeq = 0;
    const startPod = async (): Promise<Pod> => {
      const name = `pod-${++podSeq}`;
      const ports: Record<string, number> = { webhook: await freePort(), admin: await freePort() };
      const cfg = parse(configText) as Record<string, Record<string, unknown>>;
      cfg['webhooks']!['port'] = ports['webhook'];
      cfg['admin']!['port'] = ports['admin'];
      const configPath = join(dir, `${name}.config.yaml`);
      writeFileSync(configPath, stringify(cfg));
      return new Pod(name, container, ports, configPath, secretEnv, set.logDir);
    };
    const pods: Pod[] = [];
    cleanups.push(() => {
      for (const p of pods) {
        p.stopProbes();
        p.child.kill('SIGKILL');
      }
      return Promise.resolve();
    });
    const readyCount = () => pods.filter((p) => p.ready && !p.terminating).length;
    const waitReady = (p: Pod) =>
      until(
        `${p.name} ready (readiness probe)`,
        () => Promise.resolve(p.ready ? true : undefined),
        120_000,
        200,
      );

    for (let i = 0; i < deployment.spec.replicas; i++) pods.push(await startPod());
    for (const p of pods) await waitReady(p);
    await until(
      'boarding under way',
      async () => ((await set.acked()) >= 5 ? true : undefined),
      120_000,
      100,
    );

    // The rollout, as the Deployment controller does it with maxSurge 1 / maxUnavailable 0.
    let minReady = Infinity;
    const watch = setInterval(() => (minReady = Math.min(minReady, readyCount())), 100);
    const ackedAtStart = await set.acked();
    const stops: Array<{
      name: string;
      code: number | null;
      signal: NodeJS.Signals | null;
      killed: boolean;
    }> = [];
    for (const old of [...pods]) {
      const fresh = await startPod();
      pods.push(fresh);
      await waitReady(fresh);
      stops.push({ name: old.name, ...(await old.terminate(grace)) });
      pods.splice(pods.indexOf(old), 1);
    }
    clearInterval(watch);
    const ackedAtEnd = await set.acked();

    await until(
      `all ${LOANS} loans acknowledged`,
      async () => ((await set.acked()) >= LOANS ? true : undefined),
      180_000,
      200,
    );
    await until(
      'every loan settled in the store',
      async () => ((await loanStates(pgServer, set.dbUrl))['acknowledged'] === LOANS ? true : undefined),
      60_000,
      200,
    );
    const ctx = `logs in ${set.logDir}`;
    // The rollout overlapped boarding (else it would prove nothing about in-flight loans).
    expect(ackedAtStart, ctx).toBeLessThan(LOANS);
    expect(ackedAtEnd, ctx).toBeGreaterThan(ackedAtStart);
    // Every old pod stopped on SIGTERM within the grace period, exit 0; no liveness kill anywhere.
    for (const s of stops)
      expect(s, `${ctx}: ${s.name}`).toMatchObject({ code: 0, signal: null, killed: false });
    expect(
      minReady,
      `${ctx}: ready replicas never fell below replicaCount - maxUnavailable`,
    ).toBeGreaterThanOrEqual(deployment.spec.replicas);
    for (const p of pods) expect(p.livenessKills, `${ctx}: ${p.name} liveness`).toBe(0);

    for (const p of pods) await p.terminate(grace);
    const c = await set.platform.counters();
    expect(c.rateLimited, `${ctx}: 429s`).toBe(0);
    expect(c.duplicateAcks, ctx).toEqual({});
    for (const id of set.released) expect(c.acks[id], `${ctx}: acks of ${id}`).toBe(1);
    const seal = await sealOpenBatches(set.configPath, { BOARDING_STORE_PASSWORD: pgServer.password });
    expect(seal.code, `${ctx}: batches seal: ${seal.stderr}`).toBe(0);
    const core = coreRecords(set.coreDir);
    expect(core.packages, `${ctx}: one package per loan`).toEqual([...set.released].map(safeId).sort());
    expect(
      [...core.firstBoardLines].filter(([, k]) => k !== 1),
      `${ctx}: loans with two first-board records`,
    ).toEqual([]);
    expect(core.firstBoardLines.size, ctx).toBe(LOANS);
    await sleep(0);
  }, 600_000);
});
