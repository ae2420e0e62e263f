// Runs one operation for one caller: validation, authentication, rate limiting,
// tenant setup, idempotency and the operation itself. REST and MCP both call this,
// so every door gets the same guarantees.
import crypto from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { baseUrlFor, type Config } from '../core/config';
import { type CursorBinding, decodeCursor, filtersDigest } from '../core/cursor';
import { ApiError, databaseUnavailable, databaseUnavailableCause, fromSqlState, ProblemBody, toApiError, UNAUTHORIZED_DETAIL } from '../core/errors';
import { hashKey, KEY_PATTERN, SESSION_TOKEN_PATTERN } from '../core/ids';
import { rateLimitRefusals } from '../core/metrics';
import type { Operation, OpContext, Services } from '../domain/operation';
import { retryConflicts } from '../db/community-transaction';
import { type RateLimitInfo, TokenLeases } from './token-leases';

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
  /** Told who the key belongs to once it is recognised (access log fields). */
  identified?: (communityId: string, keyId: string) => void;
}

export interface RawInput {
  params?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
  idempotencyKey?: string;
}

export type { RateLimitInfo } from './token-leases';

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

interface AuthResult {
  ok: boolean;
  error?: 'unauthorized' | 'rate_limited';
  community_id?: string;
  key_id?: string;
  scopes?: string[];
  rl: RateLimitInfo;
  replayed?: boolean;
  result?: unknown;
  error_detail?: never;
}

type SqlOutcome = AuthResult & { error?: unknown };

/** A success whose body is the database's JSON text, parsed on first read. */
function textOutcome(status: number, text: string, rateLimit: RateLimitInfo, replayed: boolean): Outcome {
  let parsed: { value: unknown } | null = null;
  return {
    status, problem: false, rateLimit, replayed, bodyText: text,
    get body() {
      parsed ??= { value: JSON.parse(text) as unknown };
      return parsed.value;
    },
  };
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
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

/** Names the field and the rule that failed, e.g. "limit: must be at most 100". */
export function validationError(error: z.ZodError, source: 'query' | 'body' | 'params', raw: unknown = {}): ApiError {
  const issue = error.issues[0];
  let field = issue.path.map(String).join('.');
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    field = [...issue.path.map(String), issue.keys[0]].filter(Boolean).join('.');
    message = `unknown field ${field}`;
    return new ApiError('invalid_request', `Unknown field "${field}" in the request ${source}.`, { status: 422, extra: { param: field } });
  }
  let at: unknown = raw;
  for (const key of issue.path) at = at && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[key as PropertyKey] : undefined;
  const missing = issue.code === 'invalid_type' && at === undefined;
  // Any unreadable cursor (not one this API returned, too long) is a 400, as the spec says.
  const badCursor = (issue as { params?: { status?: number } }).params?.status === 400 || (source === 'query' && issue.path[0] === 'cursor');
  const status = source === 'query' && (missing || badCursor) ? 400 : source === 'params' ? 404 : 422;
  if (status === 404) return new ApiError('not_found', 'No such resource.');
  const detail = missing ? `Missing required ${source === 'query' ? 'query parameter' : 'field'} "${field}".` : `Invalid ${field || source}: ${message}`;
  return new ApiError('invalid_request', detail, { status, extra: field ? { param: field } : {} });
}

/** Text PostgreSQL cannot store (NUL in text, \u0000 in jsonb) or that is not Unicode (a lone surrogate). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
function unstorable(text: string): boolean {
  return text.includes('\u0000') || LONE_SURROGATE.test(text);
}

/**
 * The path (e.g. "subject.external.namespace") of the first unstorable string or key in
 * value, or null. Iterative (an explicit stack, depth-first in key order): however deep
 * the value, no call stack grows with it (bodies are also bounded at the parser,
 * src/web/json-body.ts).
 */
export function unstorablePath(value: unknown, path: string[] = []): string | null {
  // Each entry names its parent, so a path is built only for the one found.
  interface At { value: unknown; key: string | null; parent: At | null }
  const pathOf = (at: At | null, last?: string): string => {
    const keys: string[] = last === undefined ? [] : [last];
    for (let a = at; a; a = a.parent) if (a.key !== null) keys.push(a.key);
    return [...path, ...keys.reverse()].join('.');
  };
  const stack: At[] = [{ value, key: null, parent: null }];
  while (stack.length > 0) {
    const at = stack.pop()!;
    if (typeof at.value === 'string') {
      if (unstorable(at.value)) return pathOf(at) || '(value)';
      continue;
    }
    if (at.value === null || typeof at.value !== 'object') continue;
    const entries = Object.entries(at.value as Record<string, unknown>);
    for (const [key] of entries) {
      if (unstorable(key)) return pathOf(at, key.replace(/\u0000/g, '\\u0000'));
    }
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i][1], key: entries[i][0], parent: at });
  }
  return null;
}

/**
 * NUL characters and unpaired surrogates are refused before anything reaches SQL:
 * PostgreSQL rejects them in text and jsonb, which would otherwise be a 500.
 */
function unstorableInput(raw: RawInput): ApiError | null {
  for (const source of ['params', 'query', 'body'] as const) {
    const at = unstorablePath(raw[source]);
    if (at === null) continue;
    const where = source === 'params' ? 'path' : source === 'query' ? 'query' : 'body';
    return new ApiError('invalid_request',
      `The request ${where} holds a NUL character or an unpaired UTF-16 surrogate${at === '(value)' ? '' : ` in "${at}"`}; such text cannot be stored.`,
      { status: 400, extra: at === '(value)' ? {} : { param: at } });
  }
  return null;
}

/**
 * A query parameter the operation does not take answers 400 naming it, on every
 * door (docs/decisions/unknown-query-parameters.md): ignoring one answered page 1
 * to `starting_after`, so a Stripe-style pager looped forever.
 */
function unknownQueryParameters(op: Operation, query: Record<string, unknown> | undefined): ApiError | null {
  const known = op.query?.shape ?? {};
  const unknown = Object.keys(query ?? {}).filter((name) => !Object.hasOwn(known, name));
  if (unknown.length === 0) return null;
  const names = unknown.slice(0, 5).map((name) => `"${name.slice(0, 100)}"`).join(', ');
  const accepted = Object.keys(known);
  return new ApiError('invalid_request',
    `Unknown query parameter${unknown.length > 1 ? 's' : ''} ${names}${unknown.length > 5 ? ', ...' : ''}; `
    + (accepted.length ? `this operation takes ${accepted.join(', ')}.` : 'this operation takes no query parameters.'),
    { status: 400, extra: { param: unknown[0].slice(0, 100) } });
}

/**
 * A list's cursor continues only the listing that issued it: the same operation
 * and the same filters (every parsed path and query value but cursor and limit).
 * Checks the cursor sent, swaps it for the id SQL continues after, and adds the
 * binding SQL writes into next_cursor (billing.encode_cursor, through
 * app.cursor_list / app.cursor_filters). docs/decisions/cursors-bound-to-their-list.md
 */
function bindCursor(op: Operation, input: Record<string, unknown>): ApiError | null {
  if (!op.query || !Object.hasOwn(op.query.shape, 'cursor')) return null;
  const { cursor, limit: _limit, ...filters } = input;
  const binding: CursorBinding = { list: op.name, filters: filtersDigest(filters) };
  if (typeof cursor === 'string') {
    const decoded = decodeCursor(cursor);
    const refuse = (why: string) => new ApiError('invalid_request', `Invalid cursor: ${why}`, { status: 400, extra: { param: 'cursor' } });
    if (!decoded) return refuse('it is not a cursor this API returned.');
    if (decoded.list === null) return refuse('it was issued before cursors were bound to their list; start again from the first page.');
    if (decoded.list !== binding.list) return refuse(`it continues another list (${decoded.list}), not ${op.name}.`);
    if (decoded.filters !== binding.filters) return refuse('it was issued with other filters; send the same filters as the request that returned it.');
    input.cursor = decoded.id;
  }
  input.cursor_list = binding.list;
  input.cursor_filters = binding.filters;
  return null;
}

/**
 * An Idempotency-Key is never silently ignored (docs/decisions/idempotency-on-every-write.md):
 * a write that does not honour one refuses it. A GET is idempotent by definition and
 * ignores it, as Stripe's do.
 */
function refusedIdempotencyKey(op: Operation, raw: RawInput): ApiError | null {
  if (raw.idempotencyKey === undefined || op.method === 'GET' || op.idempotent) return null;
  return new ApiError('invalid_request',
    `Idempotency-Key is not accepted by ${op.method} ${op.path}: ${op.idempotencyRefused ?? 'this operation does not keep its answers.'} Send the request without it.`,
    { status: 400, extra: { param: 'Idempotency-Key' } });
}

export function parseInput(op: Operation, raw: RawInput): { ok: true; input: Record<string, unknown> } | { ok: false; error: ApiError } {
  const unreadable = unstorableInput(raw);
  if (unreadable) return { ok: false, error: unreadable };
  const input: Record<string, unknown> = {};
  if (op.params) {
    const r = op.params.safeParse(raw.params ?? {});
    if (!r.success) return { ok: false, error: validationError(r.error, 'params', raw.params) };
    Object.assign(input, r.data);
  }
  const unknown = unknownQueryParameters(op, raw.query);
  if (unknown) return { ok: false, error: unknown };
  if (op.query) {
    const r = op.query.safeParse(raw.query ?? {});
    if (!r.success) return { ok: false, error: validationError(r.error, 'query', raw.query) };
    Object.assign(input, r.data);
  }
  const cursor = bindCursor(op, input);
  if (cursor) return { ok: false, error: cursor };
  const body = raw.body;
  if (op.body) {
    if (body !== undefined && (body === null || typeof body !== 'object' || Array.isArray(body))) {
      return { ok: false, error: new ApiError('invalid_request', 'The request body must be a JSON object.', { status: 400 }) };
    }
    const r = op.body.strict().safeParse(body ?? {});
    if (!r.success) return { ok: false, error: validationError(r.error, 'body', body) };
    Object.assign(input, r.data);
  } else if (body !== undefined && !(body && typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0)) {
    const first = body && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body)[0] : null;
    return {
      ok: false,
      error: first
        ? new ApiError('invalid_request', `Unknown field "${first}" in the request body: this operation takes no body.`, { status: 422, extra: { param: first } })
        : new ApiError('invalid_request', 'This operation takes no request body.', { status: 400 }),
    };
  }
  return { ok: true, input };
}

// The two statements every SQL operation runs, as named prepared statements: each
// connection parses and plans them once instead of on every request.
const API_CALL_LEASED = `select o - 'result' as r, (o->'result')::text as t from billing.api_call_leased($1, $2, $3, $4) o`;
const API_CALL = `select o - 'result' as r, (o->'result')::text as t from billing.api_call($1, $2, $3, $4, $5, $6, $7) o`;

export class Executor {
  private readonly leases: TokenLeases;

  constructor(
    private readonly pool: pg.Pool,
    readonly config: Config,
    readonly services: Services,
  ) {
    this.leases = new TokenLeases(pool, config.rateLimits, config.tokenLeaseMs);
  }

  /** The base URL of the links this caller's request hands out (src/core/config.ts baseUrlFor). */
  baseUrlFor(caller: Caller): string {
    return baseUrlFor(this.config, caller.origin);
  }

  private keyHash(caller: Caller): string | null {
    if (caller.session !== undefined) return caller.session && SESSION_TOKEN_PATTERN.test(caller.session) ? hashKey(caller.session) : null;
    return caller.key && KEY_PATTERN.test(caller.key) ? hashKey(caller.key) : null;
  }

  /** Authenticates and takes a rate token without running anything (error paths). */
  async authenticateOnly(caller: Caller, scope: string | null): Promise<Outcome | RateLimitInfo> {
    const { rows } = await this.pool.query<{ r: SqlOutcome }>(
      'select billing.api_call($1, $2, $3, $4, null, null) as r',
      [this.keyHash(caller), caller.ip, this.config.rateLimits, scope],
    );
    const auth = rows[0].r;
    const failed = this.authFailure(auth, caller);
    if (failed) return failed;
    if (auth.error) return this.mapSqlOutcome(auth, 200);
    return auth.rl;
  }

  /**
   * Who is calling, for a door that runs its own SQL under the caller's settings
   * (GraphQL): authenticates the key and takes a token from the same bucket as REST
   * (billing_private.authenticate, the lookup billing.api_auth makes). A missing,
   * unknown or revoked key, or an empty bucket, is the same Outcome REST answers.
   */
  async identify(caller: Caller): Promise<{ ok: true; identity: Identity } | { ok: false; outcome: Outcome }> {
    const { rows } = await this.pool.query<{ r: SqlOutcome }>(
      'select billing_private.authenticate($1, $2, $3) as r',
      [this.keyHash(caller), caller.ip, this.config.rateLimits],
    );
    const auth = rows[0].r;
    const failed = this.authFailure(auth, caller);
    if (failed) return { ok: false, outcome: failed };
    return { ok: true, identity: { communityId: auth.community_id!, keyId: auth.key_id!, scopes: auth.scopes ?? [], rl: auth.rl } };
  }

  private authFailure(auth: SqlOutcome, caller: Caller): Outcome | null {
    if (auth.community_id && auth.key_id) caller.identified?.(auth.community_id, auth.key_id);
    if (auth.ok) return null;
    if (auth.error === 'rate_limited') {
      rateLimitRefusals.inc();
      const err = new ApiError('rate_limited', `Too many requests; retry after ${auth.rl.retry_after} seconds.`);
      return problemOutcome(err, auth.rl);
    }
    return problemOutcome(new ApiError('unauthorized', UNAUTHORIZED_DETAIL), auth.rl);
  }

  private mapSqlOutcome(out: SqlOutcome, successStatus: number): Outcome {
    const rl = out.rl;
    const replayed = out.replayed === true;
    const err = out.error as { sqlstate?: string; message?: string; detail?: string | null } | undefined;
    const problem = (out as { problem?: ProblemBody }).problem;
    if (problem) return { status: problem.status, body: problem, problem: true, rateLimit: rl, replayed };
    if (err && typeof err === 'object') {
      const apiError = fromSqlState(err.sqlstate ?? '', err.message ?? '', err.detail) ?? new ApiError('internal_error', 'An unexpected error occurred.');
      return { ...problemOutcome(apiError, rl), replayed };
    }
    return { status: successStatus, body: out.result, problem: false, rateLimit: rl, replayed };
  }

  /** The answer of billing.api_call or api_call_leased: the envelope, and the result as text. */
  private sqlAnswer(out: SqlOutcome, text: string | null, caller: Caller, status: number): Outcome {
    const failed = this.authFailure(out, caller);
    if (failed) return failed;
    if (text !== null && !out.error && !(out as { problem?: unknown }).problem) return textOutcome(status, text, out.rl, out.replayed === true);
    return this.mapSqlOutcome(text === null ? out : { ...out, result: JSON.parse(text) as unknown }, status);
  }

  async run(op: Operation, caller: Caller, raw: RawInput): Promise<Outcome> {
    try {
      return await this.runOrThrow(op, caller, raw);
    } catch (err) {
      const unavailable = unavailableOutcome(err);
      if (unavailable) return unavailable;
      throw err;
    }
  }

  private async runOrThrow(op: Operation, caller: Caller, raw: RawInput): Promise<Outcome> {
    const refused = refusedIdempotencyKey(op, raw);
    const parsed = refused ? { ok: false as const, error: refused } : parseInput(op, raw);
    if (!parsed.ok) {
      const auth = await this.authenticateOnly(caller, op.scope);
      if ('status' in auth) return auth;
      return problemOutcome(parsed.error, auth);
    }
    const idem = op.idempotent && raw.idempotencyKey !== undefined
      ? { endpoint: `${op.method} ${op.path}`, key: raw.idempotencyKey, hash: crypto.createHash('sha256').update(canonical({ params: raw.params ?? {}, body: raw.body ?? {} })).digest('hex') }
      : null;
    const status = op.status ?? 200;
    if (op.sql) {
      const sql = op.sql;
      const hash = this.keyHash(caller);
      // Keys only: a dashboard or portal session takes its token per request (billing.api_call).
      if (!idem && hash && caller.session === undefined && this.leases.enabled) {
        const lease = await this.leases.take(hash);
        if (lease.kind === 'limited') {
          rateLimitRefusals.inc();
          return problemOutcome(new ApiError('rate_limited', `Too many requests; retry after ${lease.rl.retry_after} seconds.`), lease.rl);
        }
        if (lease.kind === 'token') {
          const answer = await retryConflicts(async () => {
            const { rows } = await this.pool.query<{ r: SqlOutcome; t: string | null }>({
              name: 'api_call_leased', text: API_CALL_LEASED, values: [hash, op.scope, sql, parsed.input] });
            return rows[0];
          });
          // Revoked since the lease: answered as any unknown key is, below.
          if (answer.r.ok) return this.sqlAnswer({ ...answer.r, rl: lease.rl }, answer.t, caller, status);
        }
      }
      return retryConflicts(async () => {
        // The result comes back as text (see Outcome.bodyText); the rest is small.
        const { rows } = await this.pool.query<{ r: SqlOutcome; t: string | null }>({
          name: 'api_call', text: API_CALL, values: [hash, caller.ip, this.config.rateLimits, op.scope, sql, parsed.input, idem] });
        return this.sqlAnswer(rows[0].r, rows[0].t, caller, status);
      });
    }
    return retryConflicts(() => this.runHandler(op, caller, parsed.input, idem, status));
  }

  private async runHandler(op: Operation, caller: Caller, input: Record<string, unknown>,
    idem: { endpoint: string; key: string; hash: string } | null, status: number): Promise<Outcome> {
    const client = await this.pool.connect();
    let open = false;
    let released = false;
    let broken: Error | undefined;
    try {
      await client.query('begin');
      open = true;
      // Lock order (db/migrations/fixtures/functions/10-tenancy.sql): the key's rate bucket is
      // taken last, after the operation's rows, unless it is already empty (429 first).
      const { rows } = await client.query<{ r: SqlOutcome & { token_available?: boolean } }>('select billing.api_auth_deferred($1, $2, $3) as r',
        [this.keyHash(caller), caller.ip, this.config.rateLimits]);
      const auth = rows[0].r;
      const failed = this.authFailure(auth, caller);
      if (failed) {
        await client.query('commit');
        open = false;
        return failed;
      }
      let rl: (RateLimitInfo & { allowed: boolean }) | null = null;
      const takeToken = async (): Promise<RateLimitInfo & { allowed: boolean }> => {
        const r = await client.query<{ r: RateLimitInfo & { allowed: boolean } }>('select billing_private.take_key_token($1) as r', [this.config.rateLimits]);
        rl = r.rows[0].r;
        return r.rows[0].r;
      };
      const limited = (token: RateLimitInfo) =>
        problemOutcome(new ApiError('rate_limited', `Too many requests; retry after ${token.retry_after} seconds.`), token);
      if (!auth.token_available) {
        const token = await takeToken();
        if (!token.allowed) {
          await client.query('commit');
          open = false;
          return limited(token);
        }
      }
      if (op.scope && !auth.scopes?.includes(op.scope)) {
        const token = rl ?? await takeToken();
        await client.query('commit');
        open = false;
        if (!token.allowed) return limited(token);
        return problemOutcome(new ApiError('missing_scope', `This key lacks the scope ${op.scope}.`, { extra: { required_scope: op.scope } }), token);
      }
      /** The token, taken last; null when the bucket emptied meanwhile (nothing is kept). */
      const lastToken = async (): Promise<RateLimitInfo | null> => {
        const token = rl ?? await takeToken();
        return token.allowed ? token : null;
      };
      if (idem) {
        const replay = await client.query<{ r: { body: SqlOutcome } | null }>('select billing.idempotency_begin($1, $2, $3) as r', [idem.endpoint, idem.key, idem.hash]);
        const stored = replay.rows[0].r;
        if (stored) {
          const token = await lastToken();
          await client.query('commit');
          open = false;
          if (!token) return limited(rl!);
          const body = op.idempotencySeal && 'result' in stored.body
            ? { ...stored.body, result: op.idempotencySeal.unseal(stored.body.result, { communityId: auth.community_id!, services: this.services }) }
            : stored.body;
          return { ...this.mapSqlOutcome({ ...body, rl: token, ok: true }, status), replayed: true };
        }
      }
      if (typeof input.cursor_list === 'string') {
        // What billing.encode_cursor binds next_cursor to (SQL operations: op_dispatch sets it).
        await client.query(`select set_config('app.cursor_list', $1, true), set_config('app.cursor_filters', $2, true)`,
          [input.cursor_list, input.cursor_filters]);
      }
      const ctx: OpContext = {
        query: (text, values) => client.query(text, values as unknown[]),
        call: async <T>(fn: string, args: unknown) => {
          const r = await client.query<{ r: T }>(`select billing_api.${fn.replace(/[^a-z0-9_]/g, '')}($1) as r`, [args]);
          return r.rows[0].r;
        },
        communityId: auth.community_id!,
        keyId: auth.key_id!,
        config: this.config,
        baseUrl: this.baseUrlFor(caller),
        services: this.services,
        afterCommit: (fn) => {
          if (idem) throw new Error(`operation ${op.name} is idempotent and cannot answer after commit`);
          afterCommit = fn;
        },
      };
      let afterCommit: (() => Promise<unknown>) | null = null;
      let stored: Record<string, unknown>;
      let outcome: Outcome;
      await client.query('savepoint op');
      try {
        const result = await op.handler!(ctx, input);
        await client.query('release savepoint op');
        stored = { result: op.idempotencySeal && idem ? op.idempotencySeal.seal(result, { communityId: auth.community_id!, services: this.services }) : result };
        outcome = { status, body: result, problem: false };
      } catch (err) {
        const apiError = toApiError(err);
        // Neither a bug nor an outage is an answer to keep under the Idempotency-Key:
        // both roll the whole request back (below) and are never replayed.
        if (apiError.code === 'internal_error' || databaseUnavailableCause(err)) throw err;
        await client.query('rollback to savepoint op');
        stored = { problem: apiError.toProblem() };
        // A handler's own limit (e.g. webhook test pings) sets Retry-After through extra.retry_after.
        const retryAfter = apiError.extra.retry_after;
        outcome = problemOutcome(apiError);
        if (typeof retryAfter === 'number') outcome.retryAfter = retryAfter;
      }
      if (idem) {
        await client.query('select billing.idempotency_finish($1, $2, $3, 0, $4)', [idem.endpoint, idem.key, idem.hash, stored]);
      }
      const token = await lastToken();
      if (!token) {
        // The bucket emptied while this request worked: undo it all and answer 429.
        await client.query('rollback');
        open = false;
        return limited(rl!);
      }
      outcome.rateLimit = outcome.retryAfter !== undefined ? { ...token, retry_after: outcome.retryAfter } : token;
      delete outcome.retryAfter;
      await client.query('commit');
      open = false;
      if (afterCommit && !outcome.problem) {
        // Slow outside work (e.g. a synchronous webhook ping) runs without holding the
        // transaction or, once released below, the connection.
        client.release();
        released = true;
        return { ...outcome, body: await (afterCommit as () => Promise<unknown>)() };
      }
      return outcome;
    } catch (err) {
      // A connection that failed is not handed back to the pool for the next request.
      if (databaseUnavailableCause(err)) broken = err as Error;
      else if (open) await client.query('rollback').catch((e: Error) => { broken = e; });
      const apiError = toApiError(err);
      if (apiError.code === 'internal_error') throw err;
      return problemOutcome(apiError);
    } finally {
      if (!released) client.release(broken);
    }
  }
}

