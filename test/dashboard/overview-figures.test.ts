// The overview's figures (billing_private.analytics_overview, 96-dashboard.sql: one read
// of the subscriptions) equal what the analytics views define, figure by figure, over a
// history with signups on several days, trials, an annual plan, a second currency, a
// discount that runs out, switches, cancels at period end that end, a decline into
// past_due, and the clock moving on; and another community's figures never appear.
import type pg from 'pg';
import { call, startApp, TestApp } from '../support/app';
import { advance, createShop, Shop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The figures as the views give them, read as the API role reads them (its tenancy). */
async function fromViews(client: pg.PoolClient, communityId: string, days: number): Promise<Json> {
  const one = async (sql: string, values: unknown[] = []) => (await client.query(sql, values)).rows;
  const mrr = await one(`select currency, mrr_cents::int, billing_subscriptions::int from analytics.mrr where community_id = $1
    order by billing_subscriptions desc, mrr_cents desc, currency`, [communityId]);
  const main = mrr[0] ?? null;
  const [subs] = await one('select active_subscribers::int from analytics.subscribers where community_id = $1', [communityId]);
  const [recent] = await one(`select recent_signups::int, recent_cancels::int, billing.iso(window_start) as window_start
    from analytics.recent_activity where community_id = $1`, [communityId]);
  const fallback = main ? null : (await one(`select p.currency from billing.plans p where p.community_id = $1 and p.active
    group by p.currency order by count(*) desc, p.currency limit 1`, [communityId]))[0]?.currency ?? null;
  const dayRows = await one(`select d.day::text as day from analytics.days d where d.community_id = $1
    and d.day > (billing.now() at time zone 'UTC')::date - $2::int order by d.day`, [communityId, days]);
  const mrrDaily = new Map((await one(`select day::text, mrr_cents::int from analytics.mrr_daily where community_id = $1 and currency = $2`,
    [communityId, main?.currency ?? null])).map((r) => [r.day, r.mrr_cents]));
  const activity = new Map((await one('select day::text, signups::int, cancels::int from analytics.daily_activity where community_id = $1',
    [communityId])).map((r) => [r.day, r]));
  const kinds = ['new', 'expansion', 'contraction', 'churn', 'reactivation'] as const;
  const movements = new Map((await one(`select day::text, ${kinds.map((k) => `${k}_cents::int`).join(', ')}
    from analytics.mrr_movements_daily where community_id = $1 and currency = $2`, [communityId, main?.currency ?? null])).map((r) => [r.day, r]));
  const zeroKinds = Object.fromEntries(kinds.map((k) => [`${k}_cents`, 0]));
  // The summary's window: the movements of its 30 days, each kind's exact sum rounded once.
  const [recentMoves] = await one(`select ${kinds.map((k) => `round(coalesce(sum(to_cents - from_cents) filter (where kind = '${k}'), 0))::int as ${k}_cents`).join(', ')},
      round(coalesce(sum(to_cents - from_cents), 0))::int as net_cents
    from billing.mrr_movements where community_id = $1 and currency = $2 and day >= $3::date and day <= (billing.now() at time zone 'UTC')::date`,
    [communityId, main?.currency ?? null, recent.window_start]);
  // Months: this one and the 11 before; a month without movements keeps the MRR it opened with.
  const monthRows = await one(`select month::text, opening_mrr_cents::int, ${kinds.map((k) => `${k}_cents::int`).join(', ')}, net_cents::int,
    closing_mrr_cents::int from analytics.mrr_movements_monthly where community_id = $1 and currency = $2 order by month`, [communityId, main?.currency ?? null]);
  const [{ first_month }] = await one(`select to_char(date_trunc('month', (billing.now() at time zone 'UTC')::date) - interval '11 months', 'YYYY-MM-DD') as first_month`);
  const months: Json[] = [];
  let closing = 0;
  for (const r of monthRows) if (r.month < first_month) closing = r.closing_mrr_cents;
  for (let i = 0; i < 12; i++) {
    const [y, m] = first_month.split('-').map(Number);
    const d = new Date(Date.UTC(y, m - 1 + i, 1)).toISOString().slice(0, 10);
    const row = monthRows.find((r) => r.month === d) ?? { month: d, opening_mrr_cents: closing, ...zeroKinds, net_cents: 0, closing_mrr_cents: closing };
    months.push(row);
    closing = row.closing_mrr_cents;
  }
  const [{ past_due }] = await one(`select count(*)::int as past_due from billing.subscriptions where community_id = $1 and status = 'past_due'`, [communityId]);
  return {
    summary: {
      mrr_cents: main?.mrr_cents ?? 0,
      currency: main?.currency ?? fallback,
      active_subscribers: subs?.active_subscribers ?? 0,
      recent_signups: recent.recent_signups,
      recent_cancels: recent.recent_cancels,
      window_start: recent.window_start,
      mrr_by_currency: [...mrr].sort((a, b) => (a.currency < b.currency ? -1 : 1)).map((m) => ({ currency: m.currency, mrr_cents: m.mrr_cents })),
      mrr_movements: recentMoves,
    },
    series: {
      currency: main?.currency ?? null,
      past_due,
      days: dayRows.map(({ day }) => ({
        day, mrr_cents: mrrDaily.get(day) ?? 0, signups: activity.get(day)?.signups ?? 0, cancels: activity.get(day)?.cancels ?? 0,
        ...Object.fromEntries(kinds.map((k) => [`${k}_cents`, movements.get(day)?.[`${k}_cents`] ?? 0])),
      })),
      months,
    },
  };
}

let pastDueSeen = 0;

async function compare(shop: Shop): Promise<Json> {
  const { overview30, overview90, summary, series, views30, views90 } = await asTenant(app.api, shop.communityId, async (client) => ({
    overview30: (await client.query(`select billing_api.analytics_overview('{"days": 30}') as r`)).rows[0].r,
    overview90: (await client.query(`select billing_api.analytics_overview('{"days": 90}') as r`)).rows[0].r,
    summary: (await client.query(`select billing_api.analytics_summary('{}') as r`)).rows[0].r,
    series: (await client.query(`select billing_api.analytics_series('{"days": 90}') as r`)).rows[0].r,
    views30: await fromViews(client, shop.communityId, 30),
    views90: await fromViews(client, shop.communityId, 90),
  }), { scopes: 'analytics:read', isolation: 'repeatable read' });
  expect(overview30).toEqual(views30);
  expect(overview90).toEqual(views90);
  expect(summary).toEqual(views90.summary);
  expect(series).toEqual(views90.series);
  pastDueSeen = Math.max(pastDueSeen, overview90.series.past_due);
  return overview90;
}

test('the overview equals the analytics views over a varied history, and stays within its community', async () => {
  const shop = await createShop(app, { type: 'sandbox' }, {
    discounts: [
      { code: 'WELCOME10', name: 'Welcome', value_type: 'percent', percent_off: 10, duration: 'once', use_limit: 100, tiers: ['gold'] },
      { code: 'TWOMONTHS', name: 'Two months off 3', value_type: 'amount', amount_off_cents: 300, currency: 'usd', duration: 'repeating', duration_months: 2 },
    ],
  });
  const other = await createShop(app);
  // Nothing yet: no MRR, the plans' currency, zeros every day.
  const empty = await compare(shop);
  expect(empty.summary).toMatchObject({ mrr_cents: 0, currency: 'usd', active_subscribers: 0 });
  await subscribe(app, other, 'platinum', 'platinum-monthly'); // never in shop's figures

  const { rows: [eur] } = await app.owner.query<{ id: string }>(
    `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
     values ($1, $2, 'silver-eur', 'Silver (EUR)', 700, 'eur', 'month') returning id`, [shop.communityId, shop.ids.tiers.silver]);
  shop.ids.plans['silver-eur'] = eur.id;
  const subs: { subscriptionId: string; memberId: string }[] = [];
  const cancel = (id: string) => call(app.url, 'POST', `/v1/subscriptions/${id}/cancel`, { key: shop.key });
  for (let day = 0; day < 5; day++) {
    subs.push(await subscribe(app, shop, 'gold', 'gold-monthly'));
    subs.push(await subscribe(app, shop, 'silver', 'silver-monthly'));
    if (day % 2 === 0) subs.push(await subscribe(app, shop, 'gold', 'gold-annual')); // a 7-day trial, then yearly
    if (day === 1) subs.push(await subscribe(app, shop, 'silver', 'silver-eur'));
    if (day === 2) {
      const link = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: {
        tier_id: shop.ids.tiers.platinum, plan_id: shop.ids.plans['platinum-monthly'], discount_code: 'TWOMONTHS',
        subject: { external: { namespace: 'app', external_user_id: `discounted-${Date.now()}` } } } });
      expect(link.status).toBe(200);
      const paid = await fetch(link.body.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
      expect(paid.status).toBe(303);
    }
    if (day === 3) {
      expect((await cancel(subs[0].subscriptionId)).status).toBe(202);
      expect((await cancel(subs[3].subscriptionId)).status).toBe(202);
      const up = await call(app.url, 'POST', `/v1/subscriptions/${subs[1].subscriptionId}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['platinum-monthly'] } });
      expect(up.status).toBe(200);
    }
    await advance(app, shop, 1);
    await compare(shop);
  }
  const early = await compare(shop);
  expect(early.series.days.some((d: Json) => d.cancels > 0)).toBe(true);
  expect(early.series.days.filter((d: Json) => d.signups > 0).length).toBe(5);
  // A card that declines: the next renewal leaves it past_due.
  await app.owner.query(`insert into billing.sandbox_cards (community_id, subscription_id, declines) values ($1, $2, true)`,
    [shop.communityId, subs[4].subscriptionId]);
  // Past period ends: cancels end, trials convert, renewals (the discount's months run out), a decline.
  // Day by day for five weeks: the 30-day series' first day passes over every day
  // something started or stopped billing (the edges of its running sum).
  for (let day = 0; day < 35; day++) {
    await advance(app, shop, 1);
    await compare(shop);
  }
  for (const days of [31, 31, 31]) {
    await advance(app, shop, days);
    await compare(shop);
  }
  const last = await compare(shop);
  expect(last.summary.mrr_by_currency.map((m: Json) => m.currency)).toEqual(['eur', 'usd']);
  expect(pastDueSeen).toBeGreaterThan(0);
  expect(last.series.days.filter((d: Json) => d.mrr_cents > 0).length).toBeGreaterThan(20);
}, 180_000); // some 45 comparisons, each reading the views twice: over 60 s on a busy machine
