// The GraphQL engine behind /graphql (src/graphql/index.ts mounts the route and
// identifies the key): PostGraphile with its schema built on first use, the query
// weighed before anything runs (graphql-limits.ts) and paid in rate tokens. Loaded
// with the first GraphQL request, not at start: PostGraphile and graphql-js are about
// 0.8 s of require that a restart should not wait for (docs/decisions/compiled-build.md).
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { postgraphile } from 'postgraphile';
import { grafserv } from 'postgraphile/grafserv/express/v4';
import { DocumentNode, GraphQLError, GraphQLSchema, parse } from 'postgraphile/graphql';
import { ApiError } from '../core/errors';
import { problemOutcome, type Identity, type RateLimitInfo } from '../operations/executor';
import { sendOutcome, setRateHeaders } from '../web/express-io';
import { analyzeDocument, MAX_TOKENS, tokensFor } from './graphql-limits';
import { verifyJsonDepth } from '../web/json-body';
import { graphqlPreset } from './graphql-preset';
import type pg from 'pg';
import type { RateLimits } from '../core/config';

export interface GraphqlOptions {
  pool: pg.Pool;
  graphiql: boolean;
  /** __schema and __type for any valid key (config GRAPHQL_INTROSPECTION). */
  introspection: boolean;
  rateLimits: RateLimits;
}

const BODY_LIMIT = 100_000;
// A body nested deeper than MAX_JSON_DEPTH is the app's 400 problem before anything
// walks it (src/web/json-body.ts).
const jsonBody = express.json({ limit: BODY_LIMIT, type: 'application/json', verify: verifyJsonDepth });
const graphqlBody = express.text({ limit: BODY_LIMIT, type: 'application/graphql' });
const readBody = (parser: express.RequestHandler, req: Request, res: Response) =>
  new Promise<void>((resolve, reject) => parser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));

/** Parsed documents by query text (a client sends the same few queries again and again). */
class DocumentCache {
  private readonly map = new Map<string, DocumentNode | GraphQLError>();
  constructor(private readonly size: number) {}
  get(query: string): DocumentNode | GraphQLError {
    let doc = this.map.get(query);
    if (doc) {
      this.map.delete(query);
    } else {
      try {
        doc = parse(query, { maxTokens: MAX_TOKENS });
      } catch (err) {
        const message = String((err as Error)?.message ?? err);
        doc = /tokens\. Parsing aborted/.test(message)
          ? new GraphQLError(`The document has more than ${MAX_TOKENS} tokens; at most ${MAX_TOKENS} are allowed.`, { extensions: { code: 'QUERY_TOO_LARGE' } })
          : err instanceof GraphQLError ? err : new GraphQLError(message);
      }
      if (this.map.size >= this.size) this.map.delete(this.map.keys().next().value as string);
    }
    this.map.set(query, doc);
    return doc;
  }
}

/**
 * GraphQL errors as grafserv answers them: 200 for an application/json client (the
 * legacy GraphQL-over-HTTP media type), 400 for application/graphql-response+json.
 */
function sendGraphqlErrors(req: Request, res: Response, errors: readonly GraphQLError[]) {
  const modern = /application\/graphql-response\+json/.test(req.header('accept') ?? '');
  res.status(modern ? 400 : 200)
    .type(modern ? 'application/graphql-response+json' : 'application/json')
    .send(JSON.stringify({ errors: errors.map((e) => e.toJSON()) }));
}

export interface GraphqlEngine {
  /** Answers a request to /graphql from a key already identified (its first rate token taken). */
  serve(req: Request, res: Response, next: NextFunction, identity: Identity): Promise<void>;
  /** Ruru's page and its static files. */
  ruru(req: Request, res: Response, next: NextFunction): void;
  /** Releases PostGraphile (its schema and caches; the pool stays the caller's). */
  release(): Promise<void>;
}

export function createGraphqlEngine(opts: GraphqlOptions): GraphqlEngine {
  const identities = new WeakMap<object, Identity>();
  // Built on first use: introspection and schema building cost a second or two of CPU
  // and a pool connection, which a process that never serves GraphQL (or is stopped
  // right after it starts) should not pay.
  let built: { pgl: ReturnType<typeof postgraphile>; handler: express.Router } | null = null;
  const build = () => {
    if (!built) {
      const pgl = postgraphile(graphqlPreset({
        pool: opts.pool,
        graphiql: opts.graphiql,
        introspection: opts.introspection,
        identityOf: (req) => (req && typeof req === 'object' ? identities.get(req) : undefined),
      }));
      const handler = express.Router();
      // Synchronous: grafserv's handler is on the router when addTo returns its promise
      // (no websocket upgrade handler to wait for).
      void pgl.createServ(grafserv).addTo(handler as unknown as express.Express, null, false);
      built = { pgl, handler };
    }
    return built;
  };
  const documents = new DocumentCache(200);

  /** Takes the query's remaining cost from the key's bucket: the rate answer, or null when it cannot pay. */
  async function charge(identity: Identity, tokens: number): Promise<{ allowed: boolean; rl: RateLimitInfo }> {
    const { rows } = await opts.pool.query<{ r: RateLimitInfo & { allowed: boolean } }>(
      'select billing_private.charge_key_tokens($1, $2, $3) as r', [identity.keyId, tokens, opts.rateLimits]);
    const { allowed, ...rl } = rows[0].r;
    return { allowed, rl };
  }

  /** Weighs the request's query; true when the route has answered it. */
  async function refused(req: Request, res: Response, identity: Identity, schema: GraphQLSchema): Promise<boolean> {
    const body: unknown = req.body;
    const fields = typeof body === 'string' ? { query: body } : body && typeof body === 'object' ? body as Record<string, unknown> : null;
    // Not a GraphQL body: grafserv answers it (415, 400...).
    if (!fields || typeof fields.query !== 'string') return false;
    const variables = fields.variables === undefined || fields.variables === null ? {}
      : typeof fields.variables === 'object' && !Array.isArray(fields.variables) ? fields.variables as Record<string, unknown> : null;
    if (!variables) return false;
    const document = documents.get(fields.query);
    if (document instanceof GraphQLError) {
      sendGraphqlErrors(req, res, [document]);
      return true;
    }
    const analysis = analyzeDocument(schema, document, variables);
    if (analysis.errors.length > 0) {
      sendGraphqlErrors(req, res, analysis.errors);
      return true;
    }
    if (analysis.introspection && !opts.introspection) {
      sendGraphqlErrors(req, res, [new GraphQLError('Introspection is off on this server (the operator\'s GRAPHQL_INTROSPECTION setting).',
        { nodes: analysis.introspection, extensions: { code: 'INTROSPECTION_DISABLED' } })]);
      return true;
    }
    const missing = [...analysis.scopes].filter(([scope]) => !identity.scopes.includes(scope));
    if (missing.length > 0) {
      sendGraphqlErrors(req, res, missing.map(([scope, node]) => new GraphQLError(
        `This key lacks the scope ${scope}, which ${node.name.value} needs.`,
        { nodes: node, extensions: { code: 'MISSING_SCOPE', required_scope: scope } })));
      return true;
    }
    // One token was taken with the authentication; the query pays the rest of its cost.
    const tokens = tokensFor(analysis, opts.rateLimits.key_burst);
    if (tokens > 1) {
      const paid = await charge(identity, tokens - 1);
      if (!paid.allowed) {
        sendOutcome(res, problemOutcome(new ApiError('rate_limited',
          `This query costs ${tokens} rate tokens; retry after ${paid.rl.retry_after} seconds.`), paid.rl));
        return true;
      }
      setRateHeaders(res, paid.rl, false);
    }
    return false;
  }
  return {
    async serve(req, res, next, identity) {
      identities.set(req, identity);
      const { pgl, handler } = build();
      if (req.method === 'POST') {
        await readBody(jsonBody, req, res);
        await readBody(graphqlBody, req, res);
        if (await refused(req, res, identity, await pgl.getSchema())) return;
      }
      handler(req, res, next);
    },
    ruru(req, res, next) {
      build().handler(req, res, next);
    },
    async release() {
      if (built) await built.pgl.release();
      built = null;
    },
  };
}
