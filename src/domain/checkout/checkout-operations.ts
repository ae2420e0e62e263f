// create_checkout_link: records an open checkout in SQL (every rule of the spec's
// request table and eligibility list, billing_api.checkout_create), then asks the
// community's payment provider for the page the buyer opens. Creating a checkout may
// create the member and its external-subject or platform-identity mapping; it grants
// nothing.
import { z } from 'zod';
import { emailAddress } from '../members/member-schema';
import { ApiError } from '../../core/errors';
import { defineOperation, OpContext, Operation } from '../operation';
import { checkoutLink, checkoutSubject, httpsUrl } from './checkout-schema';
import type { CheckoutInfo, ProviderName } from './payment-port';

const id = z.string().min(1).max(100);

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
      customer_email: emailAddress.optional().describe('The buyer\'s email: set on the member when the checkout completes, if it has none (personal data: never in events)'),
      // The buyer's billing details (docs/decisions/tax.md): they decide the tax of the
      // checkout's invoice (the sandbox page shows it) and become the member's when paid.
      customer_name: z.string().trim().min(1).max(200).optional().describe('The buyer\'s name for invoices (personal data: never in events)'),
      customer_address_lines: z.array(z.string().trim().min(1).max(100)).max(6).optional()
        .describe('The buyer\'s postal address as printed lines, at most 6 (personal data: never in events)'),
      customer_country: z.string().regex(/^[A-Za-z]{2}$/).optional()
        .describe('The buyer\'s country, ISO 3166-1 alpha-2 (e.g. "DE"): it decides the tax of their invoices'),
      customer_tax_id: z.string().trim().min(1).max(50).optional()
        .describe('The buyer\'s tax id; a VAT id of an EU member state other than the community\'s makes the sale reverse charged'),
    }),
    response: checkoutLink,
    idempotent: true,
    handler: async (ctx, input) => {
      const name = await communityProvider(ctx);
      const provider = name ? ctx.services.payments.provider(name) : null;
      const checkout = await ctx.call<CheckoutInfo>('checkout_create', { ...input, provider_ready: provider ? await provider.ready(ctx) : false });
      if (!provider) throw new ApiError('payment_config_inactive', 'This community has no active payment provider.');
      const link = await provider.createCheckout(ctx, checkout);
      // The database keeps the url without the clear token (it keeps the token's sha256 only).
      const { stored_url: storedUrl, ...rest } = link;
      const stored = await ctx.call<CheckoutInfo>('checkout_set_provider', { checkout_id: checkout.checkout_id, ...rest, url: storedUrl ?? link.url });
      return { checkout_id: stored.checkout_id, member_id: stored.member_id, url: link.url, expires_at: stored.expires_at, trial_days: stored.trial_days };
    },
  }),
];
