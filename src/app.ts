// Composition root of the HTTP service: builds the services handlers get (payment
// providers, outbound webhooks), the executor, and mounts every adapter on one
// express app: health routes, provider routes (sandbox pages, Stripe webhooks), MCP
// (/mcp) and REST (/v1, mounted last: it answers what no other route took).
import express from 'express';
import type pg from 'pg';
import type { Config } from './core/config';
import type { Services } from './domain/operation';
import { mountHealthRoutes } from './http/health-routes';
import { mountRestApi } from './http/rest-routes';
import { mountMcp } from './mcp';
import { observeDatabase } from './core/metrics';
import { Executor } from './operations/executor';
import { createPaymentServices, mountProviderRoutes } from './providers';
import { mountMetrics, observeRequests } from './web/observe';
import { createWebhookService } from './webhooks';

export interface AppOptions {
  config: Config;
  apiPool: pg.Pool;
  ownerPool: pg.Pool;
  services?: Services;
  /** Extra routers mounted before the API (GraphQL, dashboard...). */
  mount?: (app: express.Express, executor: Executor) => void;
}

export function createServices(config: Config): Services {
  return {
    payments: createPaymentServices(config),
    webhooks: createWebhookService({
      encryptionKey: config.webhookEncryptionKey,
      allowPrivateUrls: config.webhookAllowPrivateUrls,
    }),
  };
}

export function createApp(opts: AppOptions) {
  const { config, apiPool, ownerPool } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  app.set('query parser', 'simple');
  let baseUrl = config.publicBaseUrl ?? `http://localhost:${config.port}`;
  const executor = new Executor(apiPool, config, opts.services ?? createServices(config), () => baseUrl);
  const seenAt = (url: string) => { if (!config.publicBaseUrl) baseUrl = url; };

  // First: every request gets its id, access log line and metrics, whoever answers it.
  app.use(observeRequests());
  observeDatabase({
    pools: { api: apiPool, owner: ownerPool },
    ownerQuery: <R>(text: string) => ownerPool.query({ text, query_timeout: 5000 } as pg.QueryConfig) as unknown as Promise<{ rows: R[] }>,
  });
  mountMetrics(app, config.metricsToken);
  mountHealthRoutes(app, ownerPool);
  mountProviderRoutes(app, { config, ownerPool });
  mountMcp(app, executor);
  opts.mount?.(app, executor);
  mountRestApi(app, executor, seenAt);
  return { app, executor };
}
