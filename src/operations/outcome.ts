// What a door hands the gate (a Caller) and what it gets back (an Outcome), shared by
// the executor (validation) and the gate (src/operations/gate.ts).
import { ApiError, databaseUnavailable, databaseUnavailableCause } from '../core/errors';
import type { RenderedDocument } from '../domain/operation';
import type { RateLimitInfo } from './token-leases';

export type { RateLimitInfo } from './token-leases';

export interface Caller {
  /** The bearer key as sent, or null when missing or malformed. */
  key: string | null;
  /**
   * An operator's dashboard session token instead of a key: the database recognises
   * its hash as it does a key's and answers its role's scopes (15-operators.sql).
   */
  session?: string | null;
  ip: string;
  /** Scheme and Host header the request arrived with (the base URL outside production). */
  origin?: { protocol: string; host: string | undefined } | null;
  /** The request's X-Request-Id: the audit log records it with each change (app.request_id). */
  requestId?: string;
  /** Told who the key belongs to once it is recognised (access log fields). */
  identified?: (communityId: string, keyId: string) => void;
}

export interface Outcome {
  status: number;
  body: unknown;
  /**
   * The body as JSON text when the database wrote it (SQL operations): REST sends it
   * unchanged, so a 100-row list is neither parsed nor re-serialised in Node; `body`
   * parses it only when a door reads it (MCP).
   */
  bodyText?: string;
  problem: boolean;
  rateLimit?: RateLimitInfo;
  replayed?: boolean;
  /** A handler's own Retry-After (extra.retry_after), applied to rateLimit at the end; or an outage's. */
  retryAfter?: number;
  /** A document operation's success (Operation.document): the door sends these bytes, not `body`. */
  document?: RenderedDocument;
  /** Why it failed, for the request's log line only (e.g. the database is unreachable). */
  cause?: string;
}

/** An authenticated caller: the key's community and scopes, and its bucket after this request's token. */
export interface Identity {
  communityId: string;
  keyId: string;
  scopes: string[];
  rl: RateLimitInfo;
}

/** A success whose body is the database's JSON text, parsed on first read. */
export function textOutcome(status: number, text: string, rateLimit: RateLimitInfo, replayed: boolean): Outcome {
  let parsed: { value: unknown } | null = null;
  return {
    status, problem: false, rateLimit, replayed, bodyText: text,
    get body() {
      parsed ??= { value: JSON.parse(text) as unknown };
      return parsed.value;
    },
  };
}

export function problemOutcome(err: ApiError, rateLimit?: RateLimitInfo): Outcome {
  const outcome: Outcome = { status: err.status, body: err.toProblem(), problem: true, rateLimit };
  if (err.retryAfter !== undefined) outcome.retryAfter = err.retryAfter;
  if (err.logCause !== undefined) outcome.cause = err.logCause;
  return outcome;
}

/**
 * The 503 Outcome when err says the database cannot be reached (src/core/errors.ts
 * databaseUnavailableCause), else null: an outage is an answer, not an exception.
 */
export function unavailableOutcome(err: unknown): Outcome | null {
  const cause = databaseUnavailableCause(err);
  return cause ? problemOutcome(databaseUnavailable(cause)) : null;
}
