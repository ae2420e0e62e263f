// The request gate: the one way an operation reaches the database, whichever door it
// came through (REST, MCP, GraphQL, the pages) and whether it runs in SQL or in
// TypeScript. This module is the only code that sends the gate's SQL functions
// (db/migrations/fixtures/functions/10-tenancy.sql; test/operations/single-entry.test.ts):
//
//   billing.gate_open   the credential (key or session), 429 first if its bucket is
//                       already empty, the tenant settings, op.scope (the registry's,
//                       the only declaration of it), the Idempotency-Key (replay);
//   billing.gate_close  the answer kept under the Idempotency-Key, the rate token LAST;
//   billing.api_call    both around a SQL operation in one round trip;
//   billing.gate_run    a SQL operation on a leased token (no token to take, no
//                       answer to keep): gate_open, the operation, its answer as text.
//
// A SQL operation is one statement (api_call or gate_run, a named prepared statement); a handler
// runs between gate_open and gate_close in one transaction, in a savepoint so that its
// error is answered (and kept) with its writes undone. Every answer, errors included,
// has taken its rate token; when the bucket empties while a request works, gate_close
// raises BL429 and the whole request is undone (a 429). docs/decisions/one-request-gate.md
//
// Reads on standbys (READ_DATABASE_URL, docs/decisions/read-replicas.md): a GET by an
// API key on a leased token runs on a standby the ReadReplicas pick (the leased gate
// writes nothing); a write marks the key so its next reads stay off any standby that
// has not replayed it; a standby that fails (unreachable, 25006, a recovery conflict)
// is skipped and the primary answers. While the primary cannot lease tokens, standby
// reads spend this process's share of the key's limits (LocalTokens).
import type pg from 'pg';
import type { Config } from '../core/config';
import { ApiError, databaseUnavailableCause, fromSqlState, type ProblemBody, toApiError, UNAUTHORIZED_DETAIL } from '../core/errors';
import { hashKey, KEY_PATTERN, SESSION_TOKEN_PATTERN } from '../core/ids';
import { rateLimitRefusals, readsServed } from '../core/metrics';
import { retryConflicts } from '../db/community-transaction';
import type { ReadReplicas, Replica } from '../db/read-replicas';
import type { Operation, OpContext, Services } from '../domain/operation';
import { type Caller, type Identity, type Outcome, problemOutcome, textOutcome } from './outcome';
import { type LeaseAnswer, type LeasedKey, LocalTokens, type RateLimitInfo, TokenLeases } from './token-leases';

/** The Idempotency-Key of a request: what billing.idempotency_begin/finish key the record by. */
export interface IdempotencyKey {
  endpoint: string;
  key: string;
  hash: string;
}

/** An error as SQL returns it in a value (the operation's, a missing scope, a reused key). */
interface SqlError {
  sqlstate?: string;
  message?: string;
  detail?: string | null;
}

/** An answer kept under an Idempotency-Key: a SQL operation's result or error, a handler's result or problem. */
interface StoredAnswer {
  result?: unknown;
  error?: SqlError;
  problem?: ProblemBody;
}

/** What billing.gate_open and billing.api_call answer (10-tenancy.sql). */
interface GateAnswer {
  ok: boolean;
  result?: unknown;
  problem?: ProblemBody;
  community_id?: string;
  key_id?: string;
  scopes?: string[];
  rl?: RateLimitInfo;
  /** gate_open: unauthorized / rate_limited when not ok, else an error answered without running the operation. */
  error?: SqlError | 'unauthorized' | 'rate_limited';
  /** gate_open: the answer stored under the Idempotency-Key. */
  replay?: StoredAnswer;
  /** api_call: the answer came from the idempotency record. */
  replayed?: boolean;
}

/** A handler's answer, and what the idempotency record keeps of it. */
interface HandlerAnswer {
  outcome: Outcome;
  stored: StoredAnswer | null;
}

// The statement of every SQL operation, prepared once per connection (its name). The
// result comes back as text (Outcome.bodyText); the rest is small.
const API_CALL = `select o - 'result' as r, (o->'result')::text as t from billing.api_call($1, $2, $3, $4, $5, $6, $7, $8, $9) o`;
/** A SQL operation on a leased token: its answer as text; an error of the operation, or 401/403, raised. */
const GATE_RUN = 'select billing.gate_run($1, $2, $3, $4, $5) as t';
const GATE_OPEN = 'select billing.gate_open($1, $2, $3, $4, $5, p_request_id => $6) as r';
const GATE_CLOSE = 'select billing.gate_close($1, $2, $3) as r';
/** gate_open on a leased token (no bucket, nothing written): what a handler's read opens on a standby. */
const GATE_OPEN_LEASED = 'select billing.gate_open($1, null, null, $2, null, true, $3) as r';

/** How long standby reads spend local tokens, without asking the primary, after it failed to lease. */
const PRIMARY_LOST_MS = 2000;

/**
 * An error after which a standby's read is asked of the primary instead: the standby
 * unreachable or shutting down, a write refused (25006: a GET that writes), a
 * recovery conflict (40001) or a serialization/deadlock retry.
 */
function standbyFailure(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return databaseUnavailableCause(err) !== null || code === '25006' || code === '40001' || code === '40P01';
}

/** The bucket of a request gate_close refused (BL429, the bucket as JSON in its detail), else null. */
function emptiedBucket(err: unknown): RateLimitInfo | null {
  const e = err as { code?: unknown; detail?: unknown };
  if (e?.code !== 'BL429' || typeof e.detail !== 'string') return null;
  return JSON.parse(e.detail) as RateLimitInfo;
}

function limited(rl: RateLimitInfo): Outcome {
  rateLimitRefusals.inc();
  return problemOutcome(new ApiError('rate_limited', `Too many requests; retry after ${rl.retry_after} seconds.`), rl);
}

function sqlProblem(err: SqlError, rl: RateLimitInfo | undefined): Outcome {
  const apiError = fromSqlState(err.sqlstate ?? '', err.message ?? '', err.detail) ?? new ApiError('internal_error', 'An unexpected error occurred.');
  return problemOutcome(apiError, rl);
}

/** A stored or returned answer as an Outcome (the success body as a value). */
function answerOutcome(answer: StoredAnswer, status: number, rl: RateLimitInfo | undefined, replayed: boolean): Outcome {
  if (answer.problem) return { status: answer.problem.status, body: answer.problem, problem: true, rateLimit: rl, replayed };
  if (answer.error) return { ...sqlProblem(answer.error, rl), replayed };
  return { status, body: answer.result, problem: false, rateLimit: rl, replayed };
}

export class Gate {
  private readonly leases: TokenLeases;
  private readonly local: LocalTokens;
  /** Until when the primary is taken as lost for leases (standby reads spend local tokens). */
  private primaryLostUntil = 0;

  constructor(private readonly pool: pg.Pool, private readonly config: Config, private readonly services: Services,
    private readonly baseUrlFor: (caller: Caller) => string, private readonly reads: ReadReplicas | null = null) {
    this.leases = new TokenLeases(pool, config.rateLimits, config.tokenLeaseMs);
    this.local = new LocalTokens(config.rateLimits, config.readTokenShare);
  }

  /** Runs op for caller on its parsed input: every operation of every door comes here. */
  async run(op: Operation, caller: Caller, input: Record<string, unknown>, idem: IdempotencyKey | null): Promise<Outcome> {
    const read = op.method === 'GET' && idem === null;
    if (read && !op.sql && this.reads) {
      const onStandby = await this.handlerOnStandby(op, caller, input);
      if (onStandby) return onStandby;
    }
    const outcome = op.sql ? await this.sqlOperation(op, op.sql, caller, input, idem, read) : await this.handlerOperation(op, caller, input, idem);
    // A write (or what may have written) keeps the key's next reads off standbys behind
    // it; a request refused at the gate (401, 403 scope, 429) wrote nothing.
    if (!read && this.reads && ![401, 403, 429].includes(outcome.status)) void this.reads.wrote(this.credential(caller));
    return outcome;
  }

  /**
   * Identifies the caller and takes its token without running anything: refused input
   * (answered with the caller's own 401/429/403 first) and GraphQL, which runs its
   * own statements under the identity. A missing scope is an outcome. lease: take
   * the token from this process's lease, as a SQL operation does (false for GraphQL,
   * which charges a query's cost in the bucket).
   */
  async pass(caller: Caller, scope: string | null, lease = true): Promise<{ identity: Identity } | { outcome: Outcome }> {
    const credential = this.credential(caller);
    const { r } = (lease ? await this.leased(caller, credential, scope, null, null) : null)
      ?? await this.apiCall([credential, caller.ip, this.config.rateLimits, scope, null, null, null, false, null]);
    const refused = this.refused(r, caller);
    if (refused) return { outcome: refused };
    if (typeof r.error === 'object') return { outcome: sqlProblem(r.error, r.rl) };
    return { identity: { communityId: r.community_id!, keyId: r.key_id!, scopes: r.scopes ?? [], rl: r.rl! } };
  }

  /** The sha256 the database knows the key or session by, or null when malformed or missing. */
  private credential(caller: Caller): string | null {
    if (caller.session !== undefined) return caller.session && SESSION_TOKEN_PATTERN.test(caller.session) ? hashKey(caller.session) : null;
    return caller.key && KEY_PATTERN.test(caller.key) ? hashKey(caller.key) : null;
  }

  /** 401 or 429 when the gate did not open; tells the caller who it is once known. */
  private refused(open: GateAnswer, caller: Caller): Outcome | null {
    if (open.community_id && open.key_id) caller.identified?.(open.community_id, open.key_id);
    if (open.ok) return null;
    if (open.error === 'rate_limited') return limited(open.rl!);
    return problemOutcome(new ApiError('unauthorized', UNAUTHORIZED_DETAIL), open.rl);
  }

  /** billing.api_call, run again whole on a deadlock; a bucket emptied meanwhile answers rate_limited. */
  private async apiCall(values: unknown[]): Promise<{ r: GateAnswer; t: string | null }> {
    try {
      return await retryConflicts(async () => {
        const { rows } = await this.pool.query<{ r: GateAnswer; t: string | null }>({ name: 'api_call', text: API_CALL, values });
        return rows[0];
      });
    } catch (err) {
      const rl = emptiedBucket(err);
      if (rl) return { r: { ok: false, error: 'rate_limited', rl }, t: null };
      throw err;
    }
  }

  /**
   * One round trip. A key's token comes from this process's lease when it has one
   * (no bucket write); a session, an Idempotency-Key or a revoked key take theirs in
   * the database, per request.
   */
  private async sqlOperation(op: Operation, sql: string, caller: Caller, input: Record<string, unknown>,
    idem: IdempotencyKey | null, read: boolean): Promise<Outcome> {
    const status = op.status ?? 200;
    const credential = this.credential(caller);
    const answer = (idem ? null : await this.leased(caller, credential, op.scope, sql, input, read))
      ?? await this.apiCall([credential, caller.ip, this.config.rateLimits, op.scope, sql, input, idem, false, caller.requestId ?? null]);
    return this.sqlOutcome(answer.r, answer.t, caller, status);
  }

  /**
   * The call on a token of this process's lease, for a key (not a session). Every
   * token a process takes for a key comes from the lease, so the RateLimit headers it
   * answers count them all. Null when there is no lease to use, or the key was revoked
   * since the lease (then the caller takes the database path, as any unknown key does).
   * An operation runs through billing.gate_run; without one (sql null) api_call only
   * identifies the caller.
   */
  private async leased(caller: Caller, credential: string | null, scope: string | null, sql: string | null,
    input: Record<string, unknown> | null, read = false): Promise<{ r: GateAnswer; t: string | null } | null> {
    if (!credential || caller.session !== undefined) return null;
    const onStandby = read && this.reads !== null && sql !== null;
    // A burst too small to lease from (under 20) still leases one token at a time for a
    // standby read: the read itself then writes nothing where it runs.
    if (!this.leases.enabled && !onStandby) return null;
    const lease = await this.token(credential, onStandby);
    if (lease.kind === 'limited') return { r: { ok: false, error: 'rate_limited', rl: lease.rl }, t: null };
    if (lease.kind !== 'token') return null;
    if (sql === null) {
      const answer = await this.apiCall([credential, null, null, scope, null, null, null, true, caller.requestId ?? null]);
      return answer.r.ok ? { r: { ...answer.r, rl: lease.rl }, t: answer.t } : null;
    }
    const values = [credential, scope, sql, input, caller.requestId ?? null];
    const key: LeasedKey | undefined = lease.key ?? this.leases.keyOf(credential);
    const opened: GateAnswer = { ok: true, rl: lease.rl, community_id: key?.communityId, key_id: key?.keyId };
    try {
      const t = onStandby ? await this.readRun(credential, values) : await this.gateRun(values);
      return { r: opened, t };
    } catch (err) {
      // What api_call answers as a value: the operation's error (BL...), a missing scope.
      const e = err as { code?: unknown; message?: string; detail?: string };
      if (e?.code === 'BL401') return null;
      if (typeof e?.code !== 'string' || !e.code.startsWith('BL')) throw err;
      return { r: { ...opened, error: { sqlstate: e.code, message: e.message, detail: e.detail || null } }, t: null };
    }
  }

  /** billing.gate_run, run again whole on a deadlock. */
  private gateRun(values: unknown[]): Promise<string> {
    return retryConflicts(async () => {
      const { rows } = await this.pool.query<{ t: string }>({ name: 'gate_run', text: GATE_RUN, values });
      return rows[0].t;
    });
  }

  /**
   * A key's token from this process's lease; for a standby read while the primary
   * cannot lease (unreachable, or failed to in the last PRIMARY_LOST_MS), from this
   * process's share of the key's limits instead: reads go on without the primary.
   */
  private async token(credential: string, standbyRead: boolean): Promise<LeaseAnswer> {
    if (!standbyRead) return this.leases.take(credential);
    if (Date.now() < this.primaryLostUntil) return this.local.take(credential);
    try {
      return await this.leases.take(credential);
    } catch (err) {
      if (!databaseUnavailableCause(err)) throw err;
      this.primaryLostUntil = Date.now() + PRIMARY_LOST_MS;
      return this.local.take(credential);
    }
  }

  /**
   * The standby a read by this caller may run on, for a door that runs its own
   * statements (GraphQL): an API key's only (a session's reads stay on the primary),
   * and none while the key's last write is not replayed there.
   */
  standbyFor(caller: Caller): Replica | null {
    const credential = this.credential(caller);
    return credential && caller.session === undefined ? this.standby(credential) : null;
  }

  /** A standby this key may read from (none while its last write is not replayed there). */
  private standby(credential: string): Replica | null {
    return this.reads?.pick(credential) ?? null;
  }

  /** billing.gate_run for a read on a standby; on the primary when none will do or it fails. */
  private async readRun(credential: string, values: unknown[]): Promise<string> {
    for (let replica = this.standby(credential); replica; replica = this.standby(credential)) {
      try {
        const { rows } = await replica.pool.query<{ t: string }>({ name: 'gate_run', text: GATE_RUN, values });
        readsServed.inc({ target: 'standby' });
        return rows[0].t;
      } catch (err) {
        if (!standbyFailure(err)) throw err;
        // A read that writes (25006) or met a recovery conflict: the primary answers it,
        // the standby stays in use. Only an unreachable one is skipped from now on.
        if (!databaseUnavailableCause(err)) break;
        this.reads!.failed(replica, err);
      }
    }
    readsServed.inc({ target: 'primary' });
    return this.gateRun(values);
  }

  /**
   * A handler's read (a GET written in TypeScript) on a standby: gate_open on the
   * key's leased token in a read-only transaction, the handler, no gate_close (the
   * token is the lease's). Null: not for a standby (no key, no lease, no standby will
   * do, the key unknown there, or the standby failed); the primary's path answers.
   */
  private async handlerOnStandby(op: Operation, caller: Caller, input: Record<string, unknown>): Promise<Outcome | null> {
    const credential = this.credential(caller);
    if (!credential || caller.session !== undefined) return null;
    const replica = this.standby(credential);
    if (!replica) return null;
    const lease = await this.token(credential, true);
    if (lease.kind === 'limited') return limited(lease.rl);
    if (lease.kind !== 'token') return null;
    let client: pg.PoolClient | null = null;
    let broken: Error | undefined;
    const later: { fn?: () => Promise<unknown> } = {};
    let outcome: Outcome;
    try {
      client = await replica.pool.connect();
      await client.query('begin read only');
      const { rows } = await client.query<{ r: GateAnswer }>(GATE_OPEN_LEASED, [credential, op.scope, caller.requestId ?? null]);
      const open = rows[0].r;
      if (!open.ok) {
        await client.query('rollback');
        return null;
      }
      caller.identified?.(open.community_id!, open.key_id!);
      outcome = typeof open.error === 'object'
        ? sqlProblem(open.error, undefined)
        : (await this.handle(client, op, caller, input, null, open, later)).outcome;
      await client.query('commit');
      readsServed.inc({ target: 'standby' });
      outcome.rateLimit = outcome.retryAfter !== undefined ? { ...lease.rl, retry_after: outcome.retryAfter } : lease.rl;
      delete outcome.retryAfter;
    } catch (err) {
      if (client) await client.query('rollback').catch((e: Error) => { broken = e; });
      if (!standbyFailure(err)) throw err;
      if (databaseUnavailableCause(err)) {
        broken = err as Error;
        this.reads!.failed(replica, err);
      }
      return null;
    } finally {
      client?.release(broken);
    }
    if (later.fn && !outcome.problem) return { ...outcome, body: await later.fn() };
    return outcome;
  }

  private sqlOutcome(out: GateAnswer, text: string | null, caller: Caller, status: number): Outcome {
    const refused = this.refused(out, caller);
    if (refused) return refused;
    const replayed = out.replayed === true;
    if (text !== null && !out.error && !out.problem) return textOutcome(status, text, out.rl!, replayed);
    const error = typeof out.error === 'object' ? out.error : undefined;
    return answerOutcome({ result: text === null ? out.result : JSON.parse(text) as unknown, error, problem: out.problem }, status, out.rl, replayed);
  }

  /**
   * gate_open, the handler, gate_close in one transaction with one commit. Whatever
   * the gate answered (even 401 or 429: the IP's token) is committed; only a bug, an
   * outage or a bucket emptied meanwhile roll the request back whole.
   */
  private handlerOperation(op: Operation, caller: Caller, input: Record<string, unknown>, idem: IdempotencyKey | null): Promise<Outcome> {
    return retryConflicts(async () => {
      const later: { fn?: () => Promise<unknown> } = {};
      const client = await this.pool.connect();
      let broken: Error | undefined;
      let outcome: Outcome;
      try {
        try {
          await client.query('begin');
          outcome = await this.throughGate(client, op, caller, input, idem, later);
          await client.query('commit');
        } catch (err) {
          // A connection that failed is not handed back to the pool for the next request.
          if (databaseUnavailableCause(err)) broken = err as Error;
          else await client.query('rollback').catch((e: Error) => { broken = e; });
          throw err;
        }
      } catch (err) {
        const rl = emptiedBucket(err);
        if (rl) return limited(rl);
        const apiError = toApiError(err);
        if (apiError.code === 'internal_error' || databaseUnavailableCause(err)) throw err;
        return problemOutcome(apiError);
      } finally {
        client.release(broken);
      }
      // Slow outside work (e.g. a synchronous webhook ping) runs after commit, without
      // holding the transaction or the connection.
      if (later.fn && !outcome.problem) return { ...outcome, body: await later.fn() };
      return outcome;
    });
  }

  private async throughGate(client: pg.PoolClient, op: Operation, caller: Caller, input: Record<string, unknown>,
    idem: IdempotencyKey | null, later: { fn?: () => Promise<unknown> }): Promise<Outcome> {
    const limits = this.config.rateLimits;
    const { rows } = await client.query<{ r: GateAnswer }>(GATE_OPEN, [this.credential(caller), caller.ip, limits, op.scope, idem, caller.requestId ?? null]);
    const open = rows[0].r;
    const refused = this.refused(open, caller);
    if (refused) return refused;
    const status = op.status ?? 200;
    let answer: HandlerAnswer;
    if (typeof open.error === 'object') {
      answer = { outcome: sqlProblem(open.error, undefined), stored: null };
    } else if (open.replay) {
      const seal = op.idempotencySeal;
      const stored = seal && 'result' in open.replay
        ? { ...open.replay, result: seal.unseal(open.replay.result, { communityId: open.community_id!, services: this.services }) }
        : open.replay;
      answer = { outcome: answerOutcome(stored, status, undefined, true), stored: null };
    } else {
      answer = await this.handle(client, op, caller, input, idem, open, later);
    }
    const closed = await client.query<{ r: RateLimitInfo }>(GATE_CLOSE, [limits, answer.stored && idem, answer.stored]);
    const rl = closed.rows[0].r;
    const outcome = answer.outcome;
    outcome.rateLimit = outcome.retryAfter !== undefined ? { ...rl, retry_after: outcome.retryAfter } : rl;
    delete outcome.retryAfter;
    return outcome;
  }

  /** The handler in a savepoint: its error is an answer, kept under the Idempotency-Key, its writes undone. */
  private async handle(client: pg.PoolClient, op: Operation, caller: Caller, input: Record<string, unknown>,
    idem: IdempotencyKey | null, open: GateAnswer, later: { fn?: () => Promise<unknown> }): Promise<HandlerAnswer> {
    const communityId = open.community_id!;
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
      communityId,
      keyId: open.key_id!,
      config: this.config,
      baseUrl: this.baseUrlFor(caller),
      services: this.services,
      afterCommit: (fn) => {
        if (idem) throw new Error(`operation ${op.name} is idempotent and cannot answer after commit`);
        later.fn = fn;
      },
    };
    await client.query('savepoint op');
    try {
      const result = await op.handler!(ctx, input);
      await client.query('release savepoint op');
      const seal = op.idempotencySeal;
      return {
        outcome: { status: op.status ?? 200, body: result, problem: false },
        stored: { result: seal && idem ? seal.seal(result, { communityId, services: this.services }) : result },
      };
    } catch (err) {
      const apiError = toApiError(err);
      // Neither a bug nor an outage is an answer to keep under the Idempotency-Key:
      // both roll the whole request back and are never replayed.
      if (apiError.code === 'internal_error' || databaseUnavailableCause(err)) throw err;
      await client.query('rollback to savepoint op');
      const outcome = problemOutcome(apiError);
      // A handler's own limit (e.g. webhook test pings) sets Retry-After through extra.retry_after.
      const retryAfter = apiError.extra.retry_after;
      if (typeof retryAfter === 'number') outcome.retryAfter = retryAfter;
      return { outcome, stored: { problem: apiError.toProblem() } };
    }
  }
}
