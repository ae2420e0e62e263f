// GraphQL adapter (/graphql, PostGraphile 5 through grafserv): authenticates the bearer
// key and takes its rate token exactly as REST does (same SQL, same bucket, same
// problem+json on 401/429, same RateLimit headers), then lets PostGraphile run the
// query as billing_api with the key's community and scopes set in its transaction.
// Ruru (GraphiQL) at /graphiql outside production.
import express from 'express';
import type pg from 'pg';
import { postgraphile } from 'postgraphile';
import { grafserv } from 'postgraphile/grafserv/express/v4';
import type { Executor, Identity } from '../operations/executor';
import { callerOf, sendOutcome, setRateHeaders } from '../web/express-io';
import { verifyJsonDepth } from '../web/json-body';
import { GRAPHIQL_PATH, GRAPHQL_PATH, graphqlPreset } from './graphql-preset';

export { GRAPHIQL_PATH, GRAPHQL_PATH };

export interface GraphqlMount {
  /** Releases PostGraphile (its schema and caches; the pool stays the caller's). */
  release(): Promise<void>;
}

export function mountGraphql(app: express.Express, executor: Executor, opts: { pool: pg.Pool; graphiql: boolean }): GraphqlMount {
  const identities = new WeakMap<object, Identity>();
  // Built on first use: introspection and schema building cost a second or two of CPU
  // and a pool connection, which a process that never serves GraphQL (or is stopped
  // right after it starts) should not pay.
  let built: { pgl: ReturnType<typeof postgraphile>; handler: express.Router } | null = null;
  const graphql = (): express.Router => {
    if (!built) {
      const pgl = postgraphile(graphqlPreset({
        pool: opts.pool,
        graphiql: opts.graphiql,
        identityOf: (req) => (req && typeof req === 'object' ? identities.get(req) : undefined),
      }));
      const handler = express.Router();
      // Synchronous: grafserv's handler is on the router when addTo returns its promise
      // (no websocket upgrade handler to wait for).
      void pgl.createServ(grafserv).addTo(handler as unknown as express.Express, null, false);
      built = { pgl, handler };
    }
    return built.handler;
  };
  const router = express.Router();

  // A JSON body is read here, before authentication as on /v1, so one nesting deeper
  // than MAX_JSON_DEPTH (or over 100 kB) is the app's 400 (413) problem; grafserv takes
  // the bytes as they are (a Buffer body) and parses them itself.
  router.post(GRAPHQL_PATH, express.raw({ type: 'application/json', limit: '100kb', verify: verifyJsonDepth }));
  router.all(GRAPHQL_PATH, async (req, res, next) => {
    try {
      const who = await executor.identify(callerOf(req));
      if (!who.ok) {
        sendOutcome(res, who.outcome);
        return;
      }
      identities.set(req, who.identity);
      setRateHeaders(res, who.identity.rl, false);
      graphql()(req, res, next);
    } catch (err) {
      next(err);
    }
  });
  if (opts.graphiql) {
    // Ruru's page and its static files (grafserv's default /ruru-static/).
    router.use((req, res, next) => {
      if (req.path === GRAPHIQL_PATH || req.path.startsWith('/ruru-static/')) graphql()(req, res, next);
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
