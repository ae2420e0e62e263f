// The Stripe provider: the real SDK for Checkout Sessions (subscription and payment
// mode), Billing Portal sessions and subscription updates (cancel at period end,
// reactivate, switch with proration, period-end downgrades through a subscription
// schedule), and the inbound webhook route POST /webhooks/stripe/{communityId}.
//
// Keys: the community's own (stripe-accounts.ts), else STRIPE_SECRET_KEY and
// STRIPE_WEBHOOK_SECRET; without any a stripe community answers 409
// payment_config_inactive. STRIPE_API_HOST/PORT/PROTOCOL point the SDK at a
// Stripe-compatible server (tests).
import express, { Request, Response } from 'express';
import type pg from 'pg';
import type Stripe from 'stripe';
import type { Config } from '../../core/config';
import { ApiError } from '../../core/errors';
import { stripeCalls } from '../../core/metrics';
import { inCommunity } from '../../db/community-transaction';
import { completeCheckout } from '../../domain/checkout/checkout-completion';
import { cancelTarget, returnTarget } from '../../domain/checkout/payment-port';
import type { CheckoutInfo, PaymentProvider, PortalInfo, ProviderContext, RefundRequest, SubscriptionRef } from '../../domain/checkout/payment-port';
import { StripeAccounts, StripeClient, stripeSdk } from './stripe-accounts';

/** What the inbound webhook route needs: the keys, and an owner pool to apply events with. */
export interface StripeWebhookDeps {
  config: Config;
  ownerPool: pg.Pool;
}

/** Stripe refusing a request is a conflict with the provider's state; Stripe unreachable is 503. */
export function stripeFailure(err: unknown): never {
  if (err instanceof ApiError) throw err;
  const e = err as { type?: string; message?: string; statusCode?: number };
  if (e?.type === 'StripeConnectionError') stripeCalls.inc({ outcome: 'network_error' });
  if (e?.type === 'StripeConnectionError' || e?.type === 'StripeAPIError' || e?.type === 'StripeRateLimitError' || (e?.statusCode ?? 0) >= 500) {
    throw new ApiError('service_unavailable', 'Stripe could not be reached; nothing was changed. Retry later.');
  }
  if (e?.type === 'StripeAuthenticationError' || e?.type === 'StripePermissionError') {
    // Stripe's message would quote (a masked) key: say what to fix instead.
    throw new ApiError('payment_config_inactive', 'Stripe refused this community\'s secret key (revoked, or without the needed permissions); nothing was changed.');
  }
  if (typeof e?.type === 'string' && e.type.startsWith('Stripe')) {
    throw new ApiError('conflict', `Stripe refused the change: ${e.message ?? e.type}`);
  }
  throw err;
}

const iso = (unix: number | null | undefined) => (typeof unix === 'number' ? new Date(unix * 1000).toISOString() : null);
const unix = (isoTime: string) => Math.floor(new Date(isoTime).getTime() / 1000);

const scheduleOf = (sub: Stripe.Subscription): string | null =>
  typeof sub.schedule === 'string' ? sub.schedule : sub.schedule?.id ?? null;

export class StripeProvider implements PaymentProvider {
  readonly name = 'stripe' as const;
  private readonly accounts: StripeAccounts;

  constructor(config: Config) {
    this.accounts = new StripeAccounts(config);
  }

  async ready(ctx: ProviderContext): Promise<boolean> {
    return (await this.accounts.client(ctx)) !== null;
  }

  /** The community's Stripe account (its own key, else the deployment's). */
  private async stripe(ctx: ProviderContext): Promise<StripeClient> {
    const client = await this.accounts.client(ctx);
    if (!client) throw new ApiError('payment_config_inactive', 'Stripe is not configured for this community (no secret key of its own, no STRIPE_SECRET_KEY).');
    return client;
  }

  /** The member's Stripe customer from an earlier checkout, if any. */
  private async customerOf(ctx: ProviderContext, memberId: string): Promise<string | null> {
    const { rows } = await ctx.query<{ customer_ref: string }>(
      `select customer_ref from billing.member_provider_customers where community_id = $1 and member_id = $2 and provider = 'stripe'`,
      [ctx.communityId, memberId]);
    return rows[0]?.customer_ref ?? null;
  }

  async createCheckout(ctx: ProviderContext, checkout: CheckoutInfo) {
    try {
      return await this.createCheckoutNow(ctx, checkout);
    } catch (err) {
      return stripeFailure(err);
    }
  }

  private async createCheckoutNow(ctx: ProviderContext, checkout: CheckoutInfo) {
    const stripe = await this.stripe(ctx);
    const recurring = checkout.interval !== null;
    const lineItem = checkout.stripe_price_id
      ? { price: checkout.stripe_price_id, quantity: 1 }
      : {
          quantity: 1,
          price_data: {
            currency: checkout.currency,
            unit_amount: checkout.amount_cents,
            product_data: { name: checkout.plan_name ? `${checkout.tier_name} (${checkout.plan_name})` : checkout.tier_name },
            ...(recurring ? { recurring: { interval: checkout.interval as 'month' | 'year' } } : {}),
          },
        };
    let discounts: { coupon: string }[] | undefined;
    if (checkout.discount) {
      const d = checkout.discount;
      const coupon = await stripe.coupons.create({
        ...(d.value_type === 'percent' ? { percent_off: Number(d.percent_off) } : { amount_off: d.amount_off_cents ?? 0, currency: checkout.currency }),
        duration: d.duration as 'once' | 'repeating' | 'forever',
        ...(d.duration === 'repeating' && d.duration_months ? { duration_in_months: d.duration_months } : {}),
        max_redemptions: 1,
        metadata: { discount_id: d.id, checkout_id: checkout.checkout_id },
      }, { idempotencyKey: `coupon-${checkout.checkout_id}` });
      discounts = [{ coupon: coupon.id }];
    }
    const metadata = { checkout_id: checkout.checkout_id, community_id: ctx.communityId, member_id: checkout.member_id };
    // One customer per member: reuse the one an earlier checkout made. Without one,
    // subscription mode always makes a customer; payment mode must be asked to
    // (customer_creation, which Stripe accepts only without customer).
    const customer = await this.customerOf(ctx, checkout.member_id);
    const session = await stripe.checkout.sessions.create({
      mode: recurring ? 'subscription' : 'payment',
      line_items: [lineItem],
      client_reference_id: checkout.checkout_id,
      metadata,
      success_url: returnTarget(checkout, ctx.baseUrl),
      cancel_url: cancelTarget(checkout, ctx.baseUrl, checkout.access_token ?? ''),
      ...(customer ? { customer } : recurring ? {} : { customer_creation: 'always' as const }),
      // The address we know (the member's, else the link's) prefills Stripe's page; Stripe
      // takes customer_email only for a new customer.
      ...(!customer && checkout.customer_email ? { customer_email: checkout.customer_email } : {}),
      ...(discounts ? { discounts } : {}),
      // Stripe Tax computes the tax (the community's payment_provider.automatic_tax): it
      // needs the buyer's address, and takes a business's tax id; an existing customer's
      // address and name are updated from the page. docs/decisions/tax.md.
      ...(checkout.stripe_automatic_tax ? {
        automatic_tax: { enabled: true },
        billing_address_collection: 'required' as const,
        tax_id_collection: { enabled: true },
        ...(customer ? { customer_update: { address: 'auto' as const, name: 'auto' as const } } : {}),
      } : {}),
      ...(recurring
        ? { subscription_data: { metadata, ...(checkout.trial_days > 0 ? { trial_period_days: checkout.trial_days } : {}) } }
        : { payment_intent_data: { metadata } }),
    }, { idempotencyKey: `checkout-${checkout.checkout_id}` });
    if (!session.url) throw new Error('Stripe returned a checkout session without a url');
    return { url: session.url, provider_ref: session.id, expires_at: iso(session.expires_at) ?? undefined };
  }

  async createPortal(ctx: ProviderContext, portal: PortalInfo) {
    try {
      return await this.createPortalNow(ctx, portal);
    } catch (err) {
      return stripeFailure(err);
    }
  }

  private async createPortalNow(ctx: ProviderContext, portal: PortalInfo) {
    if (!portal.customer_ref) throw new ApiError('conflict', 'This member has no Stripe customer yet: the portal opens after a first Stripe checkout.');
    const session = await (await this.stripe(ctx)).billingPortal.sessions.create({
      customer: portal.customer_ref,
      ...(portal.return_url ? { return_url: portal.return_url } : {}),
    });
    return { url: session.url };
  }

  private ref(sub: SubscriptionRef): string {
    if (!sub.provider_ref) throw new ApiError('conflict', 'This subscription has no Stripe subscription yet.');
    return sub.provider_ref;
  }

  async cancelAtPeriodEnd(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      return await this.cancelAtPeriodEndNow(ctx, sub);
    } catch (err) {
      return stripeFailure(err);
    }
  }

  private async cancelAtPeriodEndNow(ctx: ProviderContext, sub: SubscriptionRef) {
    const stripe = await this.stripe(ctx);
    const ref = this.ref(sub);
    // Stripe refuses cancel_at_period_end on a subscription that a schedule manages (a
    // pending period-end downgrade): release the schedule first. Releasing keeps the
    // current price; the cancel drops the local scheduled switch in the same request.
    const scheduleId = scheduleOf(await stripe.subscriptions.retrieve(ref));
    if (scheduleId) await stripe.subscriptionSchedules.release(scheduleId);
    await stripe.subscriptions.update(ref, { cancel_at_period_end: true });
  }

  async reactivate(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      return await this.reactivateNow(ctx, sub);
    } catch (err) {
      return stripeFailure(err);
    }
  }

  private async reactivateNow(ctx: ProviderContext, sub: SubscriptionRef) {
    await (await this.stripe(ctx)).subscriptions.update(this.ref(sub), { cancel_at_period_end: false });
  }

  async switchPlan(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      return await this.switchPlanNow(ctx, sub);
    } catch (err) {
      return stripeFailure(err);
    }
  }

  private async switchPlanNow(ctx: ProviderContext, sub: SubscriptionRef) {
    const stripe = await this.stripe(ctx);
    const ref = this.ref(sub);
    if (!sub.new_stripe_price_id) throw new ApiError('conflict', `Plan ${sub.new_plan_id} has no Stripe price (stripe_price_id) to switch to.`);
    const current = await stripe.subscriptions.retrieve(ref);
    const item = current.items.data[0];
    if (sub.kind === 'immediate') {
      // Paid before it grants: Stripe invoices the proration now and applies the new
      // price only once that invoice is paid; otherwise the update stays pending.
      const updated = await stripe.subscriptions.update(ref, {
        items: [{ id: item.id, price: sub.new_stripe_price_id }],
        proration_behavior: 'always_invoice',
        payment_behavior: 'pending_if_incomplete',
      });
      if (updated.pending_update) {
        throw new ApiError('payment_failed', 'Stripe could not collect the payment for this plan change; the subscription is unchanged.');
      }
      return;
    }
    // Downgrade: a schedule keeps the current price to the period end, then the new one.
    const scheduleId = scheduleOf(current) ?? (await stripe.subscriptionSchedules.create({ from_subscription: ref })).id;
    const schedule = await stripe.subscriptionSchedules.retrieve(scheduleId);
    const start = schedule.phases[0]?.start_date ?? Math.floor(Date.now() / 1000);
    const end = sub.current_period_end ? unix(sub.current_period_end) : undefined;
    await stripe.subscriptionSchedules.update(scheduleId, {
      end_behavior: 'release',
      phases: [
        { items: [{ price: item.price.id, quantity: 1 }], start_date: start, ...(end ? { end_date: end } : {}) },
        { items: [{ price: sub.new_stripe_price_id, quantity: 1 }] },
      ],
    });
  }

  async cancelScheduledSwitch(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      return await this.cancelScheduledSwitchNow(ctx, sub);
    } catch (err) {
      return stripeFailure(err);
    }
  }

  private async cancelScheduledSwitchNow(ctx: ProviderContext, sub: SubscriptionRef) {
    const stripe = await this.stripe(ctx);
    const scheduleId = scheduleOf(await stripe.subscriptions.retrieve(this.ref(sub)));
    if (scheduleId) await stripe.subscriptionSchedules.release(scheduleId);
  }

  // Refunds, pause and immediate cancel (issue 12): each one Stripe call, failures mapped
  // by stripeFailure so the request's transaction rolls back.
  async cancelNow(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      await (await this.stripe(ctx)).subscriptions.cancel(this.ref(sub));
    } catch (err) {
      stripeFailure(err);
    }
  }

  async pause(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      await (await this.stripe(ctx)).subscriptions.update(this.ref(sub), {
        pause_collection: { behavior: 'void', ...(sub.resumes_at ? { resumes_at: unix(sub.resumes_at) } : {}) },
      });
    } catch (err) {
      stripeFailure(err);
    }
  }

  async resume(ctx: ProviderContext, sub: SubscriptionRef) {
    try {
      await (await this.stripe(ctx)).subscriptions.update(this.ref(sub), { pause_collection: '' });
    } catch (err) {
      stripeFailure(err);
    }
  }

  async refund(ctx: ProviderContext, req: RefundRequest): Promise<string | null> {
    if (!req.payment_ref) throw new ApiError('conflict', `Invoice ${req.invoice_id} has no Stripe payment to refund.`);
    try {
      const refund = await (await this.stripe(ctx)).refunds.create({
        ...(req.payment_ref.startsWith('ch_') ? { charge: req.payment_ref } : { payment_intent: req.payment_ref }),
        amount: req.amount_cents,
        metadata: { invoice_id: req.invoice_id },
      }, { idempotencyKey: `refund-${req.invoice_id}-${req.amount_cents}-${Date.now() - (Date.now() % 60000)}` });
      return refund.id;
    } catch (err) {
      return stripeFailure(err);
    }
  }
}

// ---- inbound webhooks -----------------------------------------------------------------

/** Stripe's subscription object in our terms (billing.apply_provider_subscription). */
export function subscriptionState(sub: Stripe.Subscription, eventCreated: number): Record<string, unknown> {
  const item = sub.items?.data?.[0] as (Stripe.SubscriptionItem & { current_period_start?: number; current_period_end?: number }) | undefined;
  const legacy = sub as unknown as { current_period_start?: number; current_period_end?: number };
  const cancelling = sub.cancel_at_period_end || (sub.cancel_at !== null && sub.cancel_at !== undefined);
  // Paused collection is paused access here (the service's own rule).
  const pausedUntil = sub.pause_collection ? iso(sub.pause_collection.resumes_at) : undefined;
  const status = sub.pause_collection && ['active', 'trialing', 'past_due'].includes(sub.status) ? 'paused' : (() => {
    switch (sub.status) {
      case 'active': return cancelling ? 'cancelling' : 'active';
      case 'trialing': return cancelling ? 'cancelling' : 'trialing';
      // unpaid: Stripe stopped retrying; past_due with no retry left never entitles.
      case 'past_due': case 'unpaid': return 'past_due';
      case 'canceled': case 'incomplete_expired': return 'cancelled';
      case 'paused': return 'paused';
      default: return null; // incomplete: no state of ours yet
    }
  })();
  const periodEnd = item?.current_period_end ?? legacy.current_period_end;
  const state: Record<string, unknown> = {
    provider_ref: sub.id,
    status,
    stripe_price_id: item?.price?.id ?? null,
    period_start: iso(item?.current_period_start ?? legacy.current_period_start),
    period_end: iso(periodEnd),
    trial_end: iso(sub.trial_end),
    cancel_at: cancelling ? iso(sub.cancel_at ?? periodEnd) : null,
    customer_ref: typeof sub.customer === 'string' ? sub.customer : sub.customer?.id ?? null,
    ended_at: iso(sub.ended_at),
    provider_updated_at: iso(eventCreated),
    paused_until: pausedUntil ?? null,
    retries_exhausted: sub.status === 'unpaid',
  };
  if (status === null) delete state.status;
  return state;
}

/** Stripe's postal address as printed lines (its country apart). */
function addressLines(a: Stripe.Address | null | undefined): string[] {
  if (!a) return [];
  const cityLine = [a.postal_code, a.city, a.state].filter(Boolean).join(' ');
  return [a.line1, a.line2, cityLine].filter((l): l is string => typeof l === 'string' && l.trim() !== '');
}

/** The buyer's billing details from a Checkout Session's customer_details (billing.complete_checkout's customer_*). */
export function customerDetails(d: Stripe.Checkout.Session.CustomerDetails | null | undefined): Record<string, unknown> {
  if (!d) return {};
  const taxId = (d.tax_ids ?? []).find((t) => t.value)?.value ?? null;
  const out: Record<string, unknown> = {};
  if (d.business_name || d.name) out.customer_name = d.business_name || d.name;
  const lines = addressLines(d.address);
  if (lines.length > 0) out.customer_address_lines = lines;
  if (d.address?.country) out.customer_country = d.address.country.toUpperCase();
  if (taxId) out.customer_tax_id = taxId;
  return out;
}

/**
 * The tax Stripe charged on a Checkout Session (a one-time purchase's invoice): one line
 * of total_details.amount_tax, inclusive when the total did not add it. Stripe's
 * reverse charge (customer_details.tax_exempt: reverse) charges none.
 */
export function sessionTax(session: Stripe.Checkout.Session): Record<string, unknown> {
  const tax = session.total_details?.amount_tax ?? 0;
  const country = session.customer_details?.address?.country?.toUpperCase() ?? null;
  const reverse = session.customer_details?.tax_exempt === 'reverse';
  if (tax <= 0) return { tax_lines: [], reverse_charge: reverse };
  const subtotal = session.amount_subtotal ?? 0;
  const discount = session.total_details?.amount_discount ?? 0;
  const inclusive = (session.amount_total ?? 0) === subtotal - discount;
  return {
    tax_lines: [{ name: 'Tax', country, rate_ppm: null, inclusive, taxable_cents: inclusive ? subtotal - discount - tax : subtotal - discount, amount_cents: tax }],
    reverse_charge: false,
  };
}

/**
 * The tax of a Stripe invoice (total_taxes: Stripe Tax's, or its tax rates'): one line
 * each, its rate in parts per million from what it was computed on; the buyer's country
 * and tax id as Stripe saw them. A reverse-charged invoice (taxability_reason
 * reverse_charge) charges none.
 */
export function invoiceTax(inv: Stripe.Invoice): Record<string, unknown> {
  const raw = inv as unknown as { total_taxes?: Stripe.Invoice.TotalTax[] | null; total_tax_amounts?: { amount: number; inclusive: boolean; taxable_amount: number | null }[] | null };
  const country = inv.customer_address?.country?.toUpperCase() ?? null;
  const taxes = (raw.total_taxes ?? raw.total_tax_amounts?.map((t) => ({ amount: t.amount, tax_behavior: t.inclusive ? 'inclusive' : 'exclusive',
    taxable_amount: t.taxable_amount, taxability_reason: 'standard_rated' })) ?? []) as { amount: number; tax_behavior: string; taxable_amount: number | null; taxability_reason: string }[];
  const reverse = taxes.some((t) => t.taxability_reason === 'reverse_charge');
  const lines = taxes.filter((t) => t.amount > 0).map((t) => ({
    name: 'Tax', country, inclusive: t.tax_behavior === 'inclusive', taxable_cents: t.taxable_amount ?? null, amount_cents: t.amount,
    rate_ppm: t.taxable_amount ? Math.min(1_000_000, Math.round((t.amount * 1_000_000) / t.taxable_amount)) : null,
  }));
  const taxId = (inv.customer_tax_ids ?? []).find((t) => t.value)?.value ?? null;
  return { tax_lines: lines, reverse_charge: reverse && lines.length === 0, buyer_country: country, buyer_tax_id: taxId };
}

/** Stripe's invoice object in our terms (billing.apply_provider_invoice). */
export function invoiceState(inv: Stripe.Invoice, event: Stripe.Event): Record<string, unknown> {
  const raw = inv as unknown as {
    subscription?: string | { id: string } | null;
    parent?: { subscription_details?: { subscription?: string | { id: string } | null } | null } | null;
    payment_intent?: string | { id: string } | null;
  };
  const subRef = raw.parent?.subscription_details?.subscription ?? raw.subscription ?? null;
  const reasons = ['subscription_create', 'subscription_cycle', 'subscription_update'];
  const lines = (inv.lines?.data ?? []).map((l) => {
    const line = l as unknown as { amount: number; description: string | null; period?: { start: number; end: number };
      proration?: boolean; parent?: { subscription_item_details?: { proration?: boolean } | null } | null };
    const proration = line.proration ?? line.parent?.subscription_item_details?.proration ?? false;
    return {
      type: proration || line.amount < 0 ? 'proration' : 'plan',
      description: line.description || (proration ? 'Proration' : 'Subscription'),
      amount_cents: line.amount,
      period_start: iso(line.period?.start),
      period_end: iso(line.period?.end),
    };
  });
  return {
    provider_ref: inv.id,
    subscription_ref: typeof subRef === 'string' ? subRef : subRef?.id ?? null,
    status: inv.status,
    billing_reason: reasons.includes(String(inv.billing_reason)) ? inv.billing_reason : 'subscription_update',
    currency: inv.currency,
    lines,
    total_cents: inv.total,
    attempt_count: inv.attempt_count,
    next_attempt_at: iso(inv.next_payment_attempt),
    paid_at: iso(inv.status_transitions?.paid_at),
    created_at: iso(inv.created),
    period_start: iso(inv.period_start),
    period_end: iso(inv.period_end),
    provider_updated_at: iso(event.created),
    failed: event.type === 'invoice.payment_failed',
    payment_ref: typeof raw.payment_intent === 'string' ? raw.payment_intent : raw.payment_intent?.id ?? null,
    tax: invoiceTax(inv),
  };
}

type Outcome = { status: number; body: Record<string, unknown> };

/** A Stripe refund of the invoice a payment paid (once per refund id). */
async function recordRefund(client: pg.PoolClient, paymentRef: string, amount: number, refundId: string): Promise<void> {
  const { rows } = await client.query<{ id: string | null }>('select billing.invoice_by_payment($1) as id', [paymentRef]);
  if (!rows[0].id) return;
  const { rows: left } = await client.query<{ left: string }>(
    'select amount_paid_cents - amount_refunded_cents as left from billing.invoices where id = $1', [rows[0].id]);
  const known = await client.query('select 1 from billing.refunds where provider_ref = $1', [refundId]);
  if (known.rowCount === 0 && Number(left[0].left) <= 0) return;
  await client.query('select billing.invoice_record_refund($1, $2, false, $3)', [rows[0].id, Math.min(amount, Math.max(Number(left[0].left), 1)), refundId]);
}

async function applyEvent(deps: StripeWebhookDeps, communityId: string, event: Stripe.Event): Promise<Outcome> {
  return inCommunity(deps.ownerPool, communityId, async (client) => {
    const { rows } = await client.query<{ fresh: boolean }>('select billing.record_provider_event($1, $2, $3) as fresh', ['stripe', event.id, event.type]);
    if (!rows[0].fresh) return { status: 200, body: { received: true, duplicate: true } };
    const object = event.data.object as unknown as Record<string, unknown>;
    if (event.type === 'checkout.session.completed' || event.type === 'checkout.session.async_payment_succeeded') {
      const session = object as unknown as Stripe.Checkout.Session;
      const checkoutId = session.metadata?.checkout_id ?? session.client_reference_id;
      if (!checkoutId) return { status: 200, body: { received: true, ignored: 'no checkout_id' } };
      if (session.payment_status === 'unpaid' && session.mode === 'payment') return { status: 200, body: { received: true, ignored: 'unpaid' } };
      const subRef = typeof session.subscription === 'string' ? session.subscription : session.subscription?.id ?? null;
      const paymentRef = typeof session.payment_intent === 'string' ? session.payment_intent : session.payment_intent?.id ?? null;
      const customerRef = typeof session.customer === 'string' ? session.customer : session.customer?.id ?? null;
      const owned = await client.query('select 1 from billing.checkout_sessions where community_id = $1 and id = $2', [communityId, checkoutId]);
      if (owned.rowCount === 0) return { status: 200, body: { received: true, ignored: 'unknown checkout' } };
      // The email the buyer typed on Stripe's page: set on the member when it has none
      // (billing.complete_checkout; docs/decisions/member-email.md); their billing
      // details (name, address, country, tax id) become the member's, and a one-time
      // purchase's invoice records the tax Stripe charged (docs/decisions/tax.md).
      const customerEmail = session.customer_details?.email ?? null;
      await completeCheckout(client, checkoutId, { paid: true, provider_ref: subRef ?? paymentRef, customer_ref: customerRef,
        customer_email: customerEmail, ...customerDetails(session.customer_details), tax: sessionTax(session) });
      return { status: 200, body: { received: true } };
    }
    if (event.type === 'checkout.session.expired') {
      const session = object as unknown as Stripe.Checkout.Session;
      const checkoutId = session.metadata?.checkout_id ?? session.client_reference_id;
      if (checkoutId) await client.query('select billing.expire_checkout($1)', [checkoutId]);
      return { status: 200, body: { received: true } };
    }
    if (event.type === 'charge.refunded') {
      const charge = object as unknown as Stripe.Charge;
      const paymentRef = typeof charge.payment_intent === 'string' ? charge.payment_intent : charge.payment_intent?.id ?? null;
      // Each refund once (by its Stripe id), whether made here or in Stripe's dashboard.
      const refunds = (charge.refunds?.data ?? []).filter((r) => r.status === 'succeeded' || r.status === 'pending');
      for (const r of refunds) await recordRefund(client, paymentRef ?? charge.id, r.amount, r.id);
      if (paymentRef && charge.refunded) await client.query('select billing.refund_purchase($1)', [paymentRef]);
      return { status: 200, body: { received: true } };
    }
    if (event.type === 'refund.created' || event.type === 'refund.updated') {
      const refund = object as unknown as Stripe.Refund;
      const paymentRef = typeof refund.payment_intent === 'string' ? refund.payment_intent : refund.payment_intent?.id
        ?? (typeof refund.charge === 'string' ? refund.charge : refund.charge?.id ?? null);
      if (paymentRef && (refund.status === 'succeeded' || refund.status === 'pending')) await recordRefund(client, paymentRef, refund.amount, refund.id);
      return { status: 200, body: { received: true } };
    }
    if (event.type.startsWith('charge.dispute.')) {
      const dispute = object as unknown as Stripe.Dispute;
      const paymentRef = typeof dispute.payment_intent === 'string' ? dispute.payment_intent : dispute.payment_intent?.id
        ?? (typeof dispute.charge === 'string' ? dispute.charge : dispute.charge?.id ?? null);
      const found = paymentRef ? await client.query<{ id: string | null }>('select billing.invoice_by_payment($1) as id', [paymentRef]) : null;
      const invoiceId = found?.rows[0].id;
      if (!invoiceId) return { status: 200, body: { received: true, ignored: 'unknown payment' } };
      // Stripe's inquiries (warning_*) map onto the same states; an inquiry closed without
      // a chargeback leaves the money with the community: won.
      const status = ({ won: 'won', lost: 'lost', under_review: 'under_review', warning_under_review: 'under_review', warning_closed: 'won' } as Record<string, string>)[dispute.status]
        ?? 'needs_response';
      await client.query('select billing.invoice_record_dispute($1, $2, $3, $4, $5)', [invoiceId, dispute.amount, status, dispute.reason, dispute.id]);
      return { status: 200, body: { received: true } };
    }
    if (['invoice.finalized', 'invoice.paid', 'invoice.payment_failed', 'invoice.voided', 'invoice.marked_uncollectible'].includes(event.type)) {
      const state = invoiceState(object as unknown as Stripe.Invoice, event);
      if (!state.subscription_ref) return { status: 200, body: { received: true, ignored: 'not a subscription invoice' } };
      const applied = await client.query<{ id: string | null }>('select billing.apply_provider_invoice($1) as id', [state]);
      if (applied.rows[0].id) return { status: 200, body: { received: true } };
      // An invoice may arrive before checkout.session.completed: complete the checkout
      // its subscription was made for, then mirror the invoice.
      const meta = (object as { parent?: { subscription_details?: { metadata?: Record<string, string> | null } | null } | null })
        .parent?.subscription_details?.metadata ?? (object as { subscription_details?: { metadata?: Record<string, string> } }).subscription_details?.metadata;
      const checkoutId = meta?.checkout_id;
      if (!checkoutId) return { status: 200, body: { received: true, ignored: 'unknown subscription' } };
      const owned = await client.query('select 1 from billing.checkout_sessions where community_id = $1 and id = $2', [communityId, checkoutId]);
      if (owned.rowCount === 0) return { status: 200, body: { received: true, ignored: 'unknown checkout' } };
      await completeCheckout(client, checkoutId, { paid: true, provider_ref: state.subscription_ref });
      await client.query('select billing.apply_provider_invoice($1)', [state]);
      return { status: 200, body: { received: true } };
    }
    if (event.type.startsWith('customer.subscription.')) {
      const sub = object as unknown as Stripe.Subscription;
      const state = subscriptionState(sub, event.created);
      const applied = await client.query<{ id: string | null }>('select billing.apply_provider_subscription($1) as id', [state]);
      if (applied.rows[0].id) {
        return { status: 200, body: { received: true } };
      }
      // Subscription events may arrive before checkout.session.completed: create it now.
      const checkoutId = sub.metadata?.checkout_id;
      if (!checkoutId || state.status === undefined) return { status: 200, body: { received: true, ignored: 'unknown subscription' } };
      const owned = await client.query('select 1 from billing.checkout_sessions where community_id = $1 and id = $2', [communityId, checkoutId]);
      if (owned.rowCount === 0) return { status: 200, body: { received: true, ignored: 'unknown checkout' } };
      await completeCheckout(client, checkoutId, { ...state, paid: true });
      await client.query('select billing.apply_provider_subscription($1)', [state]);
      return { status: 200, body: { received: true } };
    }
    return { status: 200, body: { received: true, ignored: event.type } };
  });
}

/**
 * POST /webhooks/stripe/{communityId}: raw body, signature verified with the
 * community's own webhook secret (else STRIPE_WEBHOOK_SECRET), each event once.
 */
export function mountStripeWebhook(app: express.Express, deps: StripeWebhookDeps): void {
  let verifier: Stripe | null = null; // made with the first event: the SDK loads when used
  const accounts = new StripeAccounts(deps.config);
  app.post('/webhooks/stripe/:communityId', express.raw({ type: () => true, limit: '1mb' }), async (req: Request, res: Response) => {
    const communityId = String(req.params.communityId);
    const { rows } = await deps.ownerPool.query<{ payment_provider: string | null }>('select payment_provider from billing.communities where id = $1', [communityId]);
    if (!rows[0] || rows[0].payment_provider !== 'stripe') return void res.status(404).json({ error: 'No Stripe community with this id.' });
    let secret: string | null;
    try {
      secret = await inCommunity(deps.ownerPool, communityId, (client) => accounts.webhookSecret({ communityId, query: client.query.bind(client) }));
    } catch (err) {
      if (err instanceof ApiError) return void res.status(503).json({ error: err.message });
      throw err;
    }
    if (!secret) return void res.status(503).json({ error: 'Stripe webhooks are not configured for this community (no webhook secret of its own, no STRIPE_WEBHOOK_SECRET).' });
    let event: Stripe.Event;
    try {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.from('');
      verifier ??= new (stripeSdk())('sk_unused_only_verifies');
      event = verifier.webhooks.constructEvent(body, req.header('stripe-signature') ?? '', secret);
    } catch {
      return void res.status(400).json({ error: 'Invalid Stripe signature.' });
    }
    const outcome = await applyEvent(deps, communityId, event);
    res.status(outcome.status).json(outcome.body);
  });
}
