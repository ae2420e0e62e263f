// GraphQL adapter (/graphql, PostGraphile 5 through grafserv): authenticates the bearer
// key and takes its rate token exactly as REST does (same SQL, same bucket, same
// problem+json on 401/429, same RateLimit headers), then weighs the query before
// anything runs (graphql-limits.ts): a query over the limits, needing a scope the key
// lacks, or introspecting where introspection is off, is answered with GraphQL errors
// at once; any other pays the rest of its cost in rate tokens (429 when it cannot),
// and PostGraphile runs it as billing_api with the key's community and scopes set in
// its transaction. Ruru (GraphiQL) at /graphiql outside production.
//
// PostGraphile itself (graphql-engine.ts) loads with the first request that needs it.
import express from 'express';
import type { Executor } from '../operations/executor';
import { callerOf, sendOutcome, setRateHeaders } from '../web/express-io';
import type { GraphqlEngine, GraphqlOptions } from './graphql-engine';
import { GRAPHIQL_PATH, GRAPHQL_PATH } from './graphql-paths';

export { GRAPHIQL_PATH, GRAPHQL_PATH };
export type { GraphqlOptions };

export interface GraphqlMount {
  /** Releases PostGraphile (its schema and caches; the pool stays the caller's). */
  release(): Promise<void>;
}

export function mountGraphql(app: express.Express, executor: Executor, opts: GraphqlOptions): GraphqlMount {
  let loaded: GraphqlEngine | null = null;
  const engine = () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded ??= (require('./graphql-engine') as typeof import('./graphql-engine')).createGraphqlEngine(opts);
    return loaded;
  };
  const router = express.Router();
  router.all(GRAPHQL_PATH, async (req, res, next) => {
    try {
      const who = await executor.identify(callerOf(req));
      if (!who.ok) {
        sendOutcome(res, who.outcome);
        return;
      }
      setRateHeaders(res, who.identity.rl, false);
      // Its statements on a standby when the key may read there (READ_DATABASE_URL); the
      // identity and the query's cost are the primary's bucket's.
      await executor.onStandby(callerOf(req), () => engine().serve(req, res, next, who.identity));
    } catch (err) {
      next(err);
    }
  });
  if (opts.graphiql) {
    // Ruru's page and its static files (grafserv's default /ruru-static/).
    router.use((req, res, next) => {
      if (req.path === GRAPHIQL_PATH || req.path.startsWith('/ruru-static/')) engine().ruru(req, res, next);
      else next();
    });
  }
  app.use(router);
  return {
    release: async () => {
      await loaded?.release();
    },
  };
}
