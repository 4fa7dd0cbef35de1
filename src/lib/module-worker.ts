import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts a worker thread on one of our own modules. From the build (dist/*.js) that is a plain
 * `new Worker(url)`. From the TypeScript sources (tests, `tsx src/main.ts`, the benchmarks) a worker
 * inherits no loader, so a small bootstrap registers tsx's ESM hooks in the worker first (tsx is a
 * dev dependency: the sources are only run where it is installed).
 */
export function startModuleWorker(entry: URL, options: WorkerOptions = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const tsx = import.meta.resolve('tsx/esm/api');
  const bootstrap = `import(${JSON.stringify(tsx)}).then((api) => { api.register(); return import(${JSON.stringify(entry.href)}); });`;
  return new Worker(bootstrap, { ...options, eval: true });
}
