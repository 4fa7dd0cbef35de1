import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/e2e/**', 'test/faults/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // One throwaway PostgreSQL per run (scripts/pg-test-server.sh) for the tests under src/store/pg.
    globalSetup: ['test/support/pg-global-setup.ts'],
  },
});
