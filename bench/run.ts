/**
 * `npm run bench`: runs every bench/*.bench.ts in its own process, one after another (so figures
 * do not disturb each other), and prints their output. Benchmarks print numbers and never fail on
 * timing; a benchmark that crashes is reported and the run exits 1.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
let failed = 0;
for (const f of files) {
  process.stdout.write(`\n=== ${f} ===\n`);
  // What the previous benchmark wrote (and deleted) goes to disk now, not during this one's runs:
  // the webhook receiver's latency is a disk sync per delivery.
  spawnSync('sync', { stdio: 'ignore' });
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, f)], {
    stdio: 'inherit',
    env: process.env,
  });
  if (r.status !== 0) {
    failed += 1;
    process.stdout.write(`!!! ${f} exited with ${r.status ?? r.signal}\n`);
  }
}
process.exitCode = failed > 0 ? 1 : 0;
