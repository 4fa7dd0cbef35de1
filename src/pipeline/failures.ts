import { errorMessage } from '../lib/errors.js';
import { redactForStorage } from '../lib/redact.js';
import type { Disposition } from '../lib/disposition.js';
import { isPlatformError, type PlatformError } from '../platform/errors.js';
import { classifyCoreFailure, CustomerSourceUnavailableError } from '../core/port.js';
import type { QuarantineReason } from '../store/loan-states.js';
import { IllegalTransitionError } from '../store/loan-states.js';
import { StaleStateError } from '../store/loans.js';
import { PoolExhaustedError } from '../store/identity/numbers.js';
import { FencedOut } from '../store/index.js';
import { CustomerAmbiguousError, CustomerWaitError } from '../identity/customer-match.js';
import { ImagingRenderError } from '../imaging/render.js';
import { ImagingUnavailableError } from '../imaging/export.js';

/**
 * The one failure taxonomy: every error a loan's attempt or a cycle can meet (platform, core,
 * store, customer match, number pool, fence, imaging) is classified here, once, into a disposition
 * (src/lib/disposition.ts, where each word is explained) and a code. board-loan.ts and cycle.ts,
 * and every command that meets a failure (dispositionOf), switch on the disposition only. A
 * platform call the client already retried (`retry-call`) is `retry-later` here: the attempt is
 * lost.
 */
export type { Disposition, RetryDisposition } from '../lib/disposition.js';

/** The dispositions of a classified failure: every word but the platform client's own `retry-call`. */
export type FailureDisposition = Exclude<Disposition, 'retry-call'>;

/** Where in a loan's attempt the failure happened: the core write (with its fetch and map) or the ack. */
export type FailurePhase = 'core' | 'ack';

export interface Failure {
  disposition: FailureDisposition;
  /** The loan's lastErrorCode (or the fatal stop's code: `core.*`, `identity.*` or a platform auth code). */
  code: string;
  message: string;
  /** quarantine: the loan's quarantine reason. */
  reason: QuarantineReason | null;
  /** retry dispositions: the quarantine reason once the attempts are used up. */
  exhaustedReason: QuarantineReason;
  /** Kept with the loan's transition (quarantine, retry_wait). */
  detail: unknown;
  /** fatal / stop-cycle: the attempt event recorded in the loan's history. */
  event: { reason: string; detail: unknown } | null;
  /** What the pipeline logs about it (null: nothing, or the caller logs with what it knows). */
  log: { level: 'warn' | 'error'; fields: Record<string, unknown>; msg: string } | null;
  /**
   * The core's refusal of this loan is an answer, not a consequence of shutdown: it is recorded
   * even when the attempt was aborted. Every other failure of an aborted attempt is an interruption.
   */
  answerDespiteAbort: boolean;
}

type FailureInit = Pick<Failure, 'disposition' | 'code' | 'message'> & Partial<Failure>;

function failure(init: FailureInit): Failure {
  return {
    reason: null,
    exhaustedReason: 'retries_exhausted',
    detail: undefined,
    event: null,
    log: null,
    answerDespiteAbort: false,
    ...init,
  };
}

function storeFailure(err: unknown): Failure | null {
  if (err instanceof FencedOut)
    return failure({
      disposition: 'stepped-down',
      code: 'store.fenced_out',
      message: err.message,
    });
  if (err instanceof IllegalTransitionError)
    return failure({ disposition: 'stepped-down', code: 'store.illegal_transition', message: err.message });
  if (err instanceof StaleStateError)
    return failure({
      disposition: 'stale',
      code: 'store.stale_state',
      message: err.message,
    });
  return null;
}

function customerFailure(err: unknown, phase: FailurePhase): Failure | null {
  if (err instanceof CustomerAmbiguousError)
    return failure({
      disposition: 'quarantine',
      code: 'customer.ambiguous',
      message: err.message,
      reason: 'customer_match_ambiguous',
      detail: err.detail,
      log: {
        level: 'warn',
        fields: { entityId: err.detail.entityId, cifs: err.detail.cifs.length },
        msg: 'customer match ambiguous: quarantined',
      },
    });
  if (err instanceof CustomerWaitError || err instanceof CustomerSourceUnavailableError)
    // Never "no existing customer": the loan waits for the source (or the other loan's write). A
    // core whose customer search failed is a core that does not answer.
    return failure({
      disposition: err.code === 'customers.search_failed' ? 'core-unavailable' : 'retry-later',
      code: err.code,
      message: err.message,
      detail: { phase },
      log: {
        level: 'warn',
        fields: { code: err.code, err: err.message },
        msg: 'customer match cannot be decided now; will retry',
      },
    });
  return null;
}

function poolFailure(err: unknown, phase: FailurePhase): Failure | null {
  if (!(err instanceof PoolExhaustedError)) return null;
  // No number left: boarding more loans would need one each. Never a reused number: stop.
  return failure({
    disposition: 'fatal',
    code: err.code,
    message: err.message,
    event: { reason: 'number pool exhausted', detail: { phase, pool: err.pool, message: err.message } },
    log: { level: 'error', fields: { pool: err.pool, capacity: err.capacity }, msg: err.message },
  });
}

function coreFailure(err: unknown, phase: FailurePhase): Failure | null {
  const core = classifyCoreFailure(err);
  if (core === null) return null;
  const base = { code: core.code, message: core.message };
  switch (core.disposition) {
    case 'quarantine':
      return failure({
        ...base,
        disposition: 'quarantine',
        reason: 'core_rejected',
        detail: { status: core.status, detail: core.detail },
        log: { level: 'warn', fields: { status: core.status }, msg: 'core rejected the loan' },
        answerDespiteAbort: true,
      });
    case 'fatal':
      // The core refused our credentials: every loan would fail the same way, so stop instead of
      // burning attempts until each one is quarantined.
      return failure({
        ...base,
        disposition: 'fatal',
        event: {
          reason: 'fatal core error',
          detail: { phase, message: redactForStorage(core.message) },
        },
        log: { level: 'error', fields: { err: core.message }, msg: 'core refused the connector: stopping' },
      });
    case 'core-unavailable':
    case 'core-ambiguous':
      return failure({
        ...base,
        disposition: core.disposition,
        exhaustedReason: core.disposition === 'core-unavailable' ? 'retries_exhausted' : 'ambiguous',
        detail: { phase },
        log: {
          level: 'warn',
          fields: { code: core.code, err: core.message },
          msg: 'core unavailable; will retry (checking the core first)',
        },
      });
  }
}

function platformFailure(err: PlatformError, phase: FailurePhase): Failure {
  switch (err.disposition) {
    case 'fatal':
      return failure({
        disposition: 'fatal',
        code: err.code,
        message: err.message,
        event: { reason: `fatal platform error ${err.code}`, detail: err.toJSON() },
        log: {
          level: 'error',
          fields: { code: err.code, status: err.status },
          msg: 'platform refused our credentials: stopping',
        },
      });
    case 'stop-cycle':
      return failure({
        disposition: 'stop-cycle',
        code: `platform.${err.code}`,
        message: err.message,
        event: { reason: 'platform traffic stopped after rate-limit strikes', detail: err.toJSON() },
      });
    case 'retry-call':
    case 'retry-later':
      return failure({
        disposition: 'retry-later',
        code: `platform.${err.code}`,
        message: err.message,
        detail: { phase, status: err.status },
        log: {
          level: 'warn',
          fields: { code: err.code, status: err.status },
          msg: 'platform call failed; will retry',
        },
      });
    case 'quarantine': {
      // A 4xx (or an oversize document) that no retry will change; a refused document host is
      // the bank's network policy, told apart from bad data.
      const reason: QuarantineReason =
        phase === 'ack'
          ? 'ack_rejected'
          : err.code === 'download.refused'
            ? 'download_refused'
            : 'validation';
      return failure({
        disposition: 'quarantine',
        code: `platform.${err.code}`,
        message: err.message,
        reason,
        detail: err.toJSON(),
        log: {
          level: 'warn',
          fields: { code: err.code, status: err.status, reason },
          msg: 'platform refused a request for this loan',
        },
      });
    }
  }
}

/**
 * Classifies any error the pipeline meets. The order matters where classes overlap: a pool
 * exhausted is a FatalError too, but it is our own limit, not the core refusing the connector.
 */
export function classifyFailure(err: unknown, phase: FailurePhase = 'core'): Failure {
  const known =
    storeFailure(err) ?? customerFailure(err, phase) ?? poolFailure(err, phase) ?? coreFailure(err, phase);
  if (known !== null) return known;
  const imaging = imagingFailure(err);
  if (imaging !== null) return imaging;
  if (isPlatformError(err)) return platformFailure(err, phase);
  return failure({
    disposition: 'retry-later',
    code: 'internal',
    message: errorMessage(err),
    detail: { phase },
    log: { level: 'error', fields: { err }, msg: 'unexpected error while boarding; will retry' },
  });
}

/**
 * The imaging export (src/imaging): a folder missing, full or read-only is retried later (the core
 * write is done; the ack waits for the documents); a value the bank's index layout cannot hold is
 * a layout or data problem a person fixes: quarantined, with the field named.
 */
function imagingFailure(err: unknown): Failure | null {
  if (err instanceof ImagingUnavailableError)
    return failure({
      disposition: 'retry-later',
      code: err.code,
      message: err.message,
      log: { level: 'warn', fields: { code: err.code }, msg: 'imaging export failed; will retry' },
    });
  if (err instanceof ImagingRenderError)
    return failure({
      disposition: 'quarantine',
      code: 'imaging.layout',
      message: `imaging index: ${err.message}`,
      reason: 'validation',
    });
  return null;
}

/**
 * What a caller does about any error, in one word (src/lib/disposition.ts): the disposition of its
 * classification. Commands and faces decide by it instead of reading an error's class or flags.
 */
export function dispositionOf(err: unknown, phase: FailurePhase = 'core'): FailureDisposition {
  return classifyFailure(err, phase).disposition;
}
