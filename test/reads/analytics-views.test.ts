// The analytics views (db/migrations/fixtures/functions/48-analytics.sql) and
// GET /v1/analytics/summary come from one definition (analytics.subscription_mrr):
// their figures agree, in SQL and through GraphQL.
import { createKey } from '../../src/domain/communities/community-admin';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';
import { asTenant } from '../support/tenant';

let app: TestApp;
let tenant: Tenant;
const daysAgo = (n: number) => new Date(Date.now() - n * 864e5).toISOString();
const day = (n: number) => daysAgo(n).slice(0, 10);

function asApi<T>(communityId: string, sql: string): Promise<T[]> {
  return asTenant(app.api, communityId, async (client) => (await client.query(sql)).rows as T[]);
}

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  const gold = await seed.tier({ name: 'Gold' });
  const silver = await seed.tier({ name: 'Silver' });
  const g = await seed.plan(gold, { amount: 3000 });
  const s = await seed.plan(silver, { amount: 1000 });
  const annual = await seed.plan(silver, { amount: 12000, interval: 'year' });
  await seed.subscription(await seed.member(), g, { createdAt: daysAgo(10) });
  await seed.subscription(await seed.member(), s, { createdAt: daysAgo(5) });
  await seed.subscription(await seed.member(), annual, { createdAt: daysAgo(50) });
  await seed.subscription(await seed.member(), s, { status: 'cancelled', createdAt: daysAgo(60), cancelledAt: daysAgo(20) });
  await seed.subscription(await seed.member(), s, { status: 'trialing' });
  const buyer = await seed.member();
  await seed.purchase(buyer, g, { amount: 500 });
  // Another community's rows never count.
  const other = await createTenant(app.owner);
  const oseed = new Seed(app.owner, other.communityId);
  await oseed.subscription(await oseed.member(), await oseed.plan(await oseed.tier(), { amount: 777 }));
});
afterAll(() => app.close());

test('the summary, MRR today, MRR by tier and daily MRR agree', async () => {
  const summary = (await call(app.url, 'GET', '/v1/analytics/summary', { key: tenant.key })).body;
  expect(summary).toMatchObject({ mrr_cents: 5000, currency: 'usd', active_subscribers: 4, recent_signups: 3 });
  const byTier = await asApi<{ tier_name: string; mrr_cents: number }>(tenant.communityId,
    'select tier_name, mrr_cents from analytics.mrr_by_tier order by tier_name');
  expect(byTier).toEqual([{ tier_name: 'Gold', mrr_cents: 3000 }, { tier_name: 'Silver', mrr_cents: 2000 }]);
  const daily = await asApi<{ day: string; mrr_cents: number }>(tenant.communityId,
    `select to_char(day, 'YYYY-MM-DD') as day, mrr_cents from analytics.mrr_daily order by day`);
  // Today is the summary's figure; before the newer subscriptions, only what billed then.
  expect(daily[daily.length - 1]).toEqual({ day: day(0), mrr_cents: summary.mrr_cents });
  expect(daily.find((d) => d.day === day(7))?.mrr_cents).toBe(3000 + 1000); // gold + annual
  expect(daily.find((d) => d.day === day(30))?.mrr_cents).toBe(1000 + 1000); // annual + not yet cancelled
  expect(daily.find((d) => d.day === day(55))?.mrr_cents).toBe(1000);        // only the cancelled one
  expect(daily.length).toBeGreaterThanOrEqual(55);
});

test('signups per day add up to the summary window; churn, trials and revenue follow the same rows', async () => {
  const summary = (await call(app.url, 'GET', '/v1/analytics/summary', { key: tenant.key })).body;
  const activity = await asApi<{ signups: number; cancels: number }>(tenant.communityId,
    `select coalesce(sum(signups), 0)::int as signups, coalesce(sum(cancels), 0)::int as cancels
     from analytics.daily_activity where day > (now() - interval '30 days')::date`);
  expect(activity[0]).toEqual({ signups: summary.recent_signups, cancels: summary.recent_cancels });
  const churn = await asApi<{ billing_at_start: number; churned: number; churn_rate: string }>(tenant.communityId,
    'select billing_at_start, churned, churn_rate from analytics.churn');
  expect(churn).toEqual([{ billing_at_start: 2, churned: 1, churn_rate: '0.5000' }]); // annual + cancelled; the cancelled one churned
  const trials = await asApi(tenant.communityId, 'select trials, trials_ended, converted from analytics.trial_conversion');
  expect(trials).toEqual([]); // the trialing row has no trial_end: not a trial with an end yet
  const revenue = await asApi<{ purchase_cents: number }>(tenant.communityId, 'select sum(purchase_cents)::int as purchase_cents from analytics.revenue_daily');
  expect(revenue[0].purchase_cents).toBe(500);
});

test('GraphQL reads the same analytics with analytics:read only', async () => {
  const body = (query: string) => JSON.stringify({ query });
  const q = '{ mrrDailies(last: 1, orderBy: DAY_ASC) { nodes { day mrrCents } } mrrByTiers(first: 10, orderBy: MRR_CENTS_DESC) { nodes { tierName mrrCents } } }';
  const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant.key}` }, body: body(q) });
  const json = await res.json();
  expect(json.data.mrrDailies.nodes).toEqual([{ day: day(0), mrrCents: '5000' }]);
  expect(json.data.mrrByTiers.nodes).toEqual([{ tierName: 'Gold', mrrCents: '3000' }, { tierName: 'Silver', mrrCents: '2000' }]);
  // A key of the same community without analytics:read reads no analytics rows: it is told the scope it lacks.
  const limited = await createKey(app.owner, tenant.communityId, ['members:read']);
  const denied = await (await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${limited.key}` }, body: body(q) })).json();
  expect(denied.data).toBeUndefined();
  expect(denied.errors.map((e: { extensions: { required_scope: string } }) => e.extensions.required_scope)).toEqual(['analytics:read']);
});
