import { defineConfig } from 'vitest/config';

/** Slow end-to-end scenarios (crash loop, docker): `npm run test:e2e`, also run by CI. */
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
