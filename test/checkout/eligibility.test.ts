// Spec "POST /v1/checkout-links request", eligibility failures: each one answered with
// its code, the retry of the same request fails the same way and nothing of the
// attempt is left behind; platform_not_connected concerns platform subjects only;
// plan_id is required only when the tier has more than one ACTIVE plan.
import { call, startApp, TestApp } from '../support/app';
import { catalog, checkout, createShop, externalSubject, Shop, subscribe } from '../support/shop';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

/** What a checkout attempt could leave behind in a community. */
async function footprint(shop: Shop) {
  const { rows } = await app.owner.query(
    `select (select count(*)::int from billing.members where community_id = $1) as members,
            (select count(*)::int from billing.external_subjects where community_id = $1) as subjects,
            (select count(*)::int from billing.member_identities where community_id = $1) as identities,
            (select count(*)::int from billing.checkout_sessions where community_id = $1) as checkouts,
            (select count(*)::int from billing.discount_redemptions where community_id = $1) as redemptions`, [shop.communityId]);
  return rows[0];
}

async function failsTheSameWay(shop: Shop, body: Record<string, unknown>, status: number, code: string) {
  const before = await footprint(shop);
  const first = await checkout(app, shop, body);
  expect([first.status, first.body.code]).toEqual([status, code]);
  expect(first.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  const second = await checkout(app, shop, body);
  expect(second.status).toBe(first.status);
  expect(second.body).toEqual(first.body);
  expect(await footprint(shop)).toEqual(before);
}

describe('retrying the same request after an eligibility failure fails the same way and leaves nothing behind', () => {
  test('not_found: a tier that does not exist, or is inactive', async () => {
    const shop = await createShop(app);
    await failsTheSameWay(shop, { tier_id: 'tier_00000000000000000000000000', subject: externalSubject() }, 404, 'not_found');
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.retired, subject: externalSubject() }, 404, 'not_found');
  });

  test('payment_config_inactive: no payment provider', async () => {
    const shop = await createShop(app, null);
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() }, 409, 'payment_config_inactive');
  });

  test('platform_not_connected: a platform identity of a platform the community has not connected', async () => {
    const shop = await createShop(app);
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'telegram', platform_uid: `t-${Date.now()}` } }, 422, 'platform_not_connected');
  });

  test('not_eligible: already subscribed to the tier, or to another tier (a switch is needed)', async () => {
    const shop = await createShop(app);
    const { memberId } = await subscribe(app, shop, 'silver');
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.silver, subject: { member_id: memberId } }, 409, 'not_eligible');
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: { member_id: memberId } }, 409, 'not_eligible');
  });

  test('plan_required: several active plans and no plan_id', async () => {
    const shop = await createShop(app);
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.gold, subject: externalSubject() }, 422, 'plan_required');
  });

  test('discount_invalid: a code that does not apply (found after the checkout row is written: it is rolled back)', async () => {
    const shop = await createShop(app);
    await failsTheSameWay(shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject(), discount_code: 'WELCOME10' }, 422, 'discount_invalid');
  });
});

test('platform_not_connected applies to platform subjects only: a community with no platform sells to operator subjects and members', async () => {
  const base = catalog() as unknown as { entitlements: Record<string, unknown>[]; tiers: { key: string; plans: { key: string }[] }[] };
  const shop = await createShop(app, { type: 'sandbox' }, {
    platforms: [],
    entitlements: base.entitlements.map((e) => ({ ...e, benefits: [] })),
  });
  const { rows } = await app.owner.query('select count(*)::int as n from billing.platform_configs where community_id = $1', [shop.communityId]);
  expect(rows[0].n).toBe(0);
  const external = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  expect(external.status).toBe(200);
  const member = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: { member_id: external.body.member_id } });
  expect(member.status).toBe(200);
  const platform = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'discord', platform_uid: `d-${Date.now()}` } });
  expect([platform.status, platform.body.code]).toEqual([422, 'platform_not_connected']);
});

test('plan_id is required only when the tier has more than one ACTIVE plan', async () => {
  const base = catalog() as unknown as { entitlements: Record<string, unknown>[]; tiers: { key: string; plans: { key: string }[] }[] };
  // Gold with its annual plan retired: one active plan left of two.
  const shop = await createShop(app, { type: 'sandbox' }, {
    tiers: base.tiers.map((t) => (t.key !== 'gold' ? t : { ...t, plans: t.plans.map((p) => (p.key === 'gold-annual' ? { ...p, active: false } : p)) })),
  });
  const { rows } = await app.owner.query('select count(*)::int as all, count(*) filter (where active)::int as active from billing.plans where tier_id = $1', [shop.ids.tiers.gold]);
  expect(rows[0]).toEqual({ all: 2, active: 1 });
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, subject: externalSubject() });
  expect(r.status).toBe(200);
  const { rows: cs } = await app.owner.query('select plan_id from billing.checkout_sessions where id = $1', [r.body.checkout_id]);
  expect(cs[0].plan_id).toBe(shop.ids.plans['gold-monthly']);
  // The retired plan cannot be chosen either; with two active plans plan_id is required.
  const retired = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject() });
  expect([retired.status, retired.body.param]).toEqual([422, 'plan_id']);
  const both = await createShop(app);
  const required = await checkout(app, both, { tier_id: both.ids.tiers.gold, subject: externalSubject() });
  expect([required.status, required.body.code]).toEqual([422, 'plan_required']);
  // MCP and REST share the rule (tools.ts describes it); the REST plan list shows the active plans.
  const plans = await call(app.url, 'GET', `/v1/plans/${shop.ids.tiers.gold}`, { key: shop.key });
  expect(plans.body.plans.map((p: { id: string }) => p.id)).toEqual([shop.ids.plans['gold-monthly']]);
});
