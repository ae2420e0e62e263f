// Spec: GET /v1/purchases (keyset, newest first) and GET /v1/purchases/{id}.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let tier: string, plan: string, member: string;
const purchases: string[] = [];

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  tier = await seed.tier({ name: 'Lifetime', billingMode: 'one_time' });
  plan = await seed.plan(tier, { amount: 9900, interval: null, name: 'Once' });
  member = await seed.member({ discord: 'p-1' });
  purchases.push(await seed.purchase(member, plan, { amount: 9900 }));
  purchases.push(await seed.purchase(member, plan, { amount: 9900, accessExpiresAt: '2031-01-02T03:04:05.678Z' }));
  purchases.push(await seed.purchase(member, plan, { amount: 100 }));
});
afterAll(() => app.close());

test('purchases list newest first, paged by cursor', async () => {
  const first = await call(app.url, 'GET', '/v1/purchases?limit=2', { key: tenant.key });
  expect(first.status).toBe(200);
  expect(first.body.data.map((p: { id: string }) => p.id)).toEqual([purchases[2], purchases[1]]);
  const second = await call(app.url, 'GET', `/v1/purchases?limit=2&cursor=${first.body.next_cursor}`, { key: tenant.key });
  expect(second.body).toEqual({ data: [expect.objectContaining({ id: purchases[0] })], next_cursor: null });
});

test('a purchase has the spec fields with plan and tier names, nulls not omitted', async () => {
  const r = await call(app.url, 'GET', `/v1/purchases/${purchases[1]}`, { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({
    id: purchases[1], status: 'completed', plan_id: plan, plan_name: 'Once', tier_id: tier, tier_name: 'Lifetime',
    member_id: member, amount_cents: 9900, currency: 'usd', access_expires_at: '2031-01-02T03:04:05.678Z',
    paid_at: expect.stringMatching(/Z$/), created_at: expect.stringMatching(/Z$/),
  });
  expect((await call(app.url, 'GET', `/v1/purchases/${purchases[0]}`, { key: tenant.key })).body.access_expires_at).toBeNull();
});

test('an unknown purchase answers 404 and reading needs purchases:read', async () => {
  expect((await call(app.url, 'GET', '/v1/purchases/pur_00000000000000000000000000', { key: tenant.key })).status).toBe(404);
  const other = await createTenant(app.owner, ['members:read']);
  expect((await call(app.url, 'GET', '/v1/purchases', { key: other.key })).status).toBe(403);
  expect((await call(app.url, 'GET', `/v1/purchases/${purchases[0]}`, { key: other.key })).status).toBe(403);
});
