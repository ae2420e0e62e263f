// Spec "States and transitions" for the states other tests reach least: a trialing
// subscription switches like an active one (rows "active or trialing"), and reactivate
// answers 409 conflict from every state but cancelling ("any other state answers 409").
// Every state is reached the way a client reaches it: checkout of a trial plan, pause,
// a declined renewal, a cancellation that ran out.
import { sandboxSetCard } from '../../src/domain/checkout/checkout-completion';
import { call, startApp, TestApp } from '../support/app';
import { advance, createShop, Shop, subscribe } from '../support/shop';

let app: TestApp;

beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

const post = (shop: Shop, path: string, body?: unknown) => call(app.url, 'POST', path, { key: shop.key, body });
const get = (shop: Shop, path: string) => call(app.url, 'GET', path, { key: shop.key });

/** A gold-annual subscription (7 trial days): trialing. */
async function trialing(shop: Shop): Promise<string> {
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-annual');
  expect((await get(shop, `/v1/subscriptions/${subscriptionId}`)).body.status).toBe('trialing');
  return subscriptionId;
}

test('a trialing subscription has switch options grouped like an active one', async () => {
  const shop = await createShop(app);
  const id = await trialing(shop);
  const r = await get(shop, `/v1/subscriptions/${id}/switch-options`);
  expect(r.status).toBe(200);
  expect(r.body.same_tier.map((o: { plan_id: string }) => o.plan_id)).toEqual([shop.ids.plans['gold-monthly']]);
  expect(r.body.upgrades.map((o: { plan_id: string }) => o.plan_id)).toEqual([shop.ids.plans['platinum-monthly']]);
  expect(r.body.downgrades.map((o: { plan_id: string }) => o.plan_id)).toEqual([shop.ids.plans['silver-monthly']]);
});

test('a trialing subscription switches: same tier and upgrades at once, still trialing; a downgrade is scheduled', async () => {
  const shop = await createShop(app);
  const id = await trialing(shop);
  const down = await post(shop, `/v1/subscriptions/${id}/switch`, { plan_id: shop.ids.plans['silver-monthly'] });
  expect(down.status).toBe(200);
  expect(down.body).toMatchObject({ status: 'trialing', plan_id: shop.ids.plans['gold-annual'], scheduled_plan_id: shop.ids.plans['silver-monthly'] });
  expect(down.body.scheduled_at).toEqual(expect.any(String));
  expect((await post(shop, `/v1/subscriptions/${id}/cancel-scheduled-switch`)).body).toMatchObject({ status: 'trialing', scheduled_plan_id: null });

  const same = await post(shop, `/v1/subscriptions/${id}/switch`, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(same.status).toBe(200);
  expect(same.body).toMatchObject({ status: 'trialing', plan_id: shop.ids.plans['gold-monthly'], scheduled_plan_id: null });
  const up = await post(shop, `/v1/subscriptions/${id}/switch`, { plan_id: shop.ids.plans['platinum-monthly'] });
  expect(up.status).toBe(200);
  expect(up.body).toMatchObject({ status: 'trialing', plan_id: shop.ids.plans['platinum-monthly'], tier_id: shop.ids.tiers.platinum, amount_cents: 3000 });
  expect((await get(shop, `/v1/subscriptions/${id}`)).body).toMatchObject({ status: 'trialing', plan_id: shop.ids.plans['platinum-monthly'] });
});

describe('reactivate answers 409 conflict from every state but cancelling, and changes nothing', () => {
  async function expectRefused(shop: Shop, id: string, status: string) {
    const before = (await get(shop, `/v1/subscriptions/${id}`)).body;
    expect(before.status).toBe(status);
    const r = await post(shop, `/v1/subscriptions/${id}/reactivate`);
    expect([r.status, r.body.code]).toEqual([409, 'conflict']);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    // Retrying fails the same way; the subscription is as it was.
    expect((await post(shop, `/v1/subscriptions/${id}/reactivate`)).status).toBe(409);
    expect((await get(shop, `/v1/subscriptions/${id}`)).body).toEqual(before);
  }

  test('trialing', async () => {
    const shop = await createShop(app);
    await expectRefused(shop, await trialing(shop), 'trialing');
  });

  test('paused', async () => {
    const shop = await createShop(app);
    const { subscriptionId } = await subscribe(app, shop, 'silver');
    expect((await post(shop, `/v1/subscriptions/${subscriptionId}/pause`, {})).status).toBe(200);
    await expectRefused(shop, subscriptionId, 'paused');
  });

  test('past_due', async () => {
    const shop = await createShop(app);
    const { subscriptionId } = await subscribe(app, shop, 'silver');
    await sandboxSetCard(app.owner, subscriptionId, true);
    await advance(app, shop, 30.5); // the renewal is declined; retries remain
    await expectRefused(shop, subscriptionId, 'past_due');
  });

  test('cancelling past its period end (paused through the period end, then cancelled)', async () => {
    // The period is over, so the spec's "period end reached" has happened: the
    // subscription ended, though the worker has not yet written it cancelled. Made
    // active again it would give access for a period nobody paid.
    const shop = await createShop(app);
    const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
    expect((await post(shop, `/v1/subscriptions/${subscriptionId}/pause`, {})).status).toBe(200);
    await advance(app, shop, 32);
    expect((await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`)).status).toBe(202);
    await expectRefused(shop, subscriptionId, 'cancelling');
    expect((await get(shop, `/v1/members/${memberId}/entitlements`)).body.data).toEqual([]);
  });

  test('cancelled', async () => {
    const shop = await createShop(app);
    const { subscriptionId } = await subscribe(app, shop, 'silver');
    expect((await post(shop, `/v1/subscriptions/${subscriptionId}/cancel`)).status).toBe(202);
    await advance(app, shop, 32);
    await expectRefused(shop, subscriptionId, 'cancelled');
  });
});
