// Runs one operation for one caller: validation of its input, then the request gate
// (gate.ts: authentication, rate limiting, tenant, scope, idempotency and the
// operation itself). REST, MCP, GraphQL and the pages all call this, so every door
// gets the same guarantees.
import crypto from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { baseUrlFor, type Config } from '../core/config';
import { type CursorBinding, decodeCursor, filtersDigest } from '../core/cursor';
import { ApiError } from '../core/errors';
import { type ReadReplicas, readTarget } from '../db/read-replicas';
import type { Operation, Services } from '../domain/operation';
import { Gate, type IdempotencyKey } from './gate';
import { type Caller, type Identity, type Outcome, problemOutcome, unavailableOutcome } from './outcome';
import type { RateLimitInfo } from './token-leases';

export { problemOutcome, unavailableOutcome } from './outcome';
export type { Caller, Identity, Outcome, RateLimitInfo } from './outcome';

export interface RawInput {
  params?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
  idempotencyKey?: string;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
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

export class Executor {
  private readonly gate: Gate;

  constructor(
    pool: pg.Pool,
    readonly config: Config,
    readonly services: Services,
    reads: ReadReplicas | null = null,
  ) {
    this.gate = new Gate(pool, config, services, (caller) => this.baseUrlFor(caller), reads);
  }

  /** The base URL of the links this caller's request hands out (src/core/config.ts baseUrlFor). */
  baseUrlFor(caller: Caller): string {
    return baseUrlFor(this.config, caller.origin);
  }

  /**
   * Authenticates and takes a rate token without running anything (a door's own
   * refusals): the caller's 401, 429 or 403 missing_scope, else its bucket.
   */
  async authenticateOnly(caller: Caller, scope: string | null): Promise<Outcome | RateLimitInfo> {
    const passed = await this.gate.pass(caller, scope);
    return 'outcome' in passed ? passed.outcome : passed.identity.rl;
  }

  /**
   * Who is calling, for a door that runs its own SQL under the caller's settings
   * (GraphQL): the gate identifies the caller and takes a token from the same bucket
   * as REST. A missing, unknown or revoked key, or an empty bucket, is the same
   * Outcome REST answers.
   */
  async identify(caller: Caller): Promise<{ ok: true; identity: Identity } | { ok: false; outcome: Outcome }> {
    // Not on a lease: a query then charges the rest of its cost in the bucket itself,
    // and its RateLimit headers are the bucket's.
    const passed = await this.gate.pass(caller, null, false);
    return 'outcome' in passed ? { ok: false, outcome: passed.outcome } : { ok: true, identity: passed.identity };
  }

  /**
   * Runs fn with the connections PostGraphile takes (src/db/read-replicas.ts
   * routingPool) on a standby, when this caller's read may run there (READ_DATABASE_URL).
   */
  onStandby<T>(caller: Caller, fn: () => Promise<T>): Promise<T> {
    return readTarget.run(this.gate.standbyFor(caller), fn);
  }

  async run(op: Operation, caller: Caller, raw: RawInput): Promise<Outcome> {
    try {
      const refused = refusedIdempotencyKey(op, raw);
      const parsed = refused ? { ok: false as const, error: refused } : parseInput(op, raw);
      if (!parsed.ok) {
        const auth = await this.authenticateOnly(caller, op.scope);
        if ('status' in auth) return auth;
        return problemOutcome(parsed.error, auth);
      }
      const idem: IdempotencyKey | null = op.idempotent && raw.idempotencyKey !== undefined
        ? { endpoint: `${op.method} ${op.path}`, key: raw.idempotencyKey, hash: crypto.createHash('sha256').update(canonical({ params: raw.params ?? {}, body: raw.body ?? {} })).digest('hex') }
        : null;
      const outcome = await this.gate.run(op, caller, parsed.input, idem);
      // Rendered after the transaction ended: the connection is not held while it runs.
      if (op.document && !outcome.problem) outcome.document = await op.document.render(outcome.body);
      return outcome;
    } catch (err) {
      const unavailable = unavailableOutcome(err);
      if (unavailable) return unavailable;
      throw err;
    }
  }
}
