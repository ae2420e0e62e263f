// Process-wide collaborators handed to operation handlers (ctx.services) and to the
// extra routes (sandbox pages, provider webhooks, MCP). Built once from config.
import type pg from 'pg';
import type { Config } from './config';
import { createPaymentServices } from './payments';
import { createWebhookServices } from './webhooks';

export interface ServiceDeps {
  config: Config;
  ownerPool: pg.Pool;
  apiPool: pg.Pool;
}

export function createServices(deps: ServiceDeps): Record<string, unknown> {
  return {
    ...createPaymentServices(deps),
    ...createWebhookServices(deps),
  };
}
