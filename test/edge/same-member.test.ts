// Audit item 3: many clients working on one member at once (checkout links for its
// external subject, attaching external subjects, portal sessions, link codes) never
// see a 500: locks are taken in one order, and a deadlock or serialization failure
// that still happens is retried inside the service.
import { createShop, Shop } from '../support/shop';
import { call, startApp, TestApp } from '../support/app';

let app: TestApp;
let shop: Shop;
beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
});
afterAll(() => app.close());

test('a few hundred parallel requests on the same member answer no 500', async () => {
  const subject = { external: { namespace: 'app', external_user_id: `same-${Date.now()}` } };
  const first = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers.silver, subject } });
  expect(first.status).toBe(200);
  const member = first.body.member_id as string;
  const requests = Array.from({ length: 240 }, (_, i) => {
    switch (i % 5) {
      case 0: return call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers[i % 2 ? 'silver' : 'gold'], plan_id: i % 2 ? undefined : shop.ids.plans['gold-monthly'], subject } });
      case 1: return call(app.url, 'POST', `/v1/members/${member}/external-subjects`, { key: shop.key, body: { namespace: `ns${i % 7}`, external_user_id: `u${i}` } });
      case 2: return call(app.url, 'POST', `/v1/members/${member}/portal-sessions`, { key: shop.key, body: {} });
      case 3: return call(app.url, 'POST', `/v1/members/${member}/link-codes`, { key: shop.key, body: { intended_platform: 'discord' } });
      default: return call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers.guide, subject }, headers: { 'idempotency-key': `k${i % 3}` } });
    }
  });
  const replies = await Promise.all(requests);
  const errors = replies.filter((r) => r.status >= 500).map((r) => r.text);
  expect(errors).toEqual([]);
  const statuses = new Set(replies.map((r) => r.status));
  expect(statuses.has(200)).toBe(true);
});
