// Paying a checkout from the provider side (the sandbox page, `billing sandbox`,
// Stripe's webhooks) and moving the sandbox clock. Each runs in an owner transaction
// with the community set (src/db/community-transaction.ts).
import type pg from 'pg';
import { ApiError } from '../../core/errors';
import { inCommunity, retryConflicts } from '../../db/community-transaction';

export interface CompletedCheckout {
  checkout_id: string;
  member_id: string;
  subscription_id: string | null;
  purchase_id: string | null;
  already_completed: boolean;
}

/** Pays a checkout (billing.complete_checkout); idempotent. */
export async function completeCheckout(client: pg.PoolClient, checkoutId: string, details: Record<string, unknown> = {}): Promise<CompletedCheckout> {
  const { rows } = await client.query<{ r: CompletedCheckout }>('select billing.complete_checkout($1, $2) as r', [checkoutId, details]);
  return rows[0].r;
}

/**
 * The sandbox page's discount field (billing.checkout_apply_discount): applies a code to
 * an open checkout, or removes it with an empty code. BLDSC (discount_invalid) says why not.
 */
export async function applyCheckoutDiscount(client: pg.PoolClient, checkoutId: string, code: string): Promise<void> {
  await client.query('select billing.checkout_apply_discount($1, $2)', [checkoutId, code]);
}

/**
 * The sandbox page's billing details form (billing.checkout_set_details): the buyer's
 * name, address lines, country and tax id for an open checkout, which decide its tax;
 * BL422 names the field that is refused.
 */
export async function setCheckoutDetails(client: pg.PoolClient, checkoutId: string, details: {
  customer_name: string; customer_address_lines: string[]; customer_country: string; customer_tax_id: string;
}): Promise<void> {
  await client.query('select billing.checkout_set_details($1, $2)', [checkoutId, details]);
}

/** Which community a checkout belongs to (owner pool: sees every community). */
export async function checkoutCommunity(pool: pg.Pool, checkoutId: string): Promise<string | null> {
  const { rows } = await pool.query<{ community_id: string }>('select community_id from billing.checkout_sessions where id = $1', [checkoutId]);
  return rows[0]?.community_id ?? null;
}

/** The CLI's `sandbox complete`: exactly what the buyer's click on the page does. */
export async function sandboxComplete(pool: pg.Pool, checkoutId: string): Promise<CompletedCheckout> {
  const communityId = await checkoutCommunity(pool, checkoutId);
  if (!communityId) throw new ApiError('not_found', `No checkout ${checkoutId}.`);
  return inCommunity(pool, communityId, async (client) => {
    const { rows } = await client.query<{ provider: string }>('select provider from billing.checkout_sessions where id = $1', [checkoutId]);
    if (rows[0]?.provider !== 'sandbox') throw new ApiError('conflict', `Checkout ${checkoutId} is not a sandbox checkout.`);
    return completeCheckout(client, checkoutId);
  });
}

/**
 * The CLI's `sandbox advance`: moves the community's clock and applies what is due, in
 * one transaction that locks every due subscription; requests running meanwhile lock
 * some of the same rows, so a deadlock rolls it back whole and it runs again.
 */
export async function sandboxAdvance(pool: pg.Pool, communityId: string, days: number): Promise<{ now: string }> {
  const { rows } = await retryConflicts(() => pool.query<{ r: { now: string } }>('select billing.sandbox_advance($1, $2) as r', [communityId, days]));
  return { now: rows[0].r.now };
}

/**
 * The CLI's `sandbox decline` / `sandbox accept`: whether a sandbox subscription's
 * future charges fail (billing.sandbox_set_card).
 */
export async function sandboxSetCard(pool: pg.Pool, subscriptionId: string, declines: boolean): Promise<{ subscription_id: string; declines: boolean }> {
  const { rows } = await pool.query<{ community_id: string }>('select community_id from billing.subscriptions where id = $1', [subscriptionId]);
  if (!rows[0]) throw new ApiError('not_found', `No subscription ${subscriptionId}.`);
  return inCommunity(pool, rows[0].community_id, async (client) => {
    const r = await client.query<{ r: { subscription_id: string; declines: boolean } }>('select billing.sandbox_set_card($1, $2) as r', [subscriptionId, declines]);
    return r.rows[0].r;
  });
}

/** The CLI's `sandbox dispute`: a dispute opened against a paid sandbox invoice (access ends at once). */
export async function sandboxDispute(pool: pg.Pool, invoiceId: string): Promise<{ invoice_id: string; dispute_id: string; status: string }> {
  const { rows } = await pool.query<{ community_id: string; provider: string }>('select community_id, provider from billing.invoices where id = $1', [invoiceId]);
  if (!rows[0]) throw new ApiError('not_found', `No invoice ${invoiceId}.`);
  if (rows[0].provider !== 'sandbox') throw new ApiError('conflict', `Invoice ${invoiceId} is not a sandbox invoice.`);
  return inCommunity(pool, rows[0].community_id, async (client) => {
    const r = await client.query<{ r: { dispute: { id: string; status: string } } }>(
      `select billing.invoice_record_dispute($1, null, 'needs_response', 'sandbox', null) as r`, [invoiceId]);
    return { invoice_id: invoiceId, dispute_id: r.rows[0].r.dispute.id, status: r.rows[0].r.dispute.status };
  });
}
