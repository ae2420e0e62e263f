// Discount codes at checkout: every reason a code is refused answers 422
// discount_invalid; pending and redeemed holds; the use limit under concurrency.
import { startApp, TestApp } from '../support/app';
import { checkout, createShop, externalSubject, pay, Shop } from '../support/shop';

let app: TestApp;
let shop: Shop;
const day = 86400e3;
const iso = (ms: number) => new Date(Date.now() + ms).toISOString();

beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app, { type: 'sandbox' }, {
    discounts: [
      { code: 'WELCOME10', name: 'Welcome', value_type: 'percent', percent_off: 10, duration: 'once', tiers: ['gold'] },
      { code: 'OFF', value_type: 'percent', percent_off: 5, is_active: false },
      { code: 'LATER', value_type: 'percent', percent_off: 5, starts_at: iso(2 * day) },
      { code: 'GONE', value_type: 'percent', percent_off: 5, expires_at: iso(-day) },
      { code: 'BIGSPEND', value_type: 'percent', percent_off: 5, min_spend_cents: 1000 },
      { code: 'SMALLSPEND', value_type: 'percent', percent_off: 5, max_spend_cents: 1000 },
      { code: 'VIPONLY', value_type: 'percent', percent_off: 50, members: [{ platform: 'discord', platform_uid: 'vip-1' }] },
      { code: 'THREE', value_type: 'amount', amount_off_cents: 200, currency: 'usd', use_limit: 3 },
      { code: 'ONCE', value_type: 'percent', percent_off: 20, use_limit: 1 },
      { code: 'ARCHIVED', value_type: 'percent', percent_off: 5 },
    ],
  });
  await app.owner.query(`update billing.discount_codes set archived_at = now() where community_id = $1 and code = 'ARCHIVED'`, [shop.communityId]);
});
afterAll(() => app.close());

const silver = () => ({ tier_id: shop.ids.tiers.silver, subject: externalSubject() });
const goldMonthly = () => ({ tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() });

async function holds(code: string) {
  const { rows } = await app.owner.query<{ status: string; n: number }>(
    `select r.status, count(*)::int as n from billing.discount_redemptions r join billing.discount_codes d
       on d.community_id = r.community_id and d.id = r.discount_id
     where d.community_id = $1 and d.code = $2 group by r.status`, [shop.communityId, code]);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

test('codes match case-insensitively and the page shows the discount', async () => {
  const r = await checkout(app, shop, { ...goldMonthly(), discount_code: 'welcome10' });
  expect(r.status).toBe(200);
  const page = await (await fetch(r.body.url)).text();
  expect(page).toContain('WELCOME10');
  expect(page).toContain('Pay 13.50 USD');
});

test.each([
  ['unknown code', 'NOPE', silver],
  ['inactive', 'OFF', silver],
  ['archived', 'ARCHIVED', silver],
  ['not yet started', 'LATER', silver],
  ['expired', 'GONE', silver],
  ['wrong tier', 'WELCOME10', silver],
  ['below min spend', 'BIGSPEND', silver],
  ['above max spend', 'SMALLSPEND', goldMonthly],
  ['member not allowed', 'VIPONLY', silver],
])('%s answers 422 discount_invalid', async (_name, code, body) => {
  const r = await checkout(app, shop, { ...body(), discount_code: code });
  expect(r.status).toBe(422);
  expect(r.body.code).toBe('discount_invalid');
});

test('a code limited to members accepts their platform identity', async () => {
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'discord', platform_uid: 'vip-1' }, discount_code: 'viponly' });
  expect(r.status).toBe(200);
});

test('open checkouts hold the code (pending); paid ones redeem it; a use limit counts both', async () => {
  const a = await checkout(app, shop, { ...silver(), discount_code: 'once' });
  expect(a.status).toBe(200);
  expect(await holds('ONCE')).toEqual({ pending: 1 });
  const b = await checkout(app, shop, { ...silver(), discount_code: 'ONCE' });
  expect(b.body.code).toBe('discount_invalid');
  await pay(a.body.url);
  expect(await holds('ONCE')).toEqual({ redeemed: 1 });
  const c = await checkout(app, shop, { ...silver(), discount_code: 'ONCE' });
  expect(c.body.code).toBe('discount_invalid');
});

test('a use limit of 3 holds under 20 concurrent checkouts', async () => {
  const results = await Promise.all(Array.from({ length: 20 }, () => checkout(app, shop, { ...silver(), discount_code: 'three' })));
  const statuses = results.map((r) => r.status).sort();
  expect(statuses.filter((s) => s === 200)).toHaveLength(3);
  expect(results.filter((r) => r.status === 422).every((r) => r.body.code === 'discount_invalid')).toBe(true);
  expect(statuses.filter((s) => s === 422)).toHaveLength(17);
  expect(await holds('THREE')).toEqual({ pending: 3 });
});
