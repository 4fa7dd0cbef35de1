/**
 * Fineract's error envelope, as its exception mappers write it (fineract-core
 * `infrastructure/core/exceptionmapper/*ExceptionMapper.java`, `data/ApiParameterError.java`,
 * apache/fineract 1.10): a top-level developerMessage, httpStatusCode (a string), defaultUserMessage,
 * userMessageGlobalisationCode, and `errors[]` of ApiParameterError (developerMessage,
 * defaultUserMessage, userMessageGlobalisationCode, parameterName, value, args).
 */

export interface FieldError {
  parameterName: string;
  /** The code's tail: `validation.msg.<resource>.<parameterName>.<code>`. */
  code: string;
  message: string;
  value?: unknown;
}

export interface ApiParameterError {
  developerMessage: string;
  defaultUserMessage: string;
  userMessageGlobalisationCode: string;
  parameterName: string;
  value: unknown;
  args: Array<{ value: unknown }>;
}

export interface FineractErrorEnvelope {
  developerMessage: string;
  httpStatusCode: string;
  defaultUserMessage: string;
  userMessageGlobalisationCode: string;
  errors: ApiParameterError[];
}

/** A handler's refusal: the status and the envelope the simulator answers with. */
export class HttpFail extends Error {
  constructor(
    readonly status: number,
    readonly body: FineractErrorEnvelope,
  ) {
    super(body.defaultUserMessage);
  }
}

export function parameterError(
  code: string,
  message: string,
  parameterName: string,
  value: unknown = null,
): ApiParameterError {
  return {
    developerMessage: message,
    defaultUserMessage: message,
    userMessageGlobalisationCode: code,
    parameterName,
    value: value ?? null,
    args: value === undefined || value === null ? [] : [{ value }],
  };
}

export function envelope(
  status: number,
  code: string,
  message: string,
  errors: ApiParameterError[] = [],
  developerMessage = message,
): FineractErrorEnvelope {
  return {
    developerMessage,
    httpStatusCode: String(status),
    defaultUserMessage: message,
    userMessageGlobalisationCode: code,
    errors,
  };
}

/** PlatformApiDataValidationException → 400 validation.msg.validation.errors.exist. */
export function validationFail(resource: string, errors: FieldError[]): HttpFail {
  return new HttpFail(
    400,
    envelope(
      400,
      'validation.msg.validation.errors.exist',
      'Validation errors exist.',
      errors.map((e) =>
        parameterError(
          `validation.msg.${resource}.${e.parameterName}.${e.code}`,
          e.message,
          e.parameterName,
          e.value,
        ),
      ),
      'The request was invalid. This typically will happen due to validation errors which are provided.',
    ),
  );
}

/** UnsupportedParameterException → 400, one error.msg.parameter.unsupported per parameter. */
export function unsupportedFail(params: string[]): HttpFail {
  return new HttpFail(
    400,
    envelope(
      400,
      'validation.msg.validation.errors.exist',
      'Validation errors exist.',
      params.map((p) =>
        parameterError('error.msg.parameter.unsupported', `The parameter ${p} is not supported.`, p),
      ),
      'The request was invalid. This typically will happen due to validation errors which are provided.',
    ),
  );
}

/**
 * Real 403/404 bodies carry a generic code at the top and the specific one in errors[0]
 * (GeneralPlatformDomainRuleException → validation.msg.domain.rule.violation; not found →
 * error.msg.resource.not.found); a 400 domain error keeps its own code on top.
 */
export function domainFail(status: number, code: string, message: string): HttpFail {
  const top =
    status === 403
      ? 'validation.msg.domain.rule.violation'
      : status === 404
        ? 'error.msg.resource.not.found'
        : code;
  return new HttpFail(
    status,
    envelope(
      status,
      top,
      status === 403 ? 'Errors contain reason for domain rule violation.' : message,
      [parameterError(code, message, 'id')],
      status === 403 ? 'Request was understood but caused a domain rule violation.' : message,
    ),
  );
}

/** A data integrity failure (the insert failed): 403 error.msg.unknown.data.integrity.issue. */
export function integrityFail(message: string): HttpFail {
  return new HttpFail(
    403,
    envelope(
      403,
      'error.msg.unknown.data.integrity.issue',
      `Unknown data integrity issue with resource: ${message}`,
      [],
      'The request caused a data integrity issue to be fired by the database.',
    ),
  );
}

export function serverFail(status: number, message: string, developerMessage = message): HttpFail {
  return new HttpFail(
    status,
    envelope(status, 'error.msg.platform.server.side.error', message, [], developerMessage),
  );
}
