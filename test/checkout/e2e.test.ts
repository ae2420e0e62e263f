// End to end, as an operator and a buyer would go: catalog, checkout link, payment,
// subscription, entitlement (sources and benefits), event feed, cancel, period end,
// revoked. Once through the sandbox page and once through the Stripe adapter.
import { call, startApp, TestApp } from '../support/app';
import { deliver, startStripeMock, StripeMock } from '../support/stripe-mock';
import { advance, createShop, Shop } from '../support/shop';

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

const api = (shop: Shop, method: string, path: string, body?: unknown) => call(app.url, method, path, { key: shop.key, body });

async function expectGranted(shop: Shop, memberId: string, subscriptionId: string) {
  const ents = await api(shop, 'GET', `/v1/members/${memberId}/entitlements`);
  expect(ents.status).toBe(200);
  const byKey = Object.fromEntries(ents.body.data.map((e: { key: string }) => [e.key, e]));
  expect(Object.keys(byKey).sort()).toEqual(['member-chat', 'vip-chat']);
  expect(byKey['vip-chat']).toMatchObject({
    entitlement_id: shop.ids.entitlements['vip-chat'], name: 'VIP chat', status: 'active',
    sources: [{ type: 'subscription', id: subscriptionId, status: 'active', tier_id: shop.ids.tiers.gold,
      plan_id: shop.ids.plans['gold-monthly'], client_reference_id: 'order-42', valid_until: expect.any(String) }],
    benefits: [{ platform: 'discord', platform_config_id: shop.ids.platforms['discord-main'], type: 'role', value: '9876' }],
  });
  const feed = await api(shop, 'GET', '/v1/events?type=member.entitlement.granted');
  expect(feed.status).toBe(200);
  const granted = feed.body.data.filter((e: { data: { member: { id: string } } }) => e.data.member.id === memberId);
  expect(granted.map((e: { data: { entitlement: { key: string } } }) => e.data.entitlement.key).sort()).toEqual(['member-chat', 'vip-chat']);
}

async function expectRevoked(shop: Shop, memberId: string) {
  const ents = await api(shop, 'GET', `/v1/members/${memberId}/entitlements`);
  expect(ents.body.data).toEqual([]);
  const feed = await api(shop, 'GET', '/v1/events?type=member.entitlement.revoked');
  const revoked = feed.body.data.filter((e: { data: { member: { id: string } } }) => e.data.member.id === memberId);
  expect(revoked).toHaveLength(2);
}

test('sandbox: checkout link, pay on the page, entitlement granted, cancel, period end, revoked', async () => {
  const shop = await createShop(app);
  const link = await api(shop, 'POST', '/v1/checkout-links', {
    tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], client_reference_id: 'order-42',
    subject: { external: { namespace: 'shop', external_user_id: 'buyer-1' } }, return_url: 'https://shop.example/thanks',
  });
  expect(link.status).toBe(200);
  // Nothing is granted before payment.
  expect((await api(shop, 'GET', `/v1/members/${link.body.member_id}/entitlements`)).body.data).toEqual([]);

  const page = await fetch(link.body.url);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('Pay 15.00 USD');
  const paid = await fetch(link.body.url, { method: 'POST', redirect: 'manual' });
  expect(paid.status).toBe(303);
  expect(paid.headers.get('location')).toBe(`https://shop.example/thanks?checkout_id=${link.body.checkout_id}`);

  const subs = await api(shop, 'GET', `/v1/subscriptions?member_id=${link.body.member_id}`);
  expect(subs.body.data).toHaveLength(1);
  const sub = subs.body.data[0];
  expect(sub).toMatchObject({ status: 'active', plan_id: shop.ids.plans['gold-monthly'], tier_id: shop.ids.tiers.gold, amount_cents: 1500, currency: 'usd', interval: 'month' });
  await expectGranted(shop, link.body.member_id, sub.id);

  const check = await api(shop, 'GET', `/v1/entitlements/check?namespace=shop&external_user_id=buyer-1&tier_id=${shop.ids.tiers.gold}`);
  expect(check.body.entitled).toBe(true);

  expect((await api(shop, 'POST', `/v1/subscriptions/${sub.id}/cancel`)).status).toBe(202);
  await advance(app, shop, 15);
  expect((await api(shop, 'GET', `/v1/members/${link.body.member_id}/entitlements`)).body.data).toHaveLength(2);
  await advance(app, shop, 17);
  expect((await api(shop, 'GET', `/v1/subscriptions/${sub.id}`)).body.status).toBe('cancelled');
  await expectRevoked(shop, link.body.member_id);
  expect((await api(shop, 'GET', `/v1/entitlements/check?namespace=shop&external_user_id=buyer-1`)).body.entitled).toBe(false);
});

test('stripe: checkout session on Stripe, signed webhooks, entitlement granted, cancel, period end, revoked', async () => {
  const shop = await createShop(app, { type: 'stripe' });
  const link = await api(shop, 'POST', '/v1/checkout-links', {
    tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], client_reference_id: 'order-42',
    subject: { external: { namespace: 'shop', external_user_id: 'buyer-2' } },
  });
  expect(link.status).toBe(200);
  expect(link.body.url).toMatch(/^https:\/\/checkout\.stripe\.test\//);
  const session = mock.requestsTo('POST', '/v1/checkout/sessions').find((r) => r.form.client_reference_id === link.body.checkout_id);
  expect(session).toBeDefined();

  // The buyer pays on Stripe; Stripe sends its webhooks.
  const start = Math.floor(Date.now() / 1000);
  const stripeSub = mock.subscription({ id: 'sub_e2e_1', customer: 'cus_e2e', price: 'price_gold_m', periodStart: start, periodEnd: start + 30 * 86400,
    metadata: { checkout_id: link.body.checkout_id } });
  const completed = mock.signedEvent('checkout.session.completed', { id: 'cs_test_e2e', object: 'checkout.session', mode: 'subscription',
    status: 'complete', payment_status: 'paid', client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id },
    subscription: 'sub_e2e_1', customer: 'cus_e2e' }, { created: start });
  expect((await deliver(app.url, shop.communityId, completed)).status).toBe(200);
  expect((await deliver(app.url, shop.communityId, mock.signedEvent('customer.subscription.created', stripeSub, { created: start }))).status).toBe(200);

  const subs = await api(shop, 'GET', `/v1/subscriptions?member_id=${link.body.member_id}`);
  expect(subs.body.data).toHaveLength(1);
  const sub = subs.body.data[0];
  expect(sub).toMatchObject({ status: 'active', plan_id: shop.ids.plans['gold-monthly'], current_period_end: new Date((start + 30 * 86400) * 1000).toISOString() });
  await expectGranted(shop, link.body.member_id, sub.id);

  expect((await api(shop, 'POST', `/v1/subscriptions/${sub.id}/cancel`)).status).toBe(202);
  expect(mock.requestsTo('POST', '/v1/subscriptions/sub_e2e_1').at(-1)!.form).toEqual({ cancel_at_period_end: 'true' });
  const updated = mock.signedEvent('customer.subscription.updated', { ...mock.subscriptions.get('sub_e2e_1')!, cancel_at: start + 30 * 86400 }, { created: start + 60 });
  await deliver(app.url, shop.communityId, updated);
  expect((await api(shop, 'GET', `/v1/subscriptions/${sub.id}`)).body.status).toBe('cancelling');
  expect((await api(shop, 'GET', `/v1/members/${link.body.member_id}/entitlements`)).body.data).toHaveLength(2);

  // Period end: Stripe ends the subscription and says so.
  const deleted = mock.signedEvent('customer.subscription.deleted', { ...mock.subscriptions.get('sub_e2e_1')!, status: 'canceled', ended_at: start + 30 * 86400 }, { created: start + 30 * 86400 });
  expect((await deliver(app.url, shop.communityId, deleted)).status).toBe(200);
  expect((await api(shop, 'GET', `/v1/subscriptions/${sub.id}`)).body.status).toBe('cancelled');
  await expectRevoked(shop, link.body.member_id);
});
