import { defineConfig } from 'vitest/config';

/**
 * End-to-end scenarios as a user runs them (the demo, the first hour, the CLI in its own process,
 * the core simulators boarding the sandbox's default data, the console in a browser, replicas on
 * one PostgreSQL): `npm run test:scenarios`, also run by CI. They take tens of seconds each, so
 * they stay out of `npm test`, which keeps to the 5-minute budget.
 */
export default defineConfig({
  test: {
    include: ['test/scenarios/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: Number(process.env['BOARDING_TEST_WORKERS'] ?? 2),
    globalSetup: ['test/support/pg-global-setup.ts'],
  },
});
