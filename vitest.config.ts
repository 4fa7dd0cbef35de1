import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    exclude: ['test/e2e/**', 'test/faults/**', 'test/scenarios/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most integration files wait on servers, child processes and timers, not on the CPU: on this
    // 2-core machine three files at once took 362 s where two took 411 s (same tests, same CPU
    // time, measured in round 5). BOARDING_TEST_WORKERS overrides.
    maxWorkers: Number(process.env['BOARDING_TEST_WORKERS'] ?? 3),
    // One throwaway PostgreSQL per run (scripts/pg-test-server.sh) for the tests under src/store/pg.
    globalSetup: ['test/support/pg-global-setup.ts'],
    projects: [
      // Unit files share a worker's module cache (no fresh import of the app per file: about a
      // third less CPU for them); integration files keep one process each, since they start
      // servers, set signal handlers and read the environment.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false } },
      { extends: true, test: { name: 'integration', include: ['test/integration/**/*.test.ts'] } },
    ],
  },
});
