/**
 * Why an operator action will not go ahead, as plain data: each face says it its own way (the CLI
 * as a usage error, the console as an HTTP status: invalid 400, forbidden 403, not_found 404,
 * conflict 409). `field` names the input that was wrong, when one was.
 */
export type RefusalKind = 'invalid' | 'forbidden' | 'not_found' | 'conflict';

export interface Refusal {
  ok: false;
  kind: RefusalKind;
  message: string;
  field?: string;
  /** A console path the refusal points at (the pending request that already covers the loans). */
  link?: string;
}

export function refusal(kind: RefusalKind, message: string, field?: string, link?: string): Refusal {
  return {
    ok: false,
    kind,
    message,
    ...(field !== undefined ? { field } : {}),
    ...(link !== undefined ? { link } : {}),
  };
}

/** A refusal thrown where a plan cannot go on (the faces catch it and say it their way). */
export class RefusedError extends Error {
  override readonly name = 'RefusedError';
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}

export function refuse(kind: RefusalKind, message: string, field?: string, link?: string): never {
  throw new RefusedError(refusal(kind, message, field, link));
}
