// The overview's rollup (billing_private.analytics_facts and analytics_deltas,
// 48-analytics.sql): writers append what changed, the worker folds it, the overview sums
// it. These tests hold it to a rebuild from the subscriptions after concurrent writers
// and folds, to the views after the changes that do not touch a subscription row (a
// 'once' discount spent by an invoice; a plan's price, which changes no subscriber's),
// and check that two writers of one community never wait on each other for it.
import type pg from 'pg';
import { call, startApp, TestApp } from '../support/app';
import { advance, createShop, externalSubject, pay, Shop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function asApi<T>(communityId: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  return asTenant(app.api, communityId, fn, { scopes: 'analytics:read', commit: true });
}

const overview = (communityId: string): Promise<Json> =>
  asApi(communityId, async (c) => (await c.query(`select billing_api.analytics_overview('{"days": 90}') as r`)).rows[0].r);

/** Figures straight from the views and the subscriptions (no rollup involved). */
async function fromViews(communityId: string): Promise<Json> {
  return asApi(communityId, async (c) => {
    const mrr = (await c.query(`select currency, mrr_cents::int from analytics.mrr where community_id = $1 order by currency`, [communityId])).rows;
    const subs = (await c.query('select active_subscribers::int as n from analytics.subscribers where community_id = $1', [communityId])).rows[0]?.n ?? 0;
    const pastDue = (await c.query(`select count(*)::int as n from billing.subscriptions where community_id = $1 and status = 'past_due'`, [communityId])).rows[0].n;
    return { mrr_by_currency: mrr, active_subscribers: subs, past_due: pastDue };
  });
}

const rows = async (communityId: string): Promise<number> =>
  (await app.owner.query<{ n: number }>('select count(*)::int as n from billing_private.analytics_deltas where community_id = $1', [communityId])).rows[0].n;

test('concurrent writers and folds lose nothing: the overview equals a rebuild from the subscriptions', async () => {
  const shop = await createShop(app);
  const subs: { subscriptionId: string }[] = [];
  for (let i = 0; i < 6; i++) subs.push(await subscribe(app, shop, i % 2 ? 'gold' : 'silver', i % 2 ? 'gold-monthly' : undefined));
  const before = await rows(shop.communityId);
  expect(before).toBeGreaterThan(0);

  // Eight clients at once: new members, cancels, reactivations, switches and pauses on the
  // same subscriptions, while the worker's fold runs again and again.
  let folding = true;
  const folds = (async () => {
    let n = 0;
    while (folding) {
      await app.owner.query('select billing_private.analytics_compact(0)');
      n++;
    }
    return n;
  })();
  const ops = (k: number) => async () => {
    for (let round = 0; round < 4; round++) {
      const s = subs[(k + round) % subs.length].subscriptionId;
      switch ((k + round) % 5) {
        case 0: await subscribe(app, shop, 'gold', 'gold-monthly'); break;
        case 1: await call(app.url, 'POST', `/v1/subscriptions/${s}/cancel`, { key: shop.key }); break;
        case 2: await call(app.url, 'POST', `/v1/subscriptions/${s}/reactivate`, { key: shop.key }); break;
        case 3: await call(app.url, 'POST', `/v1/subscriptions/${s}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['platinum-monthly'] } }); break;
        default: await call(app.url, 'POST', `/v1/subscriptions/${s}/pause`, { key: shop.key }); break;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, (_, k) => ops(k)()));
  folding = false;
  expect(await folds).toBeGreaterThan(0);
  await advance(app, shop, 40); // renewals, period ends, resumes: more writers' statements

  const live = await overview(shop.communityId);
  const views = await fromViews(shop.communityId);
  expect(live.summary.mrr_by_currency).toEqual(views.mrr_by_currency);
  expect(live.summary.active_subscribers).toBe(views.active_subscribers);
  expect(live.series.past_due).toBe(views.past_due);
  expect(live.summary.mrr_cents).toBeGreaterThan(0);

  await app.owner.query('select billing_private.analytics_rebuild($1)', [shop.communityId]);
  expect(await overview(shop.communityId)).toEqual(live);
}, 120_000);

test('a fold leaves one row per day and currency and the same figures', async () => {
  const shop = await createShop(app);
  for (let i = 0; i < 4; i++) await subscribe(app, shop, 'silver');
  const first = await subscribe(app, shop, 'gold', 'gold-monthly');
  await call(app.url, 'POST', `/v1/subscriptions/${first.subscriptionId}/cancel`, { key: shop.key });
  const unfolded = await overview(shop.communityId);
  const n = await rows(shop.communityId);
  await app.owner.query('select billing_private.analytics_compact(0, $1)', [shop.communityId]);
  const keys = await app.owner.query<{ n: number; keys: number }>(
    `select count(*)::int as n, count(distinct (day, currency))::int as keys from billing_private.analytics_deltas where community_id = $1`,
    [shop.communityId]);
  expect(keys.rows[0].n).toBe(keys.rows[0].keys);
  expect(keys.rows[0].n).toBeLessThan(n);
  expect(await overview(shop.communityId)).toEqual(unfolded);
});

test('two writers of one community never wait on each other for the rollup', async () => {
  const shop = await createShop(app);
  const a = await subscribe(app, shop, 'silver');
  const b = await subscribe(app, shop, 'silver');
  const t1 = await app.owner.connect();
  const t2 = await app.owner.connect();
  try {
    // Both change what counts on the same day (today's cancels, MRR's end), in one currency.
    await t1.query('begin');
    await t1.query(`update billing.subscriptions set status = 'cancelled', cancelled_at = now(), updated_at = now()
      where community_id = $1 and id = $2`, [shop.communityId, a.subscriptionId]);
    await t2.query('begin');
    await t2.query(`set local lock_timeout = '2s'`);
    await t2.query(`update billing.subscriptions set status = 'cancelled', cancelled_at = now(), updated_at = now()
      where community_id = $1 and id = $2`, [shop.communityId, b.subscriptionId]);
    await t2.query('commit');
    await t1.query('commit');
  } finally {
    t1.release();
    t2.release();
  }
  const live = await overview(shop.communityId);
  expect(live.summary.mrr_cents).toBe(0);
  expect(live.summary.recent_cancels).toBe(2);
  expect(live.summary.active_subscribers).toBe(0);
});

test('what changes a subscription\'s figures without writing it: a spent once discount; a plan\'s price does not', async () => {
  const shop = await createShop(app);
  // WELCOME10 is a 'once' discount: the checkout's first invoice spends it, after the
  // subscription row was written, so MRR is the full price from then on.
  const link = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: {
    tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], discount_code: 'WELCOME10', subject: externalSubject() } });
  expect(link.status).toBe(200);
  expect((await pay(link.body.url)).status).toBe(303);
  expect((await fromViews(shop.communityId)).mrr_by_currency).toEqual([{ currency: 'usd', mrr_cents: 1500 }]);
  expect((await overview(shop.communityId)).summary.mrr_cents).toBe(1500);

  await subscribe(app, shop, 'silver');
  await advance(app, shop, 2);
  // A plan's price edit reaches new buyers only: the silver subscriber still pays 800
  // (subscriptions.price_cents), so MRR does not move
  // (docs/decisions/price-changes-keep-existing-subscribers.md).
  await app.owner.query(`update billing.plans set amount_cents = 1000 where community_id = $1 and id = $2`,
    [shop.communityId, shop.ids.plans['silver-monthly']]);
  const views = await fromViews(shop.communityId);
  expect(views.mrr_by_currency).toEqual([{ currency: 'usd', mrr_cents: 2300 }]);
  const live = await overview(shop.communityId);
  expect(live.summary.mrr_by_currency).toEqual(views.mrr_by_currency);
  // Yesterday and today alike: a plan price edit moves no subscriber's MRR, so it is
  // no expansion either (analytics.mrr_daily and the overview agree).
  const yesterday = await asApi(shop.communityId, async (c) => (await c.query(
    `select mrr_cents::int from analytics.mrr_daily where community_id = $1 and currency = 'usd' and day = $2::date`,
    [shop.communityId, live.series.days.at(-2).day])).rows[0].mrr_cents);
  expect(yesterday).toBe(2300);
  expect(live.series.days.at(-2).mrr_cents).toBe(yesterday);
  expect(live.series.days.at(-1)).toMatchObject({ mrr_cents: 2300, expansion_cents: 0 });
});

test('a community written with triggers off is rebuilt to the same figures as one written through them', async () => {
  const shop: Shop = await createShop(app);
  for (let i = 0; i < 3; i++) await subscribe(app, shop, i ? 'silver' : 'gold', i ? undefined : 'gold-monthly');
  const live = await overview(shop.communityId);
  await app.owner.query('delete from billing_private.analytics_facts where community_id = $1', [shop.communityId]);
  await app.owner.query('delete from billing_private.analytics_deltas where community_id = $1', [shop.communityId]);
  expect((await overview(shop.communityId)).summary.mrr_cents).toBe(0);
  await app.owner.query('select billing_private.analytics_rebuild($1)', [shop.communityId]);
  expect(await overview(shop.communityId)).toEqual(live);
});

test('an update of any column the figures read reaches the rollup', async () => {
  const shop = await createShop(app);
  const a = await subscribe(app, shop, 'silver');
  const b = await subscribe(app, shop, 'gold', 'gold-monthly');
  await advance(app, shop, 3);
  const { rows: [gold] } = await app.owner.query<{ id: string }>(`select id from billing.plans where community_id = $1 and key = 'gold-monthly'`, [shop.communityId]);
  // Each a statement the update trigger must not skip; after each, the live rollup
  // equals one rebuilt from the subscriptions.
  const changes = [
    `created_at = created_at - interval '2 days'`,
    `status = 'cancelling', cancel_requested_at = null, cancelled_at = null`,
    `updated_at = updated_at - interval '1 day'`,          // a cancelling row's cancel is dated by it
    `status = 'paused'`,
    `updated_at = updated_at - interval '1 day'`,          // and a paused row's end of billing
    `status = 'trialing', trial_end = billing.now() + interval '3 days'`,
    `trial_end = billing.now() + interval '5 days'`,
    `status = 'active', trial_end = billing.now() - interval '10 days'`,
    `plan_id = '${gold.id}'`,
    `member_id = '${b.memberId}'`,
    `status = 'cancelled', cancelled_at = billing.now() - interval '1 day'`,
    `cancelled_at = billing.now() - interval '2 days'`,
  ];
  for (const set of changes) {
    await app.owner.query(`update billing.subscriptions set ${set} where community_id = $1 and id = $2`, [shop.communityId, a.subscriptionId]);
    const live = await overview(shop.communityId);
    await app.owner.query('select billing_private.analytics_rebuild($1)', [shop.communityId]);
    expect([set, await overview(shop.communityId)]).toEqual([set, live]);
  }
});

test('the recent window is 30 UTC days whatever the session time zone (a daylight saving change inside it)', async () => {
  const shop = await createShop(app);
  const sub = await subscribe(app, shop, 'silver');
  // The community's now: 2026-11-20 12:00 UTC; New York left daylight saving on 2026-11-01,
  // inside the window (2026-10-22 to the end of 2026-11-20, UTC).
  await app.owner.query(`update billing.communities set clock_offset = '2026-11-20T12:00:00Z'::timestamptz - now() where id = $1`, [shop.communityId]);
  // A signup at 00:30 UTC the next day: after the window, an hour that '30 days' added in
  // New York's time would reach.
  await app.owner.query(`update billing.subscriptions set created_at = '2026-11-21T00:30:00Z' where community_id = $1 and id = $2`,
    [shop.communityId, sub.subscriptionId]);
  const inZone = await asApi(shop.communityId, async (c) => {
    await c.query(`set local timezone = 'America/New_York'`);
    const view = (await c.query('select recent_signups::int, billing.iso(window_start) as start from analytics.recent_activity where community_id = $1',
      [shop.communityId])).rows[0];
    const summary = (await c.query(`select billing_api.analytics_summary('{}') as r`)).rows[0].r;
    return { view, summary };
  });
  expect(inZone.view).toEqual({ recent_signups: 0, start: '2026-10-22T00:00:00.000Z' });
  expect(inZone.summary).toMatchObject({ recent_signups: 0, window_start: '2026-10-22T00:00:00.000Z' });
});
