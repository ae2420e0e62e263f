// Composition root of the HTTP service: builds the services handlers get (payment
// providers, outbound webhooks), the executor, and mounts every adapter on one
// express app: health routes, provider routes (sandbox pages, Stripe webhooks), the
// platforms' inbound routes (/platforms/...: identity linking), MCP
// (/mcp), GraphQL (/graphql, Ruru at /graphiql outside production) and REST (/v1,
// mounted last: it answers what no other route took).
import express from 'express';
import type pg from 'pg';
import { baseUrlFor, type Config } from './core/config';
import type { Services } from './domain/operation';
import { mountHealthRoutes } from './http/health-routes';
export { createHttpServer } from './http/http-server';
import { mountGraphql } from './graphql';
import { mountProblemPages } from './http/problem-pages';
import { mountRestApi } from './http/rest-routes';
import { mountDashboard } from './dashboard/dashboard-routes';
import { mountMemberPortal } from './dashboard/portal-routes';
import { mountMcp } from './mcp';
import { observeDatabase } from './core/metrics';
import { log } from './core/log';
import { ReadReplicas, routingPool } from './db/read-replicas';
import { Executor } from './operations/executor';
import { createPaymentServices, mountProviderRoutes } from './providers';
import { mountPlatformLinking } from './linking/linking-routes';
import { mountDiscordConnect } from './linking/discord-connect';
import { setBaseUrlOf } from './web/express-io';
import { mountMetrics, observeRequests } from './web/observe';
import { createWebhookService } from './webhooks';

export interface AppOptions {
  config: Config;
  apiPool: pg.Pool;
  ownerPool: pg.Pool;
  services?: Services;
  /** Whether start-up is complete (/readyz answers 503 until it is); default: always. */
  started?: () => boolean;
  /**
   * The standbys of READ_DATABASE_URL (src/db/read-replicas.ts), as API logins; default:
   * built here from config.readDatabaseUrls as given. createApp starts their checks;
   * the caller stops them (the returned reads).
   */
  readReplicas?: ReadReplicas | null;
  /** Extra routers mounted before the API (GraphQL, dashboard...). */
  mount?: (app: express.Express, executor: Executor) => void;
}

export function createServices(config: Config): Services {
  return {
    payments: createPaymentServices(config),
    webhooks: createWebhookService({
      encryptionKey: config.webhookEncryptionKey,
      allowPrivateUrls: config.webhookAllowPrivateUrls,
      ports: config.webhookPorts,
    }),
  };
}

export function createApp(opts: AppOptions) {
  const { config, apiPool, ownerPool } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  app.set('query parser', 'simple');
  // No ETag: answers are per key and not cacheable (Cache-Control: no-store below), and
  // Express would hash every body to make one (SHA-1 over a 100-row list each time).
  app.set('etag', false);
  // No response is to be sniffed into another type; nothing under /v1 or /mcp is
  // cacheable (it answers one key, and some answers carry secrets or pay tokens).
  app.use((req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (req.path.startsWith('/v1') || req.path.startsWith('/mcp')) res.setHeader('Cache-Control', 'no-store');
    next();
  });
  // The base URL of the links a request hands out is computed per request
  // (Executor.baseUrlFor), never remembered from one request for another.
  const reads = opts.readReplicas !== undefined ? opts.readReplicas
    : config.readDatabaseUrls.length > 0 ? new ReadReplicas(apiPool, {
      urls: config.readDatabaseUrls, maxLagMs: config.readMaxLagMs, poolSize: config.poolSize,
      timeouts: config.dbTimeouts, pooler: config.databasePooler,
      log: (line) => log.info({ component: 'read-replicas' }, line),
    }) : null;
  void reads?.start();
  const executor = new Executor(apiPool, config, opts.services ?? createServices(config), reads);
  // Problem bodies name their page ({base}/problems#<code>) at the same base.
  setBaseUrlOf(app, (req) => baseUrlFor(config, { protocol: req.protocol, host: req.get('host') }));

  // First: every request gets its id, access log line and metrics, whoever answers it.
  app.use(observeRequests());
  observeDatabase({
    pools: { api: apiPool, owner: ownerPool, ...Object.fromEntries((reads?.pools ?? []).map((p, i) => [`read${i + 1}`, p])) },
    ownerQuery: <R>(text: string) => ownerPool.query({ text, query_timeout: 5000 } as pg.QueryConfig) as unknown as Promise<{ rows: R[] }>,
  });
  mountMetrics(app, config.metricsToken);
  mountHealthRoutes(app, ownerPool, opts.started);
  mountProviderRoutes(app, { config, ownerPool });
  // Members link their identities through the bots (Discord interactions, Telegram updates).
  mountPlatformLinking(app, { config, apiPool });
  mountDiscordConnect(app, { config, apiPool });
  mountMcp(app, executor);
  const graphql = mountGraphql(app, executor, {
    pool: reads ? routingPool(apiPool, reads) : apiPool, graphiql: config.graphiql, introspection: config.graphqlIntrospection, rateLimits: config.rateLimits,
  });
  mountDashboard(app, { executor, api: apiPool, config });
  mountMemberPortal(app, { executor, api: apiPool, config });
  opts.mount?.(app, executor);
  mountProblemPages(app);
  mountRestApi(app, executor);
  return { app, executor, graphql, reads };
}
