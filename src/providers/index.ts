// Payment providers (sandbox, stripe): the payment port of src/domain/checkout/
// implemented, and their routes outside /v1 (the sandbox checkout and portal pages,
// Stripe's webhooks). The composition root (src/app.ts) builds and mounts them.
import type express from 'express';
import type { Request } from 'express';
import type pg from 'pg';
import { baseUrlFor, type Config } from '../core/config';
import type { PaymentProvider, PaymentServices, ProviderName } from '../domain/checkout/payment-port';
import { mountMailLinks } from './mail-link-routes';
import { mountMailPortal } from './mail-portal-routes';
import { mountSandboxRoutes, SandboxProvider } from './sandbox/sandbox-provider';
import { mountStripeWebhook, StripeProvider } from './stripe/stripe-provider';

export interface ProviderDeps {
  config: Config;
  ownerPool: pg.Pool;
}

export function createPaymentServices(config: Config): PaymentServices {
  const sandbox = new SandboxProvider();
  const stripe = new StripeProvider(config);
  const providers: Record<ProviderName, PaymentProvider> = { sandbox, stripe };
  return { provider: (name) => providers[name] };
}

/** Routes outside /v1: the sandbox checkout and portal pages, Stripe's webhooks, the signed links of mail. */
export function mountProviderRoutes(app: express.Express, deps: ProviderDeps): void {
  const baseUrl = (req: Request) => baseUrlFor(deps.config, { protocol: req.protocol, host: req.get('host') });
  mountSandboxRoutes(app, deps.ownerPool, baseUrl);
  mountStripeWebhook(app, deps);
  mountMailPortal(app, { ...deps, payments: createPaymentServices(deps.config) }, baseUrl);
  mountMailLinks(app, deps);
}
