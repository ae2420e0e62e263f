// Payment providers (sandbox, stripe): services and routes.
import type express from 'express';
import type { Request } from 'express';
import type { Executor } from '../operations/execute';
import type { ServiceDeps } from '../services';
import type { PaymentProvider, PaymentServices, ProviderName } from './provider';
import { mountSandboxRoutes, SandboxProvider } from './sandbox';
import { mountStripeWebhook, StripeProvider } from './stripe';

export type { PaymentServices } from './provider';

export function createPaymentServices(deps: ServiceDeps): { payments: PaymentServices } {
  const sandbox = new SandboxProvider();
  const stripe = new StripeProvider(deps.config);
  const providers: Record<ProviderName, PaymentProvider> = { sandbox, stripe };
  return { payments: { provider: (name) => providers[name] } };
}

/** Routes outside /v1: the sandbox checkout and portal pages, Stripe's webhooks. */
export function mountPaymentRoutes(app: express.Express, _executor: Executor, deps: ServiceDeps): void {
  const baseUrl = (req: Request) => deps.config.publicBaseUrl ?? `${req.protocol}://${req.get('host')}`;
  mountSandboxRoutes(app, deps.ownerPool, baseUrl);
  mountStripeWebhook(app, deps);
}
