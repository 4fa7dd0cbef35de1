/**
 * The container image, end to end: builds the project's Dockerfile with testcontainers
 * (GenericContainer.fromDockerfile), runs `sync --once` in it against the sandbox on the host
 * (host network, mounted config, API key from the environment) and checks the sandbox saw every
 * released loan acknowledged exactly once; then runs the daemon (`run`) until the image's
 * healthcheck reports healthy and stops it with SIGTERM (exec-form entrypoint: node gets it).
 *
 * Needs a Docker daemon and the base image node:24-bookworm-slim (CI: docker/start-dockerd.sh and
 * docker/build-base-image.sh, called by .ci/run). Without them the tests are reported as skipped
 * with the reason — never a silent pass.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '../../src/sandbox/index.js';

// No image registry is reachable: the reaper (ryuk) image cannot be pulled; containers are
// stopped by the tests themselves.
process.env['TESTCONTAINERS_RYUK_DISABLED'] = 'true';
// Containers use the host network, so the Docker host is this machine. Without this, testcontainers
// running inside a container looks for the "bridge" network's gateway, which --bridge=none removes.
process.env['TESTCONTAINERS_HOST_OVERRIDE'] ??= '127.0.0.1';
const tc = await import('testcontainers');

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BASE_IMAGE = 'node:24-bookworm-slim';
const IMAGE = 'boarding-connector:e2e';

async function dockerUnavailableReason(): Promise<string | null> {
  let client: Awaited<ReturnType<typeof tc.getContainerRuntimeClient>>;
  try {
    client = await tc.getContainerRuntimeClient();
  } catch (err) {
    return `no Docker daemon reachable (${err instanceof Error ? err.message.split('\n')[0] : String(err)}); run docker/start-dockerd.sh`;
  }
  if (!(await client.image.exists(tc.ImageName.fromString(BASE_IMAGE)))) {
    return `base image ${BASE_IMAGE} is missing and no registry is reachable; run docker/build-base-image.sh`;
  }
  return null;
}

/**
 * The daemon runs with --bridge=none, so image builds get the host network (npm ci and apt need
 * it). testcontainers has no option for that: its build call is wrapped to add it, and to keep the
 * build output so a failure says what broke.
 */
async function patchBuildForHostNetwork(buildLog: string[]): Promise<void> {
  const client = await tc.getContainerRuntimeClient();
  const dockerode = (
    client.image as unknown as {
      dockerode: { buildImage: (context: unknown, opts: Record<string, unknown>) => Promise<Readable> };
    }
  ).dockerode;
  const original = dockerode.buildImage.bind(dockerode);
  dockerode.buildImage = async (context: unknown, opts: Record<string, unknown>) => {
    const stream = await original(context, { ...opts, networkmode: 'host' });
    const tee = new PassThrough();
    stream.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        try {
          const msg = JSON.parse(line) as { stream?: string; error?: string };
          const text = (msg.error ?? msg.stream ?? '').trimEnd();
          if (text) buildLog.push(text);
        } catch {
          buildLog.push(line);
        }
      }
      if (buildLog.length > 400) buildLog.splice(0, buildLog.length - 400);
    });
    stream.pipe(tee);
    return tee;
  };
}

function npmRegistry(): string | undefined {
  try {
    const r = execFileSync('npm', ['config', 'get', 'registry'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return r && r !== 'undefined' ? r : undefined;
  } catch {
    return undefined;
  }
}

const skipReason = await dockerUnavailableReason();
if (skipReason) process.stderr.write(`\n[docker e2e] SKIPPED: ${skipReason}\n\n`);

describe('Docker image (testcontainers)', () => {
  let image: InstanceType<typeof tc.GenericContainer> | null = null;
  let buildError: Error | null = null;
  const buildLog: string[] = [];
  const cleanups: Array<() => Promise<void> | void> = [];

  beforeAll(async () => {
    if (skipReason) return;
    await patchBuildForHostNetwork(buildLog);
    // Behind a TLS-intercepting proxy the build must trust the same CAs as this machine.
    // The host's bundle when the variable is not set: whatever this machine trusts, the build trusts.
    const hostBundle = '/etc/ssl/certs/ca-certificates.crt';
    const extraCa = process.env['NODE_EXTRA_CA_CERTS'] || (existsSync(hostBundle) ? hostBundle : undefined);
    const caCopy = join(ROOT, 'docker', 'ca-certificates', 'e2e-build-host.pem');
    if (extraCa) copyFileSync(extraCa, caCopy);
    try {
      const registry = npmRegistry();
      image = await tc.GenericContainer.fromDockerfile(ROOT)
        .withBuildArgs(registry ? { NPM_REGISTRY: registry } : {})
        .build(IMAGE, { deleteOnExit: false });
    } catch (err) {
      buildError = new Error(
        `image build failed: ${err instanceof Error ? err.message : String(err)}\n--- last build output ---\n${buildLog.slice(-60).join('\n')}`,
      );
    } finally {
      rmSync(caCopy, { force: true });
    }
  });

  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function sandboxAndConfig(extra: string[] = []): Promise<{ sb: RunningSandbox; configPath: string }> {
    const sb = await startSandbox({
      amounts: 'extreme',
      loans: 6,
      releaseRatio: 1,
      readsPerWindow: 10_000,
      writesPerWindow: 10_000,
    });
    cleanups.push(() => sb.close());
    const dir = mkdtempSync(join(tmpdir(), 'docker-e2e-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      [
        'platform:',
        `  baseUrl: ${sb.baseUrl}`,
        '  environment: development',
        'store: { path: /var/lib/boarding-connector/state.sqlite }',
        'core: { adapter: file, file: { dir: /var/lib/boarding-connector/core } }',
        // The sandbox key cannot read full tax ids.
        'mappings: { dir: /app/mappings/generic, allowLast4Tin: true }',
        'reports: { dir: /var/lib/boarding-connector/reports }',
        ...extra,
        '',
      ].join('\n'),
    );
    return { sb, configPath };
  }

  function container(configPath: string, apiKey: string): InstanceType<typeof tc.GenericContainer> {
    if (!image) throw buildError ?? new Error('image not built');
    // A fresh definition per container: GenericContainer's with* methods mutate it.
    return new tc.GenericContainer(IMAGE)
      .withNetworkMode('host')
      .withCopyFilesToContainer([{ source: configPath, target: '/etc/boarding-connector/config.yaml' }])
      .withEnvironment({ BOARDING_API_KEY: apiKey, LOG_LEVEL: 'info' });
  }

  async function logsOf(c: { logs(): Promise<Readable> }): Promise<string> {
    const chunks: Buffer[] = [];
    const stream = await c.logs();
    await new Promise<void>((res) => {
      stream.on('data', (d: Buffer | string) => chunks.push(Buffer.from(d)));
      stream.on('end', () => res());
      stream.on('error', () => res());
      setTimeout(res, 2_000).unref();
    });
    return Buffer.concat(chunks).toString('utf8');
  }

  it('runs `sync --once` in the container against the sandbox on the host and boards every released loan', async (ctx) => {
    if (skipReason) ctx.skip(skipReason);
    if (buildError) throw buildError;
    const { sb, configPath } = await sandboxAndConfig();
    const released = (
      (await (await fetch(`${sb.adminUrl}/loans?released=true`)).json()) as { data: Array<{ id: string }> }
    ).data.map((l) => l.id);
    expect(released.length).toBeGreaterThan(0);

    const started = await container(configPath, sb.apiKey)
      .withCommand(['sync', '--once'])
      .withWaitStrategy(tc.Wait.forOneShotStartup())
      .withStartupTimeout(180_000)
      .start();
    cleanups.push(async () => {
      await started.stop({ remove: true });
    });
    const logs = await logsOf(started);
    expect(logs).not.toContain(sb.apiKey);

    const counters = (await (await fetch(`${sb.adminUrl}/counters`)).json()) as {
      acks: Record<string, number>;
      duplicateAcks: Record<string, number>;
    };
    const acked = released.filter((id) => counters.acks[id] === 1);
    expect(acked, `container output:\n${logs.slice(-4000)}`).toEqual(released);
    expect(counters.duplicateAcks).toEqual({});

    const info = await (await tc.getContainerRuntimeClient()).image.inspect(tc.ImageName.fromString(IMAGE));
    expect(info.Config.User).toBe('node');
    expect(info.Config.Entrypoint).toEqual(['node', 'dist/main.js']);
    expect(Object.keys(info.Config.Volumes ?? {})).toContain('/var/lib/boarding-connector');
  });

  it('runs the daemon until its healthcheck passes, and stops cleanly on SIGTERM', async (ctx) => {
    if (skipReason) ctx.skip(skipReason);
    if (buildError) throw buildError;
    const portProbe = await startSandbox({ amounts: 'extreme', loans: 0 });
    const port = Number(new URL(portProbe.baseUrl).port);
    await portProbe.close(); // a port that was free a moment ago, for the receiver on the host network
    const { sb, configPath } = await sandboxAndConfig([`webhooks: { host: 127.0.0.1, port: ${port} }`]);
    const started = await container(configPath, sb.apiKey)
      // The image's own check, polled faster than its 30 s default.
      .withHealthCheck({
        test: ['CMD', 'node', '/app/docker/healthcheck.mjs'],
        interval: 1_000,
        timeout: 3_000,
        retries: 30,
        startPeriod: 1_000,
      })
      .start();
    let stopped = false;
    cleanups.push(async () => {
      if (!stopped) await started.stop({ remove: true });
    });
    const client = await tc.getContainerRuntimeClient();
    const handle = client.container.getById(started.getId());
    // Poll the container's health with a deadline; on failure show the probe output and the logs.
    const deadline = Date.now() + 90_000;
    let state = await client.container.inspect(handle);
    while (
      state.State.Health?.Status !== 'healthy' &&
      state.State.Health?.Status !== 'unhealthy' &&
      state.State.Running &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 250));
      state = await client.container.inspect(handle);
    }
    const probes = (state.State.Health?.Log ?? [])
      .map((l) => `exit ${l.ExitCode}: ${l.Output.trim()}`)
      .join('\n');
    expect(
      state.State.Health?.Status,
      `health probes:\n${probes}\ncontainer output:\n${(await logsOf(started)).slice(0, 6000)}`,
    ).toBe('healthy');
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);

    // SIGTERM with a generous grace: exit code 0 proves node received it and drained.
    await client.container.stop(handle, { timeout: 60_000 }); // ms: testcontainers converts
    const inspect = await client.container.inspect(handle);
    stopped = true;
    await client.container.remove(handle, { removeVolumes: true });
    expect(inspect.State.ExitCode).toBe(0);
  });

  it('regression: better-sqlite3 statements collected at exit do not abort Node 24 (addon built against 24.18 headers)', async (ctx) => {
    if (skipReason) ctx.skip(skipReason);
    if (buildError) throw buildError;
    // Without the fix every run aborts with "Assertion failed: (env) != nullptr" (nodejs/node#65446).
    const script = [
      "const D = require('better-sqlite3');",
      "const db = new D('/tmp/regression.sqlite');",
      "for (let i = 0; i < 50000; i++) db.prepare('select ' + i).get();",
      "require('http').get('http://127.0.0.1:1/').on('error', () => {",
      "  for (let i = 0; i < 50000; i++) db.prepare('select 2').get();",
      '  db.close();',
      "  console.log('clean exit');",
      '});',
    ].join('\n');
    const started = await new tc.GenericContainer(IMAGE)
      .withNetworkMode('host')
      .withEntrypoint(['node'])
      .withCommand(['-e', script])
      .withWaitStrategy(tc.Wait.forOneShotStartup())
      .withStartupTimeout(60_000)
      .start();
    const out = await logsOf(started);
    await started.stop({ remove: true });
    expect(out).toContain('clean exit');
    expect(out).not.toContain('Assertion failed');
  });
});
