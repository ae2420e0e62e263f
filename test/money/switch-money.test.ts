// Upgrades are paid before they grant: an immediate switch (upgrade or same tier)
// invoices the proration at once and applies only when that invoice is paid; a
// decline answers 402 payment_failed and changes nothing. A change of interval starts
// a new period; credit beyond the charge pays later renewals; options never cross
// currencies. On Stripe, a pending_update (unpaid proration) is refused the same way.
import { call, startApp, TestApp } from '../support/app';
import { deliver, startStripeMock, StripeMock } from '../support/stripe-mock';
import { advance, checkout, createShop, externalSubject, Shop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
let mock: StripeMock;
beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({}, mock.env);
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

const post = (shop: Shop, path: string, body?: unknown) => call(app.url, 'POST', path, { key: shop.key, body });
const get = (shop: Shop, path: string) => call(app.url, 'GET', path, { key: shop.key });

async function invoices(shop: Shop, subscriptionId: string) {
  const { rows } = await app.owner.query(
    `select billing.invoice_json(i) as j from billing.invoices i where community_id = $1 and subscription_id = $2 order by id`,
    [shop.communityId, subscriptionId]);
  return rows.map((r) => r.j);
}

async function setCard(shop: Shop, subscriptionId: string, declines: boolean) {
  await asTenant(app.owner, shop.communityId, (c) => c.query('select billing.sandbox_set_card($1, $2)', [subscriptionId, declines]), { commit: true });
}

test('an upgrade on day 8 invoices credit and charge at once, and applies once paid', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  await advance(app, shop, 8);
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(r.status).toBe(200);
  expect(r.body.plan_id).toBe(shop.ids.plans['gold-monthly']);
  const inv = (await invoices(shop, subscriptionId)).at(-1);
  expect(inv).toMatchObject({ billing_reason: 'subscription_update', status: 'paid' });
  const [charge, credit] = inv.lines;
  expect(charge).toMatchObject({ type: 'proration', description: 'Remaining time on Gold monthly' });
  expect(credit).toMatchObject({ type: 'proration', description: 'Unused time on Silver monthly' });
  // About 22 of 30 days left: charge ~1100 of 1500, credit ~587 of 800.
  expect(charge.amount_cents).toBeGreaterThan(1000);
  expect(charge.amount_cents).toBeLessThan(1200);
  expect(-credit.amount_cents).toBeGreaterThan(500);
  expect(-credit.amount_cents).toBeLessThan(650);
  expect(inv.total_cents).toBe(charge.amount_cents + credit.amount_cents);
  const ents = await get(shop, `/v1/members/${memberId}/entitlements`);
  expect(ents.body.data.map((e: { key: string }) => e.key).sort()).toEqual(['member-chat', 'vip-chat']);
});

test('a declined upgrade answers 402 payment_failed and changes nothing', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  await setCard(shop, subscriptionId, true);
  await advance(app, shop, 3);
  const before = (await get(shop, `/v1/subscriptions/${subscriptionId}`)).body;
  const nInvoices = (await invoices(shop, subscriptionId)).length;
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(r.status).toBe(402);
  expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
  expect(r.body).toMatchObject({ code: 'payment_failed', status: 402 });
  expect((await get(shop, `/v1/subscriptions/${subscriptionId}`)).body).toEqual(before);
  expect(await invoices(shop, subscriptionId)).toHaveLength(nInvoices);
  const ents = await get(shop, `/v1/members/${memberId}/entitlements`);
  expect(ents.body.data.map((e: { key: string }) => e.key)).toEqual(['member-chat']);
});

test('monthly to annual starts a new yearly period now, with the unused month credited', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  await advance(app, shop, 15);
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['gold-annual'] });
  expect(r.status).toBe(200);
  const inv = (await invoices(shop, subscriptionId)).at(-1);
  expect(inv.lines[0].amount_cents).toBe(15000);
  expect(-inv.lines[1].amount_cents).toBeGreaterThan(600);
  expect(-inv.lines[1].amount_cents).toBeLessThan(900);
  const days = (Date.parse(r.body.current_period_end) - Date.parse(inv.created_at)) / 86400e3;
  expect(days).toBeGreaterThanOrEqual(365);
  expect(days).toBeLessThanOrEqual(366);
});

test('annual to monthly: credit beyond the charge pays the next renewals', async () => {
  const shop = await createShop(app);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject() });
  const page = await fetch(link.body.url);
  await page.text();
  await fetch(link.body.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
  const { rows: [{ subscription_id: subscriptionId }] } = await app.owner.query('select subscription_id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  await advance(app, shop, 8); // trial over: a year paid (15000)
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(r.status).toBe(200);
  let inv = await invoices(shop, subscriptionId);
  expect(inv.at(-1)).toMatchObject({ billing_reason: 'subscription_update', total_cents: 0, status: 'paid' });
  const { rows: [{ credit_cents: credit }] } = await app.owner.query('select credit_cents from billing.subscriptions where id = $1', [subscriptionId]);
  expect(Number(credit)).toBeGreaterThan(15000 - 1500 - 100);
  await advance(app, shop, 31);
  inv = await invoices(shop, subscriptionId);
  expect(inv.at(-1)).toMatchObject({ billing_reason: 'subscription_cycle', total_cents: 0, status: 'paid' });
  expect(inv.at(-1).lines.map((l: { type: string; amount_cents: number }) => [l.type, l.amount_cents]))
    .toEqual([['plan', 1500], ['proration', -1500]]);
});

test('switch options never cross currencies', async () => {
  const shop = await createShop(app, { type: 'sandbox' }, {});
  await app.owner.query(
    `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
     values ($1, $2, 'gold-eur', 'Gold EUR', 1400, 'eur', 'month')`, [shop.communityId, shop.ids.tiers.gold]);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const r = await get(shop, `/v1/subscriptions/${subscriptionId}/switch-options`);
  const all = [...r.body.same_tier, ...r.body.upgrades, ...r.body.downgrades];
  expect(all.length).toBeGreaterThan(0);
  expect(all.every((o: { currency: string }) => o.currency === 'usd')).toBe(true);
});

test('Stripe: an upgrade whose proration Stripe cannot collect (pending_update) answers 402 and changes nothing', async () => {
  const shop = await createShop(app, { type: 'stripe' });
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const ref = `sub_switch_${Date.now()}`;
  mock.subscription({ id: ref, price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id }, declines: true });
  const done = mock.signedEvent('checkout.session.completed', { id: `cs_sw_${Date.now()}`, object: 'checkout.session', mode: 'subscription',
    status: 'complete', payment_status: 'paid', client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id },
    subscription: ref, customer: 'cus_sw' });
  expect((await deliver(app.url, shop.communityId, done)).status).toBe(200);
  const { rows: [{ id }] } = await app.owner.query('select id from billing.subscriptions where provider_ref = $1', [ref]);
  const r = await post(shop, `/v1/subscriptions/${id}/switch`, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(r.status).toBe(402);
  expect(r.body.code).toBe('payment_failed');
  expect((await get(shop, `/v1/subscriptions/${id}`)).body.plan_id).toBe(shop.ids.plans['silver-monthly']);
});
