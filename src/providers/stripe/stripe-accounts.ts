// Which Stripe account a community sells through: its own (secret_key and
// webhook_secret set with `billing catalog apply`, stored encrypted in
// billing_private.payment_secrets), else the deployment's STRIPE_SECRET_KEY and
// STRIPE_WEBHOOK_SECRET. One SDK client per community key, cached by its ciphertext
// (a new key, a new ciphertext: the next request builds a new client, in every process).
import type pg from 'pg';
import type Stripe from 'stripe';
import type { Config } from '../../core/config';
import { ApiError } from '../../core/errors';
import { stripeCalls } from '../../core/metrics';
import { PaymentSecretBox, PaymentSecretName, paymentSecretCiphertext } from '../../domain/checkout/payment-secrets';

export type StripeClient = Stripe.Stripe;

/** A transaction whose community is set (billing.current_community_id()). */
export interface CommunityReader {
  communityId: string;
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

let sdk: typeof Stripe | undefined;
/**
 * The Stripe SDK, required when first used (a Stripe client made, a webhook verified),
 * not at start: about 0.1-0.2 s of a restart, for a deployment that may never use it.
 */
export function stripeSdk(): typeof Stripe {
  if (!sdk) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const loaded = require('stripe') as typeof Stripe & { default?: typeof Stripe };
    sdk = loaded.default ?? loaded;
  }
  return sdk;
}

export function createStripeClient(config: Config, secretKey: string | null = config.stripeSecretKey): StripeClient | null {
  if (!secretKey) return null;
  const client = new (stripeSdk())(secretKey, {
    maxNetworkRetries: 1,
    timeout: 20000,
    telemetry: false,
    ...(config.stripeApiHost ? { host: config.stripeApiHost } : {}),
    ...(config.stripeApiPort ? { port: config.stripeApiPort } : {}),
    ...(config.stripeApiProtocol ? { protocol: config.stripeApiProtocol } : {}),
  });
  // Every answer from Stripe (retries included); unreachable Stripe is counted in stripeFailure.
  client.on('response', (event: { status: number }) => {
    stripeCalls.inc({ outcome: event.status < 400 ? 'success' : event.status < 500 ? 'client_error' : 'server_error' });
  });
  return client;
}

const CACHE_LIMIT = 1000;

export class StripeAccounts {
  private readonly deployment: StripeClient | null;
  private readonly box: PaymentSecretBox | null;
  private readonly clients = new Map<string, { ciphertext: string; client: StripeClient }>();
  private readonly webhookSecrets = new Map<string, { ciphertext: string; secret: string }>();

  constructor(private readonly config: Config) {
    this.deployment = createStripeClient(config);
    let box: PaymentSecretBox | null = null;
    try {
      box = config.webhookEncryptionKey ? new PaymentSecretBox(config.webhookEncryptionKey) : null;
    } catch {
      box = null; // a malformed key: community secrets cannot be read (reported when one is needed)
    }
    this.box = box;
  }

  private decrypt(communityId: string, name: PaymentSecretName, ciphertext: string): string {
    if (!this.box) {
      throw new ApiError('payment_config_inactive', 'This community\'s Stripe keys are stored encrypted, and this deployment has no valid WEBHOOK_ENCRYPTION_KEY to read them.');
    }
    try {
      return this.box.decrypt(communityId, 'stripe', name, ciphertext);
    } catch {
      throw new ApiError('payment_config_inactive', 'This community\'s Stripe keys were encrypted with another WEBHOOK_ENCRYPTION_KEY than this deployment\'s: set them again.');
    }
  }

  /** The community's own client, else the deployment's; null when neither exists. */
  async client(ctx: CommunityReader): Promise<StripeClient | null> {
    const ciphertext = await paymentSecretCiphertext(ctx, 'stripe', 'secret_key');
    if (!ciphertext) return this.deployment;
    const hit = this.clients.get(ctx.communityId);
    if (hit?.ciphertext === ciphertext) return hit.client;
    const client = createStripeClient(this.config, this.decrypt(ctx.communityId, 'secret_key', ciphertext))!;
    if (this.clients.size >= CACHE_LIMIT) this.clients.clear();
    this.clients.set(ctx.communityId, { ciphertext, client });
    return client;
  }

  /** The secret that signs the community's inbound events: its own, else STRIPE_WEBHOOK_SECRET. */
  async webhookSecret(ctx: CommunityReader): Promise<string | null> {
    const ciphertext = await paymentSecretCiphertext(ctx, 'stripe', 'webhook_secret');
    if (!ciphertext) return this.config.stripeWebhookSecret;
    const hit = this.webhookSecrets.get(ctx.communityId);
    if (hit?.ciphertext === ciphertext) return hit.secret;
    const secret = this.decrypt(ctx.communityId, 'webhook_secret', ciphertext);
    if (this.webhookSecrets.size >= CACHE_LIMIT) this.webhookSecrets.clear();
    this.webhookSecrets.set(ctx.communityId, { ciphertext, secret });
    return secret;
  }
}
