// Payment providers (sandbox, stripe): services and routes. Owned by the checkout work.
import type express from 'express';
import type { Executor } from '../operations/execute';
import type { ServiceDeps } from '../services';

export function createPaymentServices(_deps: ServiceDeps): Record<string, unknown> {
  return {};
}

/** Routes outside /v1: the sandbox checkout page, provider webhooks. */
export function mountPaymentRoutes(_app: express.Express, _executor: Executor, _deps: ServiceDeps): void {}
