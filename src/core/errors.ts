// Errors are values with a code: every layer throws ApiError, and the executor turns
// any error into the API's problem object (RFC 9457 JSON), which REST sends as
// problem+json and MCP as a tool error. SQLSTATEs raised by SQL functions
// (billing.raise; the BL... codes of the migrations' SQLSTATE table) map to codes
// here, and only here.

export type ErrorCode =
  | 'unauthorized' | 'missing_scope' | 'not_found' | 'invalid_request' | 'conflict'
  | 'payment_config_inactive' | 'not_eligible' | 'request_in_flight' | 'plan_required'
  | 'platform_not_connected' | 'idempotency_key_reuse' | 'endpoint_limit' | 'discount_invalid'
  | 'rate_limited' | 'internal_error' | 'service_unavailable' | 'payment_failed'
  // Additive codes of the HTTP edge (docs/decisions/http-edge-answers.md).
  | 'method_not_allowed' | 'payload_too_large' | 'request_header_too_large';

export const TITLES: Readonly<Record<ErrorCode, string>> = {
  unauthorized: 'Unauthorized',
  missing_scope: 'Missing scope',
  not_found: 'Not found',
  invalid_request: 'Invalid request',
  conflict: 'Conflict',
  payment_config_inactive: 'Payment configuration inactive',
  not_eligible: 'Not eligible',
  request_in_flight: 'Request in flight',
  plan_required: 'Plan required',
  platform_not_connected: 'Platform not connected',
  idempotency_key_reuse: 'Idempotency key reuse',
  endpoint_limit: 'Endpoint limit reached',
  discount_invalid: 'Discount invalid',
  rate_limited: 'Rate limited',
  internal_error: 'Internal error',
  service_unavailable: 'Service unavailable',
  payment_failed: 'Payment failed',
  method_not_allowed: 'Method not allowed',
  payload_too_large: 'Payload too large',
  request_header_too_large: 'Request header fields too large',
};

export const DEFAULT_STATUS: Readonly<Record<ErrorCode, number>> = {
  unauthorized: 401, missing_scope: 403, not_found: 404, invalid_request: 422, conflict: 409,
  payment_config_inactive: 409, not_eligible: 409, request_in_flight: 409, plan_required: 422,
  platform_not_connected: 422, idempotency_key_reuse: 422, endpoint_limit: 422, discount_invalid: 422,
  rate_limited: 429, internal_error: 500, service_unavailable: 503, payment_failed: 402,
  method_not_allowed: 405, payload_too_large: 413, request_header_too_large: 431,
};

const SQLSTATES: Record<string, [ErrorCode, number]> = {
  BL400: ['invalid_request', 400],
  BL422: ['invalid_request', 422],
  BL401: ['unauthorized', 401],
  BL403: ['missing_scope', 403],
  BL404: ['not_found', 404],
  BL409: ['conflict', 409],
  BLPCI: ['payment_config_inactive', 409],
  BLNEL: ['not_eligible', 409],
  BLPRQ: ['plan_required', 422],
  BLPNC: ['platform_not_connected', 422],
  BLDSC: ['discount_invalid', 422],
  BLEPL: ['endpoint_limit', 422],
  BLIKR: ['idempotency_key_reuse', 422],
  BLRIF: ['request_in_flight', 409],
  BL429: ['rate_limited', 429],
  BL503: ['service_unavailable', 503],
  BLPAY: ['payment_failed', 402],
};

/**
 * Where the problem types are documented: {base}/problems, one section per code, so a
 * problem's `type` is {base}/problems#<code> (the spec: a URI ending in an anchor for
 * the code) and resolves to this service's own page (src/http/problem-pages.ts). The
 * base is the request's (src/core/config.ts baseUrlFor), so a body is built with the
 * path alone and made absolute where it is sent (resolveProblemType).
 * docs/decisions/problem-type-urls.md.
 */
export const PROBLEM_PATH = '/problems';

/** The `type` of a problem with `code`: absolute when `base` is given, else the path reference. */
export function problemType(code: string, base = ''): string {
  return `${base}${PROBLEM_PATH}#${code}`;
}

/**
 * The problem with its `type` made absolute against the service's base URL (RFC 9457
 * 3.1.1 advises absolute type URIs). Bodies of other shapes, and types already
 * absolute (a replay stored before this change), are returned as they are.
 */
export function resolveProblemType<T>(body: T, base: string | undefined): T {
  if (!base || body === null || typeof body !== 'object') return body;
  const type = (body as { type?: unknown }).type;
  if (typeof type !== 'string' || !type.startsWith(`${PROBLEM_PATH}#`)) return body;
  return { ...body, type: `${base}${type}` };
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail?: string;
  code: ErrorCode;
  [extra: string]: unknown;
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: Record<string, unknown>;
  /** Seconds for a Retry-After header (an outage); not part of the body. */
  readonly retryAfter?: number;
  /** What went wrong, for the request's log line only; never sent. */
  readonly logCause?: string;
  constructor(code: ErrorCode, detail: string, opts: { status?: number; extra?: Record<string, unknown>; retryAfter?: number; logCause?: string } = {}) {
    super(detail);
    this.code = code;
    this.status = opts.status ?? DEFAULT_STATUS[code];
    this.extra = opts.extra ?? {};
    if (opts.retryAfter !== undefined) this.retryAfter = opts.retryAfter;
    if (opts.logCause !== undefined) this.logCause = opts.logCause;
  }

  toProblem(): ProblemBody {
    return problemBody(this.code, this.status, this.message, this.extra);
  }
}

export function problemBody(code: ErrorCode, status: number, detail: string | undefined, extra: Record<string, unknown> = {}, base = ''): ProblemBody {
  const body: ProblemBody = { type: problemType(code, base), title: TITLES[code], status, code };
  if (detail) body.detail = detail;
  return { ...body, ...extra };
}

/**
 * The problem object as a JSON Schema (2020-12): what every error answer carries, for
 * the OpenAPI document's Problem component and the MCP tools' output schemas.
 */
export function problemJsonSchema(): Record<string, unknown> {
  return {
    type: 'object',
    description: 'An error (RFC 9457 problem details). Branch on code, not on title or detail.',
    required: ['type', 'title', 'status', 'code'],
    properties: {
      type: {
        type: 'string', format: 'uri-reference',
        description: `The address of the code's documentation: {base}${PROBLEM_PATH}#<code>, a page this service serves.`,
      },
      title: { type: 'string', description: 'Short summary of the code; the same for every problem with that code.' },
      status: { type: 'integer', description: 'The HTTP status of the answer.' },
      detail: { type: 'string', description: 'What went wrong in this case, for a human.' },
      code: { type: 'string', enum: Object.keys(TITLES), description: 'Stable machine-readable error code.' },
      param: { type: 'string', description: 'invalid_request: the field, query parameter or header to fix.' },
      required_scope: { type: 'string', description: 'missing_scope: the scope the API key lacks.' },
    },
  };
}

/** Maps an error raised by SQL (a pg error or the value billing.api_call returns). */
export function fromSqlState(sqlstate: string, message: string, detail?: string | null): ApiError | null {
  const mapped = SQLSTATES[sqlstate];
  if (!mapped) return null;
  const [code, status] = mapped;
  const extra: Record<string, unknown> = {};
  if (code === 'missing_scope' && detail) extra.required_scope = detail;
  if (code === 'invalid_request' && detail) extra.param = detail;
  return new ApiError(code, message, { status, extra });
}

/** Seconds a client is told to wait (Retry-After) while the database cannot be reached. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

// The database is unreachable, restarting or refusing connections: the socket errors
// of the driver, pg's and pg-pool's own messages (a connection cut, a connect or read
// timeout), SQLSTATE class 08 (connection exception), 57P01-57P03 (admin/crash
// shutdown, cannot connect now) and 53300 (too many connections).
const UNREACHABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);
const UNREACHABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
const UNREACHABLE_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed and is not queryable|Connection closed/;

/**
 * A short reason ("ECONNREFUSED", "57P01 terminating connection due to administrator
 * command", "Connection terminated unexpectedly") when err says the database cannot be
 * reached right now; null for any other error.
 */
export function databaseUnavailableCause(err: unknown): string | null {
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown } | null;
  if (!e || typeof e !== 'object') return null;
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : '';
  if (UNREACHABLE_ERRNOS.has(code)) return code;
  if (code.startsWith('08') || UNREACHABLE_SQLSTATES.has(code)) return `${code} ${message}`.trim();
  if (UNREACHABLE_MESSAGES.test(message)) return message;
  // A wrapped error (graphile-worker's coerceError) and Node's AggregateError (a
  // connect to every address of a host failed).
  if (e.cause && e.cause !== err) {
    const cause = databaseUnavailableCause(e.cause);
    if (cause) return cause;
  }
  if (Array.isArray(e.errors)) {
    for (const inner of e.errors) {
      const cause = databaseUnavailableCause(inner);
      if (cause) return cause;
    }
  }
  return null;
}

/** The answer while the database cannot be reached: 503 service_unavailable with Retry-After. */
export function databaseUnavailable(cause: string): ApiError {
  return new ApiError('service_unavailable', 'The database is unavailable; retry shortly.',
    { retryAfter: DATABASE_RETRY_AFTER_SECONDS, logCause: `database unavailable: ${cause}` });
}

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const unavailable = databaseUnavailableCause(err);
  if (unavailable) return databaseUnavailable(unavailable);
  const e = err as { code?: unknown; message?: unknown; detail?: unknown };
  if (typeof e?.code === 'string') {
    const mapped = fromSqlState(e.code, String(e.message ?? ''), typeof e.detail === 'string' ? e.detail : null);
    if (mapped) return mapped;
  }
  return new ApiError('internal_error', 'An unexpected error occurred.');
}

export const UNAUTHORIZED_DETAIL = 'A valid API key is required: send Authorization: Bearer <key>.';

/**
 * The codes each HTTP status can carry: every code's default status, the SQLSTATE
 * table's pairs, and invalid_request as 400 (unreadable requests, bad cursors). The
 * OpenAPI document narrows each error response's `code` to its status's list.
 */
export function codesByStatus(): Map<number, ErrorCode[]> {
  const pairs: [ErrorCode, number][] = [
    ...(Object.entries(DEFAULT_STATUS) as [ErrorCode, number][]),
    ...Object.values(SQLSTATES),
    ['invalid_request', 400],
  ];
  const byStatus = new Map<number, ErrorCode[]>();
  for (const [code, status] of pairs) {
    const codes = byStatus.get(status) ?? [];
    if (!codes.includes(code)) codes.push(code);
    byStatus.set(status, codes);
  }
  return byStatus;
}
