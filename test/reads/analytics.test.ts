// Spec: GET /v1/analytics/summary. Decisions (docs/decisions/analytics-summary.md): MRR counts active,
// past_due and cancelling subscriptions (not trialing), annual plans as amount/12;
// the summary's currency is the most used one; recent_* cover the last 30 days by
// billing.now(). The analytics.* views give operators' SQL sessions the same figures.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';
import { asTenant } from '../support/tenant';

let app: TestApp;
let tenant: Tenant;
let other: Tenant;

const daysAgo = (n: number) => new Date(Date.now() - n * 864e5).toISOString();

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  other = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  const tier = await seed.tier();
  const monthly = await seed.plan(tier, { amount: 1000 });
  const annual = await seed.plan(tier, { amount: 12010, interval: 'year' }); // 1000.83 a month
  const euro = await seed.plan(tier, { amount: 3000, currency: 'eur' });
  const m = async () => seed.member();
  const a = await m();
  await seed.subscription(a, monthly, { createdAt: daysAgo(40) });        // bills 1000
  await seed.subscription(a, annual, { createdAt: daysAgo(40) });         // bills 1000.83, same member
  await seed.subscription(await m(), monthly, { status: 'past_due', createdAt: daysAgo(35) }); // bills 1000
  await seed.subscription(await m(), monthly, { status: 'cancelling', cancelledAt: daysAgo(3) }); // bills 1000; cancel
  await seed.subscription(await m(), monthly, { status: 'trialing' });   // subscriber, no MRR
  await seed.subscription(await m(), monthly, { status: 'paused', createdAt: daysAgo(60) });
  await seed.subscription(await m(), monthly, { status: 'cancelled', createdAt: daysAgo(90), cancelledAt: daysAgo(45) });
  await seed.subscription(await m(), euro);                               // bills 3000 eur
  // Another community's rows never count.
  const oseed = new Seed(app.owner, other.communityId);
  const ot = await oseed.tier();
  await oseed.subscription(await oseed.member(), await oseed.plan(ot, { amount: 777 }));
});
afterAll(() => app.close());

test('the summary counts billing subscriptions in the main currency and the 30-day window', async () => {
  const r = await call(app.url, 'GET', '/v1/analytics/summary', { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({
    mrr_cents: 4001, currency: 'usd', active_subscribers: 5, recent_signups: 3, recent_cancels: 1,
    window_start: expect.stringMatching(/Z$/),
    mrr_by_currency: [{ currency: 'eur', mrr_cents: 3000 }, { currency: 'usd', mrr_cents: 4001 }],
    // In the window (usd): the cancelling one started billing today; the paused one,
    // written paused today, billed from 60 days ago until now (its first movements come
    // from its own dates).
    mrr_movements: { new_cents: 1000, expansion_cents: 0, contraction_cents: 0, churn_cents: -1000, reactivation_cents: 0, net_cents: 0 },
  });
});

test('the window follows the community clock (billing.now)', async () => {
  await app.owner.query(`update billing.communities set clock_offset = interval '20 days' where id = $1`, [tenant.communityId]);
  try {
    const r = await call(app.url, 'GET', '/v1/analytics/summary', { key: tenant.key });
    // Now 20 days ahead: the window is 10 to -20 days ago; signups made today still count, the 35/40-day ones do not.
    expect(r.body).toMatchObject({ recent_signups: 3, recent_cancels: 1 });
    await app.owner.query(`update billing.communities set clock_offset = interval '40 days' where id = $1`, [tenant.communityId]);
    const later = await call(app.url, 'GET', '/v1/analytics/summary', { key: tenant.key });
    expect(later.body).toMatchObject({ recent_signups: 0, recent_cancels: 0 });
  } finally {
    await app.owner.query(`update billing.communities set clock_offset = '0' where id = $1`, [tenant.communityId]);
  }
});

test('an empty community answers zeros and a null currency', async () => {
  const empty = await createTenant(app.owner);
  const r = await call(app.url, 'GET', '/v1/analytics/summary', { key: empty.key });
  expect(r.body).toMatchObject({ mrr_cents: 0, currency: null, active_subscribers: 0, recent_signups: 0, recent_cancels: 0, mrr_by_currency: [] });
});

test('analytics views show a SQL session only its own community, with the same figures', async () => {
  await asTenant(app.api, tenant.communityId, async (client) => {
    const mrr = await client.query('select currency, mrr_cents from analytics.mrr order by currency');
    expect(mrr.rows).toEqual([{ currency: 'eur', mrr_cents: 3000 }, { currency: 'usd', mrr_cents: 4001 }]);
    const subs = await client.query('select active_subscribers from analytics.subscribers');
    expect(subs.rows).toEqual([{ active_subscribers: 5 }]);
    const recent = await client.query('select recent_signups, recent_cancels from analytics.recent_activity');
    expect(recent.rows).toEqual([{ recent_signups: 3, recent_cancels: 1 }]);
    // No community (an empty setting): nothing.
    await client.query(`select set_config('app.community_id', '', true)`);
    expect((await client.query('select * from analytics.mrr')).rows).toEqual([]);
  });
});

test('the summary needs analytics:read', async () => {
  const limited = await createTenant(app.owner, ['members:read']);
  expect((await call(app.url, 'GET', '/v1/analytics/summary', { key: limited.key })).status).toBe(403);
});
