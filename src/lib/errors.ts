/**
 * Errors that decide the process exit code. Everything else is classified where it happens
 * (PlatformError at the HTTP boundary, core errors in src/core) and handled by the pipeline.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly exitCode = 1;
  constructor(
    message: string,
    readonly problems: readonly string[] = [message],
  ) {
    super(message);
  }
}

/** Wrong command-line usage: exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly exitCode = 2;
}

/** A condition the operator must fix (auth refused, key revoked): exit code 1. */
export class FatalError extends Error {
  override readonly name = 'FatalError';
  readonly exitCode = 1;
}

/**
 * Another connector process holds the boarding lease, so this command did nothing: exit code 3,
 * distinct from success, so a script or a scheduler can tell "ran" from "skipped".
 */
export class BusyError extends Error {
  override readonly name = 'BusyError';
  readonly exitCode = 3;
}

/**
 * `sync --once` ran but did not finish its work, so cron can alert (the summary is printed first):
 * 4 the queue walk did not complete (platform unreachable, failing, or traffic stopped after
 * rate-limit strikes), 5 a core outage stopped the boarding pass.
 */
export const EXIT_WALK_INCOMPLETE = 4;
export const EXIT_CORE_OUTAGE = 5;

export class IncompleteRunError extends Error {
  override readonly name = 'IncompleteRunError';
  constructor(
    message: string,
    readonly exitCode: typeof EXIT_WALK_INCOMPLETE | typeof EXIT_CORE_OUTAGE,
  ) {
    super(message);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
