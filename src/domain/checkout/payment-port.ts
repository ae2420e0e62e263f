// The payment port (implemented in src/providers/): what checkout, lifecycle and portal operations ask of
// a community's provider (communities.payment_provider). The sandbox answers from this
// service itself; Stripe through the real SDK. Handlers call these inside the request's
// transaction after the SQL change, so a provider failure rolls the change back.
import type pg from 'pg';
import type { CHECKOUT_STATUSES, PaymentProviderName } from '../../core/statuses';

export type ProviderName = PaymentProviderName;

/** billing.checkout_json: everything needed to present or pay a checkout. */
export interface CheckoutInfo {
  checkout_id: string;
  member_id: string;
  status: (typeof CHECKOUT_STATUSES)[number];
  provider: ProviderName;
  /** No email yet, neither the link's customer_email nor the member's: the sandbox page asks. */
  needs_email?: boolean;
  /** The member's email, else the link's customer_email: prefills the provider's page. */
  customer_email?: string | null;
  /** The clear pay token: present only in checkout_create's answer (the database keeps its sha256). */
  access_token?: string;
  url: string | null;
  expires_at: string;
  expired: boolean;
  tier_id: string;
  tier_name: string;
  tier_kind: 'subscription' | 'one_time';
  plan_id: string;
  plan_name: string | null;
  interval: 'month' | 'year' | null;
  trial_days: number;
  access_days: number | null;
  stripe_price_id: string | null;
  amount_cents: number;
  discount_cents: number;
  currency: string;
  discount_code: string | null;
  discount: { id: string; value_type: string; percent_off: number | null; amount_off_cents: number | null; duration: string; duration_months: number | null } | null;
  client_reference_id: string | null;
  return_url: string | null;
  subscription_id: string | null;
  purchase_id: string | null;
  /** The buyer's billing details its tax follows: those given for the checkout, else the member's (docs/decisions/tax.md). */
  billing_details: BillingDetails;
  /** billing.invoice_tax of the price less its discount: what the sandbox page shows due and at renewal. */
  tax: TaxPreview;
  /** The community charges tax somewhere (an active rate): the sandbox page shows a Tax row. */
  taxes: boolean;
  /** Stripe Tax computes the tax of this community's Stripe checkouts (payment_provider.automatic_tax). */
  stripe_automatic_tax: boolean;
}

export interface BillingDetails {
  name: string | null;
  address_lines: string[];
  country: string | null;
  tax_id: string | null;
}

/** billing.invoice_tax's answer, as much of it as a checkout shows. */
export interface TaxPreview {
  tax_lines: { name: string; country: string | null; rate_ppm: number | null; inclusive: boolean; taxable_cents: number | null; amount_cents: number }[];
  tax_cents: number;
  tax_exclusive_cents: number;
  tax_country: string | null;
  reverse_charge: boolean;
}

/** billing.subscription_provider plus, for a switch, the target: the "provider" of a lifecycle result (lifecycle-operations.ts). */
export interface SubscriptionRef {
  provider: ProviderName;
  provider_ref: string | null;
  plan_id: string;
  stripe_price_id: string | null;
  current_period_end: string | null;
  kind?: 'immediate' | 'scheduled';
  new_plan_id?: string;
  new_stripe_price_id?: string | null;
  old_stripe_price_id?: string | null;
  /** pause: when it resumes by itself (null: on request). */
  resumes_at?: string | null;
  /** cancel: 'now' for an immediate cancel. */
  at?: 'now';
}

/** A refund to make through the provider (billing_api.invoice_refund_prepare). */
export interface RefundRequest {
  invoice_id: string;
  payment_ref: string | null;
  amount_cents: number;
  currency: string;
}

export interface PortalInfo {
  id: string;
  member_id: string;
  /** The clear portal token, from portal_session_create only (the database keeps its sha256). */
  access_token: string;
  expires_at: string;
  return_url: string | null;
  customer_ref: string | null;
}

/** The request's community and transaction (an OpContext is one). */
export interface ProviderContext {
  baseUrl: string;
  communityId: string;
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

export interface PaymentProvider {
  readonly name: ProviderName;
  /**
   * False when neither the community (its own Stripe keys) nor the deployment
   * (STRIPE_SECRET_KEY) provides what the provider needs.
   */
  ready(ctx: ProviderContext): Promise<boolean>;
  /** stored_url: what the database keeps when url itself carries the clear token. */
  createCheckout(ctx: ProviderContext, checkout: CheckoutInfo): Promise<{ url: string; stored_url?: string; provider_ref?: string; expires_at?: string }>;
  createPortal(ctx: ProviderContext, portal: PortalInfo): Promise<{ url: string; stored_url?: string }>;
  cancelAtPeriodEnd(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  reactivate(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  switchPlan(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  cancelScheduledSwitch(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  /** Ends the subscription now (an operator's immediate cancel). */
  cancelNow(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  /** Stops collecting (Stripe pause_collection) until resumes_at or resume. */
  pause(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  resume(ctx: ProviderContext, sub: SubscriptionRef): Promise<void>;
  /** Gives money back; returns the provider's refund id (null: nothing to call). */
  refund(ctx: ProviderContext, req: RefundRequest): Promise<string | null>;
}

export interface PaymentServices {
  provider(name: ProviderName): PaymentProvider;
}

/**
 * Where the buyer lands after paying: the checkout's return_url, else the service's
 * sandbox return page, with checkout_id appended. Every provider sends buyers here.
 */
export function returnTarget(info: { return_url: string | null; checkout_id: string }, baseUrl: string): string {
  const target = new URL(info.return_url ?? `${baseUrl}/sandbox/return`);
  target.searchParams.set('checkout_id', info.checkout_id);
  return target.toString();
}

/**
 * Where a buyer who abandons the provider's checkout lands: the service's cancelled
 * page (never the return_url, which operators use as a thank-you page), with
 * checkout_id and the checkout's pay token appended: the page shows the way back to the
 * return_url (with cancelled=1) only to whoever holds the token.
 */
export function cancelTarget(info: { checkout_id: string }, baseUrl: string, accessToken: string): string {
  const target = new URL(`${baseUrl}/sandbox/cancelled`);
  target.searchParams.set('checkout_id', info.checkout_id);
  target.searchParams.set('t', accessToken);
  return target.toString();
}
