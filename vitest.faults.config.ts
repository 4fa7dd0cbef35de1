import { defineConfig } from 'vitest/config';

/**
 * The fault suite (issue 37): disk full, PostgreSQL failover to a promoted standby, clock skew, a
 * slow and failing core, platform faults at volume. `npm run test:faults` (builds first; its
 * pre-script installs faketime), run by CI after the e2e suite. Each file starts what it needs
 * (its own PostgreSQL, sandbox, connector processes); files run one after another.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 900_000,
    hookTimeout: 900_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
