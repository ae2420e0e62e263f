// Spec: an id owned by another community answers 404 not_found, never 403, on every
// {id} route of the read API; lists and lookups never show another community's rows.
import { encodeCursor, filtersDigest } from '../../src/core/cursor';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed, subscriptionSource } from '../support/seed';

let app: TestApp;
let a: Tenant, b: Tenant;
const bIds: Record<string, string> = {};

beforeAll(async () => {
  app = await startApp();
  a = await createTenant(app.owner);
  b = await createTenant(app.owner);
  const seed = new Seed(app.owner, b.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  bIds.member = await seed.member({ discord: 'shared-uid', subject: ['ns', 'shared-ext'] });
  bIds.subscription = await seed.subscription(bIds.member, plan);
  bIds.purchase = await seed.purchase(bIds.member, plan);
  const ent = await seed.entitlement('chat');
  await seed.memberEntitlement(bIds.member, ent, { sources: [subscriptionSource(bIds.subscription, tier, plan)] });
});
afterAll(() => app.close());

test.each([
  ['/v1/subscriptions/{subscription}'],
  ['/v1/members/{member}'],
  ['/v1/members/{member}/entitlements'],
  ['/v1/purchases/{purchase}'],
])("GET %s with another community's id answers 404", async (template) => {
  const path = template.replace(/\{(\w+)\}/, (_m, k: string) => bIds[k]);
  const own = await call(app.url, 'GET', path, { key: b.key });
  expect(own.status).toBe(200); // the id is real
  const r = await call(app.url, 'GET', path, { key: a.key });
  expect(r.status).toBe(404);
  expect(r.body.code).toBe('not_found');
});

test("another community's identities are unknown to lookup and check", async () => {
  expect((await call(app.url, 'GET', '/v1/members/lookup?platform=discord&platform_uid=shared-uid', { key: a.key })).status).toBe(404);
  expect((await call(app.url, 'GET', '/v1/members/lookup?namespace=ns&external_user_id=shared-ext', { key: a.key })).status).toBe(404);
  const check = await call(app.url, 'GET', '/v1/entitlements/check?platform=discord&platform_uid=shared-uid', { key: a.key });
  expect(check.body).toEqual({ entitled: false, entitlements: [] });
  expect((await call(app.url, 'GET', '/v1/entitlements/check?platform=discord&platform_uid=shared-uid', { key: b.key })).body.entitled).toBe(true);
});

test("lists never show another community's rows, and filters by its ids find nothing", async () => {
  for (const path of ['/v1/subscriptions', '/v1/members', '/v1/purchases', '/v1/discounts', `/v1/subscriptions?member_id=${bIds.member}`]) {
    const r = await call(app.url, 'GET', path, { key: a.key });
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual([]);
  }
});

test("another community's cursor continues nothing of it", async () => {
  const page = await call(app.url, 'GET', '/v1/members?limit=1', { key: b.key });
  expect(page.body.data).toHaveLength(1);
  // A well-formed cursor of this list and filters, continuing after the highest id there is.
  const cursor = encodeCursor('mem_ffffffffffffffffffffffffff', { list: 'list_members', filters: filtersDigest({}) });
  const r = await call(app.url, 'GET', `/v1/members?cursor=${cursor}`, { key: a.key });
  expect(r.status).toBe(200);
  expect(r.body.data).toEqual([]);
});
