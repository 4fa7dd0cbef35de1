import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/e2e/**', 'test/faults/**', 'test/scenarios/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Most files wait on servers, child processes and timers, not on the CPU: on a 2-core machine
    // vitest's default (cores − 1 = one file at a time) left a core idle and took 9–10 minutes.
    // Two files at once take ~4.5 minutes with the same CPU time; BOARDING_TEST_WORKERS overrides.
    maxWorkers: Number(process.env['BOARDING_TEST_WORKERS'] ?? 2),
    // One throwaway PostgreSQL per run (scripts/pg-test-server.sh) for the tests under src/store/pg.
    globalSetup: ['test/support/pg-global-setup.ts'],
  },
});
