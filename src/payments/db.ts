// Provider-side work (the sandbox page, the CLI, Stripe's webhooks, the worker) runs
// outside an API key's request: one owner transaction with the community set, so
// billing.now() reads that community's clock and triggers see its rows.
import type pg from 'pg';

export async function inCommunity<T>(pool: pg.Pool, communityId: string, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(`select set_config('app.community_id', $1, true)`, [communityId]);
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

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

/** Which community a checkout belongs to (owner pool: sees every community). */
export async function checkoutCommunity(pool: pg.Pool, checkoutId: string): Promise<string | null> {
  const { rows } = await pool.query<{ community_id: string }>('select community_id from billing.checkout_sessions where id = $1', [checkoutId]);
  return rows[0]?.community_id ?? null;
}

/** The CLI's `sandbox complete`: exactly what the buyer's click on the page does. */
export async function sandboxComplete(pool: pg.Pool, checkoutId: string): Promise<CompletedCheckout> {
  const communityId = await checkoutCommunity(pool, checkoutId);
  if (!communityId) throw Object.assign(new Error(`No checkout ${checkoutId}.`), { code: 'BL404' });
  return inCommunity(pool, communityId, async (client) => {
    const { rows } = await client.query<{ provider: string }>('select provider from billing.checkout_sessions where id = $1', [checkoutId]);
    if (rows[0]?.provider !== 'sandbox') throw Object.assign(new Error(`Checkout ${checkoutId} is not a sandbox checkout.`), { code: 'BL409' });
    return completeCheckout(client, checkoutId);
  });
}

/** The CLI's `sandbox advance`: moves the community's clock and applies what is due. */
export async function sandboxAdvance(pool: pg.Pool, communityId: string, days: number): Promise<{ now: string }> {
  const { rows } = await pool.query<{ r: { now: string } }>('select billing.sandbox_advance($1, $2) as r', [communityId, days]);
  return { now: rows[0].r.now };
}
