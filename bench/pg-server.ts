import { spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** The PostgreSQL a bench runs on: BOARDING_TEST_PG_URL, else the throwaway test server (started if needed). */
export function benchPgUrl(): string {
  const fromEnv = process.env['BOARDING_TEST_PG_URL'];
  if (fromEnv) return fromEnv;
  const r = spawnSync('bash', [join(here, '..', 'scripts', 'pg-test-server.sh'), 'start'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`scripts/pg-test-server.sh start exited ${r.status}`);
  return r.stdout.trim().split('\n').pop()!;
}

/**
 * Runs the bench file `file` (its import.meta.url) again as replica i (BENCH_ROLE=replica,
 * BENCH_REPLICA=i, plus env) and resolves with the last line it printed on stdout.
 */
export function runBenchReplica(file: string, i: number, env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(file)], {
    env: { ...process.env, ...env, BENCH_ROLE: 'replica', BENCH_REPLICA: String(i) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`replica ${i} exited ${code}`));
      resolve(stdout.trim().split('\n').pop() ?? '');
    }),
  );
}
