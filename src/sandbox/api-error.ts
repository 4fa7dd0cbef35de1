import type { z } from 'zod';

/** A handled API error: the dispatcher turns it into the response status and body. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body['message'] === 'string' ? body['message'] : JSON.stringify(body['code'] ?? status));
  }

  withHeaders(headers: Record<string, string>): ApiError {
    return new ApiError(this.status, this.body, { ...this.headers, ...headers });
  }
}

export function apiError(
  status: number,
  code: string,
  message: string,
  extra: Record<string, unknown> = {},
): ApiError {
  return new ApiError(status, { code, message, ...extra });
}

/** `input.invalid`: used for query parameters, path parameters, headers and unparseable JSON. */
export function invalidInput(message: string, details: Record<string, unknown> = {}): ApiError {
  return apiError(400, 'input.invalid', message, details);
}

export interface ValidationIssue {
  path: Array<string | number>;
  code: string;
  message: string;
}

/** The validation body `{success:false, error:[...], data}`: used for JSON request bodies. */
export function validationFailed(issues: ValidationIssue[], data: unknown = null): ApiError {
  return new ApiError(400, { success: false, error: issues, data });
}

export function fromZod(error: z.ZodError, data: unknown): ApiError {
  return validationFailed(
    error.issues.map((i) => ({
      path: i.path.map((p) => (typeof p === 'number' ? p : String(p))),
      code: i.code,
      message: i.message,
    })),
    data,
  );
}

export function notFound(code: string, what: string): ApiError {
  return apiError(404, code, `${what} not found`);
}
