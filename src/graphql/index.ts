// GraphQL adapter (/graphql, PostGraphile 5 through grafserv): authenticates the bearer
// key and takes its rate token exactly as REST does (same SQL, same bucket, same
// problem+json on 401/429, same RateLimit headers), then weighs the query before
// anything runs (graphql-limits.ts): a query over the limits, needing a scope the key
// lacks, or introspecting where introspection is off, is answered with GraphQL errors
// at once; any other pays the rest of its cost in rate tokens (429 when it cannot),
// and PostGraphile runs it as billing_api with the key's community and scopes set in
// its transaction. Ruru (GraphiQL) at /graphiql outside production.
import express from 'express';
import type { Request, Response } from 'express';
import type pg from 'pg';
import { postgraphile } from 'postgraphile';
import { grafserv } from 'postgraphile/grafserv/express/v4';
import { DocumentNode, GraphQLError, GraphQLSchema, parse } from 'postgraphile/graphql';
import { ApiError } from '../core/errors';
import type { RateLimits } from '../core/config';
import { problemOutcome, type Executor, type Identity, type RateLimitInfo } from '../operations/executor';
import { callerOf, sendOutcome, setRateHeaders } from '../web/express-io';
import { analyzeDocument, MAX_TOKENS, tokensFor } from './graphql-limits';
import { verifyJsonDepth } from '../web/json-body';
import { GRAPHIQL_PATH, GRAPHQL_PATH, graphqlPreset } from './graphql-preset';

export { GRAPHIQL_PATH, GRAPHQL_PATH };

export interface GraphqlMount {
  /** Releases PostGraphile (its schema and caches; the pool stays the caller's). */
  release(): Promise<void>;
}

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

export function mountGraphql(app: express.Express, executor: Executor, opts: GraphqlOptions): GraphqlMount {
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

  const router = express.Router();
  router.all(GRAPHQL_PATH, async (req, res, next) => {
    try {
      const who = await executor.identify(callerOf(req));
      if (!who.ok) {
        sendOutcome(res, who.outcome);
        return;
      }
      identities.set(req, who.identity);
      setRateHeaders(res, who.identity.rl, false);
      const { pgl, handler } = build();
      if (req.method === 'POST') {
        await readBody(jsonBody, req, res);
        await readBody(graphqlBody, req, res);
        if (await refused(req, res, who.identity, await pgl.getSchema())) return;
      }
      handler(req, res, next);
    } catch (err) {
      next(err);
    }
  });
  if (opts.graphiql) {
    // Ruru's page and its static files (grafserv's default /ruru-static/).
    router.use((req, res, next) => {
      if (req.path === GRAPHIQL_PATH || req.path.startsWith('/ruru-static/')) build().handler(req, res, next);
      else next();
    });
  }
  app.use(router);
  return {
    release: async () => {
      if (built) await built.pgl.release();
      built = null;
    },
  };
}
