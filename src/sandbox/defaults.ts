/** The sandbox's defaults (own module: the CLI shows them without loading the HTTP stack). */
export const SANDBOX_DEFAULTS = {
  host: '127.0.0.1',
  loans: 25,
  seed: 1,
  releaseRatio: 0.6,
  windowMs: 60_000,
  readsPerWindow: 100,
  writesPerWindow: 30,
  legacyPerWindow: 100,
  documentMaxBytes: 25 * 1024 * 1024,
  webhookRetry: { attempts: 5, baseMs: 1_000 },
  webhookAutoDisableAfter: 10,
  amounts: 'realistic',
  idShapes: 'mixed',
} as const;
