// POST /v1/checkout-links and the sandbox checkout page (spec: "POST /v1/checkout-links
// request", eligibility failures; states rule 2: a checkout grants nothing).
import { call, createTenant, startApp, TestApp } from '../support/app';
import { advance, checkout, createShop, events, externalSubject, pay, Shop, subscribe } from '../support/shop';

let app: TestApp;
let shop: Shop;

beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
});
afterAll(() => app.close());

test('an external subject gets a checkout link with the canonical member and a 24 hour expiry, and nothing is granted', async () => {
  const subject = externalSubject();
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({ checkout_id: expect.stringMatching(/^cs_/), member_id: expect.stringMatching(/^mem_/), url: expect.any(String), expires_at: expect.any(String), trial_days: 0 });
  expect(new Date(r.body.expires_at).getTime() - Date.now()).toBeGreaterThan(23.9 * 3600e3);
  expect(r.body.url).toContain(`/sandbox/checkout/${r.body.checkout_id}?t=`);
  const again = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
  expect(again.body.member_id).toBe(r.body.member_id);
  const { rows } = await app.owner.query('select count(*)::int as n from billing.member_entitlements where member_id = $1', [r.body.member_id]);
  expect(rows[0].n).toBe(0);
  const lookup = await call(app.url, 'GET', `/v1/members/${r.body.member_id}`, { key: shop.key });
  expect(lookup.body.external_subjects).toEqual([subject.external]);
});

test('the sandbox page shows tier, plan, price and a Pay button; POST pays it and lands on the return page', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() });
  const paid = await pay(link.body.url);
  expect(paid.page).toContain('Gold');
  expect(paid.page).toContain('Gold monthly');
  expect(paid.page).toContain('15.00 USD');
  // (the email field first: this member has no email yet)
  expect(paid.page).toMatch(/<form method="post"[^>]*>(?:<p><label for="email">[^<]*<\/label>\s*<input [^>]*><\/p>)?<button type="submit"[^>]*>Pay/);
  expect(paid.status).toBe(303);
  const target = new URL(paid.location!);
  expect(target.pathname).toBe('/sandbox/return');
  expect(target.searchParams.get('checkout_id')).toBe(link.body.checkout_id);
  const subs = await call(app.url, 'GET', `/v1/subscriptions?member_id=${link.body.member_id}`, { key: shop.key });
  expect(subs.body.data).toHaveLength(1);
  expect(subs.body.data[0]).toMatchObject({ status: 'active', plan_id: shop.ids.plans['gold-monthly'], member_id: link.body.member_id });
  // Paying twice is one payment.
  const twice = await fetch(link.body.url, { method: 'POST', redirect: 'manual' });
  expect(twice.status).toBe(303);
  const again = await call(app.url, 'GET', `/v1/subscriptions?member_id=${link.body.member_id}`, { key: shop.key });
  expect(again.body.data).toHaveLength(1);
});

test('a wrong token shows no checkout page and pays nothing', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const bad = link.body.url.replace(/t=.*/, 't=' + 'a'.repeat(64));
  expect((await fetch(bad)).status).toBe(404);
  expect((await fetch(bad, { method: 'POST', redirect: 'manual' })).status).toBe(404);
  const { rows } = await app.owner.query('select status from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  expect(rows[0].status).toBe('open');
});

test('return_url receives the buyer with checkout_id appended', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject(), return_url: 'https://shop.example/done?from=billing' });
  const paid = await pay(link.body.url);
  const target = new URL(paid.location!);
  expect(target.origin + target.pathname).toBe('https://shop.example/done');
  expect(target.searchParams.get('from')).toBe('billing');
  expect(target.searchParams.get('checkout_id')).toBe(link.body.checkout_id);
});

test('a trial plan starts trialing and becomes active at trial end', async () => {
  const s = await shop2();
  const { subscriptionId } = await subscribe(app, s, 'gold', 'gold-annual');
  const before = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: s.key });
  expect(before.body.status).toBe('trialing');
  await advance(app, s, 8);
  const after = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: s.key });
  expect(after.body.status).toBe('active');
  expect(new Date(after.body.current_period_end).getTime()).toBeGreaterThan(new Date(before.body.current_period_end).getTime() + 300 * 86400e3);
});

test('a one-time purchase is completed with access_expires_at from access_days, and expiry revokes', async () => {
  const s = await shop2();
  const link = await checkout(app, s, { tier_id: s.ids.tiers.guide, subject: externalSubject() });
  await pay(link.body.url);
  const list = await call(app.url, 'GET', '/v1/purchases', { key: s.key });
  const pur = list.body.data.find((p: { member_id: string }) => p.member_id === link.body.member_id);
  expect(pur).toMatchObject({ status: 'completed', plan_id: s.ids.plans['guide-once'], amount_cents: 900 });
  expect(new Date(pur.access_expires_at).getTime() - new Date(pur.paid_at).getTime()).toBe(30 * 86400e3);
  const granted = await call(app.url, 'GET', `/v1/members/${link.body.member_id}/entitlements`, { key: s.key });
  expect(granted.body.data.map((e: { key: string }) => e.key)).toEqual(['vip-chat']);
  // Buying it again while access lasts is not eligible.
  const again = await checkout(app, s, { tier_id: s.ids.tiers.guide, subject: { member_id: link.body.member_id } });
  expect(again.status).toBe(409);
  expect(again.body.code).toBe('not_eligible');
  await advance(app, s, 31);
  const revoked = await call(app.url, 'GET', `/v1/members/${link.body.member_id}/entitlements`, { key: s.key });
  expect(revoked.body.data).toEqual([]);
  const ok = await checkout(app, s, { tier_id: s.ids.tiers.guide, subject: { member_id: link.body.member_id } });
  expect(ok.status).toBe(200);
});

test('an abandoned checkout expires after 24 hours without any entitlement or granted event', async () => {
  const s = await shop2();
  const link = await checkout(app, s, { tier_id: s.ids.tiers.gold, plan_id: s.ids.plans['gold-monthly'], subject: externalSubject(), discount_code: 'welcome10' });
  await advance(app, s, 1.01);
  const { rows } = await app.owner.query(`select cs.status, r.status as hold from billing.checkout_sessions cs
    join billing.discount_redemptions r on r.checkout_id = cs.id where cs.id = $1`, [link.body.checkout_id]);
  expect(rows[0]).toEqual({ status: 'expired', hold: 'released' });
  expect((await fetch(link.body.url, { method: 'POST', redirect: 'manual' })).status).toBe(409);
  expect(await events(app.owner, s.communityId, 'member.entitlement.granted')).toEqual([]);
  const ents = await app.owner.query('select count(*)::int as n from billing.member_entitlements where member_id = $1', [link.body.member_id]);
  expect(ents.rows[0].n).toBe(0);
});

describe('request rules', () => {
  test('a missing or inactive tier is not_found', async () => {
    for (const tier_id of ['tier_00000000000000000000000000', shop.ids.tiers.retired]) {
      const r = await checkout(app, shop, { tier_id, subject: externalSubject() });
      expect(r.status).toBe(404);
      expect(r.body.code).toBe('not_found');
    }
  });

  test('several active plans without plan_id answer 422 plan_required, and the retry fails the same way', async () => {
    const body = { tier_id: shop.ids.tiers.gold, subject: externalSubject() };
    const first = await checkout(app, shop, body);
    const second = await checkout(app, shop, body);
    expect(first.status).toBe(422);
    expect(first.body.code).toBe('plan_required');
    expect(second.body).toEqual(first.body);
    const members = await app.owner.query('select count(*)::int as n from billing.external_subjects where external_user_id = $1', [body.subject.external.external_user_id]);
    expect(members.rows[0].n).toBe(0);
  });

  test('a community without a payment provider answers 409 payment_config_inactive', async () => {
    const none = await createShop(app, null);
    const r = await checkout(app, none, { tier_id: none.ids.tiers.silver, subject: externalSubject() });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe('payment_config_inactive');
  });

  test('a stripe community on a deployment without Stripe keys answers 409 payment_config_inactive', async () => {
    const stripe = await createShop(app, { type: 'stripe' });
    const r = await checkout(app, stripe, { tier_id: stripe.ids.tiers.silver, subject: externalSubject() });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe('payment_config_inactive');
  });

  test('a platform identity subject needs that platform connected (422 platform_not_connected)', async () => {
    const ok = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'discord', platform_uid: `d-${Date.now()}`, username: 'ann' } });
    expect(ok.status).toBe(200);
    const member = await call(app.url, 'GET', `/v1/members/${ok.body.member_id}`, { key: shop.key });
    expect(member.body.identities).toEqual([{ platform: 'discord', platform_uid: expect.stringMatching(/^d-/), username: 'ann' }]);
    const r = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'telegram', platform_uid: '42' } });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('platform_not_connected');
  });

  test('subject must be exactly one buyer form', async () => {
    for (const subject of [{}, { member_id: 'mem_x', external: { namespace: 'a', external_user_id: 'b' } }, { platform: 'myspace', platform_uid: '1' }]) {
      const r = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
      expect(r.status).toBe(422);
      expect(r.body.code).toBe('invalid_request');
    }
    const unknown = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { member_id: 'mem_00000000000000000000000000' } });
    expect(unknown.status).toBe(404);
  });

  test('return_url must be https and is for operator (external) subjects only', async () => {
    const http = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject(), return_url: 'http://shop.example/done' });
    expect(http.status).toBe(422);
    expect(http.body).toMatchObject({ code: 'invalid_request', param: 'return_url' });
    const platform = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'discord', platform_uid: `p-${Date.now()}` }, return_url: 'https://shop.example/done' });
    expect(platform.status).toBe(422);
    expect(platform.body).toMatchObject({ code: 'invalid_request', param: 'return_url' });
  });

  test('already subscribed, or subscribed to another tier (a switch is needed), is not_eligible', async () => {
    const { memberId } = await subscribe(app, shop, 'silver');
    const same = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { member_id: memberId } });
    expect(same.status).toBe(409);
    expect(same.body.code).toBe('not_eligible');
    const other = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: { member_id: memberId } });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('not_eligible');
    expect(other.body.detail).toMatch(/switch/);
  });

  test('a subscriber may still buy a one-time tier: one-time plans never need a switch', async () => {
    const { memberId } = await subscribe(app, shop, 'silver');
    const r = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: { member_id: memberId } });
    expect(r.status).toBe(200);
  });

  test('an open checkout of a tier the buyer has meanwhile bought cannot be paid twice', async () => {
    const subject = externalSubject();
    const a = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
    const b = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
    expect((await pay(a.body.url)).status).toBe(303);
    const second = await fetch(b.body.url, { method: 'POST', redirect: 'manual' });
    expect(second.status).toBe(409);
  });

  test('Idempotency-Key replays the same checkout', async () => {
    const body = { tier_id: shop.ids.tiers.silver, subject: externalSubject() };
    const key = `idem-${Date.now()}`;
    const a = await checkout(app, shop, body, { 'idempotency-key': key });
    const b = await checkout(app, shop, body, { 'idempotency-key': key });
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.body).toEqual(a.body);
  });

  test('checkout needs the checkout:write scope', async () => {
    const t = await createTenant(app.owner, ['plans:read']);
    const r = await call(app.url, 'POST', '/v1/checkout-links', { key: t.key, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject() } });
    expect(r.status).toBe(403);
  });

  test('another community\'s tier is not_found', async () => {
    const other = await createShop(app);
    const r = await checkout(app, shop, { tier_id: other.ids.tiers.silver, subject: externalSubject() });
    expect(r.status).toBe(404);
  });
});

/** A fresh community for tests that move its clock. */
function shop2(): Promise<Shop> {
  return createShop(app);
}
