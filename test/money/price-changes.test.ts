// Issue 26 item 1: a price edit never re-prices existing subscribers
// (docs/decisions/price-changes-keep-existing-subscribers.md). A subscription pays its
// own price (subscriptions.price_cents); a plan's amount_cents edit reaches new buyers;
// `billing plans migrate` moves existing subscribers with notice, at each one's first
// period end on or after the notice date, with subscription.updated.
import type pg from 'pg';
import { applyCatalog } from '../../src/domain/catalog/catalog-file';
import { listPriceMigrations, migratePlanPrice } from '../../src/domain/catalog/price-migrations';
import { sandboxAdvance } from '../../src/domain/checkout/checkout-completion';
import { call, startApp, TestApp } from '../support/app';
import { catalog, createShop, externalSubject, Shop, subscribe } from '../support/shop';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

const DAY = 86400e3;
const FOREVER20 = { discounts: [{ code: 'FOREVER20', name: 'Forever 20', value_type: 'percent', percent_off: 20, duration: 'forever' }] };

/** The shop's catalog with silver-monthly at `cents` (what an operator's edited file applies). */
function withSilverAt(cents: number) {
  const c = catalog({ type: 'sandbox' }, FOREVER20);
  const silver = c.tiers!.find((t) => t.key === 'silver')!;
  silver.plans![0].amount_cents = cents;
  return c;
}

async function subscribeWith(shop: Shop, code: string | null) {
  const link = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: {
    tier_id: shop.ids.tiers.silver, plan_id: shop.ids.plans['silver-monthly'], subject: externalSubject('price'),
    ...(code ? { discount_code: code } : {}) } });
  expect(link.status).toBe(200);
  const page = await fetch(link.body.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
  await page.text();
  expect(page.status).toBe(303);
  const { rows } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  return rows[0].id;
}

/** The totals of a subscription's create and renewal invoices, in order. */
async function charged(subId: string): Promise<number[]> {
  const { rows } = await app.owner.query<{ total: string }>(
    `select total_cents as total from billing.invoices where subscription_id = $1
       and billing_reason in ('subscription_create', 'subscription_cycle') order by created_at, id`, [subId]);
  return rows.map((r) => Number(r.total));
}

async function row(subId: string) {
  const { rows } = await app.owner.query<{ end: Date; price: number; migration: string | null }>(
    'select current_period_end as end, price_cents as price, price_migration_id as migration from billing.subscriptions where id = $1', [subId]);
  return rows[0];
}

async function clock(shop: Shop): Promise<number> {
  const { rows } = await app.owner.query<{ t: Date }>('select billing.community_now($1) as t', [shop.communityId]);
  return rows[0].t.getTime();
}

/** Moves the sandbox clock to one minute past `t` (renewals due by then are applied). */
async function advanceTo(shop: Shop, t: number) {
  const days = (t - await clock(shop)) / DAY + 60e3 / DAY;
  if (days > 0) await sandboxAdvance(app.owner, shop.communityId, days);
}

async function mrr(pool: pg.Pool, communityId: string): Promise<number> {
  const { rows } = await pool.query<{ mrr: number }>(
    `select coalesce(sum(mrr_cents), 0)::int as mrr from analytics.mrr where community_id = $1`, [communityId]);
  return rows[0].mrr;
}

test('a catalog price edit leaves existing subscribers at the price they bought: renewal charges the old price, new buyers the new one', async () => {
  const shop = await createShop(app, { type: 'sandbox' }, FOREVER20);
  const plain = await subscribeWith(shop, null);
  const discounted = await subscribeWith(shop, 'FOREVER20');
  expect([await charged(plain), await charged(discounted)]).toEqual([[800], [640]]);

  // The operator edits the file: silver-monthly 800 -> 1000.
  const applied = await applyCatalog(app.owner, shop.communityId, withSilverAt(1000));
  expect(applied.changes).toEqual([{ kind: 'plan', key: 'silver-monthly', id: shop.ids.plans['silver-monthly'], action: 'updated', fields: ['amount_cents'] }]);
  expect(applied.price_changes).toEqual([{ plan: 'silver-monthly', plan_id: shop.ids.plans['silver-monthly'], from_cents: 800, to_cents: 1000,
    currency: 'usd', subscriptions: 2, pending_migration: 0, subscription_ids: [plain, discounted].sort() }]);

  const newcomer = await subscribeWith(shop, null);
  expect(await charged(newcomer)).toEqual([1000]);
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${plain}`, { key: shop.key });
  expect(sub.body.amount_cents).toBe(800);
  expect((await call(app.url, 'GET', `/v1/subscriptions/${newcomer}`, { key: shop.key })).body.amount_cents).toBe(1000);

  // Every renewal after the edit: the subscribers' own prices (not 1000, not 800 -> 960).
  await advanceTo(shop, (await row(newcomer)).end.getTime());
  await advanceTo(shop, (await row(newcomer)).end.getTime());
  expect([await charged(plain), await charged(discounted), await charged(newcomer)])
    .toEqual([[800, 800, 800], [640, 640, 640], [1000, 1000, 1000]]);
  // MRR is what is charged.
  expect(await mrr(app.owner, shop.communityId)).toBe(800 + 640 + 1000);
  // Applying the same file again changes nothing and still names them.
  const again = await applyCatalog(app.owner, shop.communityId, withSilverAt(1000));
  expect([again.changes, again.price_changes]).toEqual([[], []]);
});

test('a price migration applies at each subscriber\'s first period end on or after its notice date, with subscription.updated', async () => {
  const shop = await createShop(app, { type: 'sandbox' }, FOREVER20);
  const early = await subscribeWith(shop, null);
  await sandboxAdvance(app.owner, shop.communityId, 20);
  const late = await subscribeWith(shop, 'FOREVER20');
  await applyCatalog(app.owner, shop.communityId, withSilverAt(1000));

  // Notice until early's first period end plus 5 days: early's first renewal (before
  // the notice date) keeps 800; late's first renewal (20 days later) is after it.
  const earlyEnd = (await row(early)).end.getTime();
  const noticeDays = Math.ceil((earlyEnd + 5 * DAY - await clock(shop)) / DAY);
  const made = await migratePlanPrice(app.owner, shop.communityId, 'silver-monthly', noticeDays);
  expect(made).toMatchObject({ plan_key: 'silver-monthly', price_cents: 1000, currency: 'usd', notice_days: noticeDays,
    subscriptions: 2, pending_subscriptions: 2, subscription_ids: [early, late].sort(), cleared_subscriptions: 0 });
  const noticeEnds = new Date(made.notice_ends_at).getTime();
  expect(noticeEnds).toBeGreaterThan(earlyEnd);
  expect(noticeEnds).toBeLessThan((await row(late)).end.getTime());
  // Scheduling shows nowhere a consumer reads: no event, the price unchanged.
  expect((await row(early)).migration).toBe(made.id);
  expect((await call(app.url, 'GET', `/v1/subscriptions/${early}`, { key: shop.key })).body.amount_cents).toBe(800);

  await advanceTo(shop, earlyEnd);
  expect(await charged(early)).toEqual([800, 800]);
  expect((await row(early)).migration).toBe(made.id);

  await advanceTo(shop, (await row(late)).end.getTime());
  expect(await charged(late)).toEqual([640, 800]); // 1000 less 20%
  expect(await row(late)).toMatchObject({ price: 1000, migration: null });

  await advanceTo(shop, (await row(early)).end.getTime());
  expect(await charged(early)).toEqual([800, 800, 1000]);
  expect(await row(early)).toMatchObject({ price: 1000, migration: null });
  expect((await call(app.url, 'GET', `/v1/subscriptions/${early}`, { key: shop.key })).body.amount_cents).toBe(1000);

  // One subscription.updated per subscriber says the amount changed.
  const { rows: events } = await app.owner.query<{ id: string; prev: number }>(
    `select data->'subscription'->>'id' as id, (data->'previous_attributes'->>'amount_cents')::int as prev from billing.events
     where community_id = $1 and type = 'subscription.updated' and data->'previous_attributes' ? 'amount_cents'
       and (data->'subscription'->>'amount_cents')::int = 1000 order by id`, [shop.communityId]);
  expect(events.map((e) => [e.id, e.prev]).sort()).toEqual([[early, 800], [late, 800]].sort());
  const [listed] = await listPriceMigrations(app.owner, shop.communityId, 'silver-monthly');
  expect(listed).toMatchObject({ id: made.id, subscriptions: 2, pending_subscriptions: 0 });
  expect(await mrr(app.owner, shop.communityId)).toBe(1000 + 800);
});

test('a plan switch moves the subscriber to the new plan\'s current price and drops a pending migration; proration credits what they paid', async () => {
  const shop = await createShop(app);
  const { subscriptionId: sub } = await subscribe(app, shop, 'silver', 'silver-monthly');
  const raised = catalog();
  raised.tiers!.find((t) => t.key === 'silver')!.plans![0].amount_cents = 1000;
  raised.tiers!.find((t) => t.key === 'gold')!.plans![0].amount_cents = 1600;
  await applyCatalog(app.owner, shop.communityId, raised);
  await migratePlanPrice(app.owner, shop.communityId, shop.ids.plans['silver-monthly'], 60);
  await sandboxAdvance(app.owner, shop.communityId, 10);

  const switched = await call(app.url, 'POST', `/v1/subscriptions/${sub}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['gold-monthly'] } });
  expect(switched.status).toBe(200);
  expect(switched.body.amount_cents).toBe(1600);
  const { rows } = await app.owner.query<{ credit: number; charge: number; price: number; migration: string | null }>(
    `select proration_credit_cents as credit, proration_charge_cents as charge, price_cents as price, price_migration_id as migration
     from billing.subscriptions where id = $1`, [sub]);
  // Both over the same rest of the period: the credit is for 800 (what was paid), not 1000.
  expect(Math.abs(rows[0].credit - Math.round(rows[0].charge * 800 / 1600))).toBeLessThanOrEqual(1);
  expect(rows[0]).toMatchObject({ price: 1600, migration: null });
  await advanceTo(shop, (await row(sub)).end.getTime());
  expect((await charged(sub)).at(-1)).toBe(1600);
});

test('plans migrate refuses a one-time plan, an unknown plan and bad notice; the database refuses a negative price', async () => {
  const shop = await createShop(app);
  await expect(migratePlanPrice(app.owner, shop.communityId, 'guide-once', 30)).rejects.toMatchObject({ code: 'BL409' });
  await expect(migratePlanPrice(app.owner, shop.communityId, 'nope\u0000', 30)).rejects.toBeTruthy();
  await expect(migratePlanPrice(app.owner, shop.communityId, 'nope', 30)).rejects.toMatchObject({ code: 'BL404' });
  await expect(migratePlanPrice(app.owner, shop.communityId, 'silver-monthly', -1)).rejects.toMatchObject({ code: 'BL422' });
  const { subscriptionId } = await subscribe(app, shop, 'silver', 'silver-monthly');
  await expect(app.owner.query('update billing.subscriptions set price_cents = -1 where id = $1', [subscriptionId]))
    .rejects.toMatchObject({ code: '23514' });
  // Another community's plan is not found from this one.
  const other = await createShop(app);
  await expect(migratePlanPrice(app.owner, other.communityId, shop.ids.plans['silver-monthly'], 30)).rejects.toMatchObject({ code: 'BL404' });
});
