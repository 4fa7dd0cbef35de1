import { mkdtempSync, writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify } from 'yaml';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram, CommanderError } from '../../../src/cli/program.js';
import {
  BusyError,
  ConfigError,
  FatalError,
  IncompleteRunError,
  UsageError,
} from '../../../src/lib/errors.js';
import { startSandbox, type RunningSandbox, type SandboxOptions } from '../../../src/sandbox/index.js';
import { PERMISSIONS } from '../../../src/sandbox/keys.js';

/** Every permission, including the two that unmask tax ids (the shipped mappings need full TINs). */
export const ALL_PERMISSIONS: string[] = [...PERMISSIONS];

export interface Counters {
  requests: Record<string, number>;
  byBucket: { read: number; write: number; legacy: number };
  rateLimited: number;
  acks: Record<string, number>;
  ackKeys: Record<string, string[]>;
  duplicateAcks: Record<string, number>;
  idempotentReplays: number;
  downloads: number;
  downloadsWithAuthorization: number;
  faults: {
    injected5xx: number;
    resets: number;
    resetsAfterCommit: number;
    delayed: number;
    slowBodies: number;
    injected429: number;
  };
}

export interface TestPlatform {
  sandbox: RunningSandbox;
  /** A key with every permission, tax ids unmasked (what a bank's boarding key has). */
  apiKey: string;
  counters(): Promise<Counters>;
  setFaults(rules: Array<Record<string, unknown>>, seed?: number): Promise<void>;
  admin(method: string, path: string, body?: unknown): Promise<unknown>;
  close(): Promise<void>;
}

export async function startTestPlatform(opts: SandboxOptions): Promise<TestPlatform> {
  const sandbox = await startSandbox({ amounts: 'extreme', port: 0, ...opts });
  const admin = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${sandbox.adminUrl}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`admin ${method} ${path} → ${res.status}: ${text}`);
    return text === '' ? null : JSON.parse(text);
  };
  const key = (await admin('POST', '/keys', { permissions: ALL_PERMISSIONS })) as { apiKey: string };
  return {
    sandbox,
    apiKey: key.apiKey,
    counters: async () => (await admin('GET', '/counters')) as Counters,
    setFaults: async (rules, seed = 7) => {
      await admin('PUT', '/faults', { seed, rules });
    },
    admin,
    close: () => sandbox.close(),
  };
}

export interface ConfigOptions {
  windowMs: number;
  readsPerWindow: number;
  writesPerWindow: number;
  mappingsDir?: string;
  extra?: Record<string, unknown>;
}

/** Writes a connector config for the sandbox into a fresh temp dir; returns both. */
export function writeConnectorConfig(
  p: TestPlatform,
  o: ConfigOptions,
): { dir: string; configPath: string; coreDir: string; dbPath: string } {
  const dir = mkdtempSync(join(tmpdir(), 'boarding-it-'));
  const coreDir = join(dir, 'core');
  const dbPath = join(dir, 'state.sqlite');
  const config = {
    platform: {
      baseUrl: p.sandbox.baseUrl,
      apiKey: p.apiKey,
      environment: 'staging',
      rateLimit: {
        windowMs: o.windowMs,
        readsPerWindow: o.readsPerWindow,
        writesPerWindow: o.writesPerWindow,
      },
    },
    store: { path: dbPath },
    core: { adapter: 'file', file: { dir: coreDir } },
    mappings: { dir: o.mappingsDir ?? join(process.cwd(), 'mappings/generic') },
    // The sandbox's blob host is on 127.0.0.1: allow-listed (staging refuses loopback otherwise).
    boarding: {
      concurrency: 4,
      retryBaseMs: 200,
      retryMaxMs: 2000,
      maxAttempts: 10,
      shutdownTimeoutMs: 2000,
      documentHosts: { allow: ['127.0.0.1'] },
    },
    log: { level: 'error' },
    // Any free port: `config check` checks that the listeners' ports can be bound, and a daemon
    // started on this config must not depend on what else runs on the machine.
    webhooks: { port: 0 },
    admin: { port: 0 },
    ...o.extra,
  };
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, stringify(config));
  return { dir, configPath, coreDir, dbPath };
}

/** Runs the CLI in-process like main.ts does; returns the exit code and stdout. */
export async function runCli(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<{ code: number; stdout: string; error: string | null }> {
  let stdout = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      stdout += chunk.toString();
      cb();
    },
  });
  const shutdown = new AbortController();
  const { program, ctx } = buildProgram((p) =>
    createCliContext({
      clock: systemClock,
      env: { ...env },
      stdout: sink,
      stderr: sink,
      getConfigOption: () => p.opts<{ config?: string }>().config,
      shutdown: shutdown.signal,
    }),
  );
  program.configureOutput({ writeOut: (s) => (stdout += s), writeErr: (s) => (stdout += s) });
  try {
    await program.parseAsync(['node', 'boarding-connector', ...args]);
    return { code: 0, stdout, error: null };
  } catch (err) {
    if (err instanceof CommanderError)
      return { code: err.exitCode === 0 ? 0 : 2, stdout, error: err.message };
    if (err instanceof UsageError) return { code: 2, stdout, error: err.message };
    if (err instanceof ConfigError || err instanceof FatalError)
      return { code: 1, stdout, error: err.message };
    if (err instanceof BusyError || err instanceof IncompleteRunError)
      return { code: err.exitCode, stdout, error: err.message };
    throw err;
  } finally {
    await ctx.close();
  }
}
