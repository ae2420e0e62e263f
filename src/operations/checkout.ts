// create_checkout_link: records an open checkout in SQL (every rule of the spec's
// request table and eligibility list, billing_api.checkout_create), then asks the
// community's payment provider for the page the buyer opens. Creating a checkout may
// create the member and its external-subject or platform-identity mapping; it grants
// nothing.
import { z } from 'zod';
import { ApiError } from '../http/problems';
import type { CheckoutInfo, PaymentServices, ProviderName } from '../payments/provider';
import { defineOperation, OpContext, Operation, timestamp } from './registry';

const id = z.string().min(1).max(100);

/** https only: the buyer's browser is sent there after payment. */
export const httpsUrl = z.string().max(2000).refine((value) => {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}, { message: 'must be an absolute https:// URL' });

/** Exactly one buyer form (documented in docs/decisions.md). */
export const checkoutSubject = z.union([
  z.strictObject({ member_id: id.describe('An existing member of the community') }),
  z.strictObject({
    external: z.strictObject({
      namespace: z.string().min(1).max(200),
      external_user_id: z.string().min(1).max(200),
    }).describe("The operator's own user: created and mapped on first use"),
  }),
  z.strictObject({
    platform: z.enum(['discord', 'telegram']).describe('A connected first-party platform'),
    platform_uid: z.string().min(1).max(200),
    username: z.string().min(1).max(200).optional(),
  }),
], { error: 'subject must be exactly one of {member_id}, {external: {namespace, external_user_id}} or {platform, platform_uid, username?}' });

export const checkoutLink = z.object({
  checkout_id: z.string(),
  member_id: z.string(),
  url: z.string(),
  expires_at: timestamp.nullable(),
});

export function paymentServices(ctx: OpContext): PaymentServices {
  return ctx.services.payments as PaymentServices;
}

async function communityProvider(ctx: OpContext): Promise<ProviderName | null> {
  const { rows } = await ctx.query<{ payment_provider: ProviderName | null }>(
    'select payment_provider from billing.communities where id = $1', [ctx.communityId]);
  return rows[0]?.payment_provider ?? null;
}

export const checkoutOperations: Operation[] = [
  defineOperation({
    name: 'create_checkout_link',
    method: 'POST',
    path: '/v1/checkout-links',
    scope: 'checkout:write',
    tag: 'Checkout',
    summary: 'Create a checkout link for a buyer',
    description: 'The url opens the payment provider\'s checkout page; it is open for 24 hours (expires_at). '
      + 'Paying creates the subscription or purchase; the entitlement follows through the ledger.',
    body: z.object({
      tier_id: id.describe('Tier to buy; it must exist and be active'),
      subject: checkoutSubject,
      plan_id: id.optional().describe('Required when the tier has more than one active plan'),
      client_reference_id: z.string().min(1).max(200).optional().describe('Copied into entitlement source metadata'),
      return_url: httpsUrl.optional().describe('HTTPS page the buyer lands on, with checkout_id appended; external subjects only'),
      discount_code: z.string().min(1).max(100).optional().describe('Case-insensitive discount code'),
    }),
    response: checkoutLink,
    idempotent: true,
    handler: async (ctx, input) => {
      const name = await communityProvider(ctx);
      const provider = name ? paymentServices(ctx).provider(name) : null;
      const checkout = await ctx.call<CheckoutInfo>('checkout_create', { ...input, provider_ready: provider?.ready() ?? false });
      if (!provider) throw new ApiError('payment_config_inactive', 'This community has no active payment provider.');
      const link = await provider.createCheckout({ baseUrl: ctx.baseUrl, communityId: ctx.communityId, query: ctx.query }, checkout);
      const stored = await ctx.call<CheckoutInfo>('checkout_set_provider', { checkout_id: checkout.checkout_id, ...link });
      return { checkout_id: stored.checkout_id, member_id: stored.member_id, url: stored.url, expires_at: stored.expires_at };
    },
  }),
];
