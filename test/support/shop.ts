// Shared seeds for the checkout and lifecycle tests: a sandbox community with the
// operator-cli.md example catalog (gold and silver subscriptions, a one-time guide).
import type pg from 'pg';
import { applyCatalog, CatalogResult, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { sandboxAdvance } from '../../src/domain/checkout/checkout-completion';
import { call, createTenant, Tenant, TestApp } from './app';

export function catalog(provider: { type: string } | null = { type: 'sandbox' }, extra: Record<string, unknown> = {}) {
  return parseCatalog({
    payment_provider: provider,
    platforms: [{ key: 'discord-main', platform: 'discord', name: 'Main server', settings: { guild_id: '1234' } }],
    entitlements: [
      { key: 'vip-chat', name: 'VIP chat', benefits: [{ platform: 'discord-main', type: 'role', value: '9876' }] },
      { key: 'member-chat', name: 'Member chat', benefits: [{ platform: 'discord-main', type: 'role', value: '1111' }] },
    ],
    tiers: [
      { key: 'gold', name: 'Gold', description: 'Everything', kind: 'subscription', billing_mode: 'recurring', rank: 2,
        entitlements: ['vip-chat', 'member-chat'],
        plans: [
          { key: 'gold-monthly', name: 'Gold monthly', amount_cents: 1500, currency: 'usd', interval: 'month', trial_days: 0, stripe_price_id: 'price_gold_m' },
          { key: 'gold-annual', name: 'Gold annual', amount_cents: 15000, currency: 'usd', interval: 'year', trial_days: 7, stripe_price_id: 'price_gold_y' },
        ] },
      { key: 'silver', name: 'Silver', kind: 'subscription', billing_mode: 'recurring', rank: 1, entitlements: ['member-chat'],
        plans: [{ key: 'silver-monthly', name: 'Silver monthly', amount_cents: 800, currency: 'usd', interval: 'month', stripe_price_id: 'price_silver_m' }] },
      { key: 'platinum', name: 'Platinum', kind: 'subscription', billing_mode: 'recurring', rank: 3, entitlements: ['vip-chat'],
        plans: [{ key: 'platinum-monthly', name: 'Platinum monthly', amount_cents: 3000, currency: 'usd', interval: 'month', stripe_price_id: 'price_plat_m' }] },
      { key: 'retired', name: 'Retired', kind: 'subscription', billing_mode: 'recurring', rank: 0, active: false,
        plans: [{ key: 'retired-monthly', amount_cents: 100, currency: 'usd', interval: 'month' }] },
      { key: 'guide', name: 'Guide', kind: 'one_time', billing_mode: 'one_time', entitlements: ['vip-chat'],
        plans: [{ key: 'guide-once', name: 'Guide', amount_cents: 900, currency: 'usd', interval: null, access_days: 30 }] },
    ],
    discounts: [
      { code: 'WELCOME10', name: 'Welcome', value_type: 'percent', percent_off: 10, duration: 'once', use_limit: 100, tiers: ['gold'] },
    ],
    ...extra,
  });
}

export interface Shop extends Tenant { ids: CatalogResult }

export async function createShop(app: TestApp, provider: { type: string } | null = { type: 'sandbox' }, extra: Record<string, unknown> = {}): Promise<Shop> {
  const tenant = await createTenant(app.owner);
  const ids = await applyCatalog(app.owner, tenant.communityId, catalog(provider, extra));
  return { ...tenant, ids };
}

let n = 0;
export function externalSubject(prefix = 'user') {
  return { external: { namespace: 'app', external_user_id: `${prefix}-${++n}-${Date.now()}` } };
}

export async function checkout(app: TestApp, shop: Shop, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers });
}

/** Opens the sandbox page, then posts to it as the Pay button's form does. */
export async function pay(url: string): Promise<{ page: string; location: string | null; status: number }> {
  const page = await fetch(url);
  const html = await page.text();
  if (page.status !== 200) throw new Error(`sandbox page answered ${page.status}: ${html}`);
  const res = await fetch(url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
  await res.text();
  return { page: html, location: res.headers.get('location'), status: res.status };
}

/** Checkout + payment for a subscription of a tier; returns the subscription row's id. */
export async function subscribe(app: TestApp, shop: Shop, tierKey: string, planKey?: string, subject: Record<string, unknown> = externalSubject()) {
  const body: Record<string, unknown> = { tier_id: shop.ids.tiers[tierKey], subject };
  if (planKey) body.plan_id = shop.ids.plans[planKey];
  const link = await checkout(app, shop, body);
  if (link.status !== 200) throw new Error(`checkout failed: ${link.text}`);
  const paid = await pay(link.body.url);
  if (paid.status !== 303) throw new Error(`pay failed: ${paid.status}`);
  const { rows } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  return { subscriptionId: rows[0].id, memberId: link.body.member_id as string, checkoutId: link.body.checkout_id as string };
}

export function advance(app: TestApp, shop: Shop, days: number) {
  return sandboxAdvance(app.owner, shop.communityId, days);
}

export async function events(pool: pg.Pool, communityId: string, type?: string) {
  const { rows } = await pool.query<{ type: string; data: Record<string, unknown> }>(
    `select type, data from billing.events where community_id = $1 and ($2::text is null or type = $2) order by id`, [communityId, type ?? null]);
  return rows;
}
