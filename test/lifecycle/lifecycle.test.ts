// The spec's states table: cancel, reactivate, switch options, switch (immediate with
// proration, or scheduled downgrade), cancel scheduled switch, and what period end does.
import { call, startApp, TestApp } from '../support/app';
import { advance, createShop, events, Shop, subscribe } from '../support/shop';

let app: TestApp;

beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

const post = (shop: Shop, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  call(app.url, 'POST', path, { key: shop.key, body, headers });
const get = (shop: Shop, path: string) => call(app.url, 'GET', path, { key: shop.key });

async function entitlementKeys(shop: Shop, memberId: string) {
  const r = await get(shop, `/v1/members/${memberId}/entitlements`);
  return r.body.data.map((e: { key: string }) => e.key).sort();
}

test('cancel answers 202 cancelling, keeps access to period end, and a repeat answers 202 again', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  const first = await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`);
  expect(first.status).toBe(202);
  expect(first.body).toEqual({ status: 'cancelling' });
  const second = await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`);
  expect(second.status).toBe(202);
  expect(second.body).toEqual({ status: 'cancelling' });
  const sub = await get(shop, `/v1/subscriptions/${subscriptionId}`);
  expect(sub.body.status).toBe('cancelling');
  expect(sub.body.cancel_at).toBe(sub.body.current_period_end);
  expect(await entitlementKeys(shop, memberId)).toEqual(['member-chat']);
  await advance(app, shop, 20);
  expect(await entitlementKeys(shop, memberId)).toEqual(['member-chat']);
  await advance(app, shop, 12);
  expect((await get(shop, `/v1/subscriptions/${subscriptionId}`)).body.status).toBe('cancelled');
  expect(await entitlementKeys(shop, memberId)).toEqual([]);
  expect((await events(app.owner, shop.communityId, 'member.entitlement.revoked')).length).toBe(1);
  const again = await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`);
  expect(again.status).toBe(409);
});

test('reactivate turns cancelling back into active; any other state answers 409', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const notCancelling = await post(shop, `/v1/subscriptions/${subscriptionId}/reactivate`);
  expect(notCancelling.status).toBe(409);
  expect(notCancelling.body.code).toBe('conflict');
  await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`);
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/reactivate`);
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ id: subscriptionId, status: 'active', cancel_at: null });
  await advance(app, shop, 32);
  const renewed = await get(shop, `/v1/subscriptions/${subscriptionId}`);
  expect(renewed.body.status).toBe('active');
});

test('switch options group plans by tier rank; cancelling or paused answers 409', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  const r = await get(shop, `/v1/subscriptions/${subscriptionId}/switch-options`);
  expect(r.status).toBe(200);
  expect(r.body.same_tier.map((o: { plan_id: string }) => o.plan_id)).toEqual([shop.ids.plans['gold-annual']]);
  expect(r.body.upgrades.map((o: { plan_id: string }) => o.plan_id)).toEqual([shop.ids.plans['platinum-monthly']]);
  expect(r.body.downgrades.map((o: { plan_id: string }) => o.plan_id)).toEqual([shop.ids.plans['silver-monthly']]);
  expect(r.body.same_tier[0]).toEqual({ plan_id: shop.ids.plans['gold-annual'], plan_name: 'Gold annual', tier_id: shop.ids.tiers.gold,
    amount_cents: 15000, currency: 'usd', interval: 'year', trial_days: 7 });
  await app.owner.query(`update billing.subscriptions set status = 'paused' where id = $1`, [subscriptionId]);
  expect((await get(shop, `/v1/subscriptions/${subscriptionId}/switch-options`)).status).toBe(409);
  await app.owner.query(`update billing.subscriptions set status = 'active' where id = $1`, [subscriptionId]);
  await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`);
  const cancelling = await get(shop, `/v1/subscriptions/${subscriptionId}/switch-options`);
  expect(cancelling.status).toBe(409);
  expect(cancelling.body.code).toBe('conflict');
});

test('an upgrade applies now with proration and entitlements follow', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  await advance(app, shop, 10);
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ id: subscriptionId, status: 'active', plan_id: shop.ids.plans['gold-monthly'], tier_id: shop.ids.tiers.gold,
    amount_cents: 1500, scheduled_plan_id: null });
  const { rows } = await app.owner.query('select proration_credit_cents as credit, proration_charge_cents as charge from billing.subscriptions where id = $1', [subscriptionId]);
  // About two thirds of the period is left: credit ~ 2/3 of 800, charge ~ 2/3 of 1500.
  expect(rows[0].credit).toBeGreaterThan(450);
  expect(rows[0].credit).toBeLessThan(620);
  expect(rows[0].charge).toBeGreaterThan(850);
  expect(rows[0].charge).toBeLessThan(1150);
  expect(await entitlementKeys(shop, memberId)).toEqual(['member-chat', 'vip-chat']);
});

test('a downgrade is scheduled for period end and applies then; cancel-scheduled-switch removes it', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  const none = await post(shop, `/v1/subscriptions/${subscriptionId}/cancel-scheduled-switch`);
  expect(none.status).toBe(409);
  const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['silver-monthly'] });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ plan_id: shop.ids.plans['gold-monthly'], scheduled_plan_id: shop.ids.plans['silver-monthly'] });
  expect(r.body.scheduled_at).toBe(r.body.current_period_end);
  const cancelled = await post(shop, `/v1/subscriptions/${subscriptionId}/cancel-scheduled-switch`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body).toMatchObject({ scheduled_plan_id: null, scheduled_at: null });
  await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['silver-monthly'] });
  await advance(app, shop, 32);
  const after = await get(shop, `/v1/subscriptions/${subscriptionId}`);
  expect(after.body).toMatchObject({ status: 'active', plan_id: shop.ids.plans['silver-monthly'], scheduled_plan_id: null });
  expect(await entitlementKeys(shop, memberId)).toEqual(['member-chat']);
});

test('a plan that is not among the switch options answers 422 invalid_request', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  for (const plan_id of [shop.ids.plans['silver-monthly'], shop.ids.plans['guide-once'], shop.ids.plans['retired-monthly'], 'plan_nope']) {
    const r = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ code: 'invalid_request', param: 'plan_id' });
  }
});

test('active subscriptions renew period after period', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const before = (await get(shop, `/v1/subscriptions/${subscriptionId}`)).body.current_period_end;
  await advance(app, shop, 65);
  const after = await get(shop, `/v1/subscriptions/${subscriptionId}`);
  expect(after.body.status).toBe('active');
  const months = (new Date(after.body.current_period_end).getTime() - new Date(before).getTime()) / 86400e3;
  expect(months).toBeGreaterThan(58);
  expect(new Date(after.body.current_period_end).getTime()).toBeGreaterThan(Date.now() + 65 * 86400e3);
});

test('every POST under /v1/subscriptions/{id} honours Idempotency-Key', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  const key = { 'idempotency-key': 'switch-1' };
  const a = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['platinum-monthly'] }, key);
  const b = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['platinum-monthly'] }, key);
  expect(b.headers.get('idempotent-replayed')).toBe('true');
  expect(b.body).toEqual(a.body);
  const reuse = await post(shop, `/v1/subscriptions/${subscriptionId}/switch`, { plan_id: shop.ids.plans['gold-annual'] }, key);
  expect(reuse.status).toBe(422);
  expect(reuse.body.code).toBe('idempotency_key_reuse');
  for (const action of ['cancel', 'reactivate', 'cancel-scheduled-switch']) {
    const k = { 'idempotency-key': `k-${action}` };
    const first = await post(shop, `/v1/subscriptions/${subscriptionId}/${action}`, undefined, k);
    const again = await post(shop, `/v1/subscriptions/${subscriptionId}/${action}`, undefined, k);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.status).toBe(first.status);
  }
});

test('another community\'s subscription is not_found', async () => {
  const shop = await createShop(app);
  const other = await createShop(app);
  const { subscriptionId } = await subscribe(app, other, 'silver');
  for (const action of ['cancel', 'reactivate', 'cancel-scheduled-switch']) {
    expect((await post(shop, `/v1/subscriptions/${subscriptionId}/${action}`)).status).toBe(404);
  }
  expect((await get(shop, `/v1/subscriptions/${subscriptionId}/switch-options`)).status).toBe(404);
});
