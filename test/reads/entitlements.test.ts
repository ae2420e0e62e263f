// Spec: GET /v1/entitlements/check (exactly one identity pair; optional tier_id).
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed, subscriptionSource } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let silverMember: string, lapsed: string;
let silver: string, platinum: string, silverPlan: string, chat: string, silverRoom: string;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  silver = await seed.tier({ name: 'Silver' });
  platinum = await seed.tier({ name: 'Platinum' });
  silverPlan = await seed.plan(silver);
  await seed.plan(platinum, { amount: 5000 });
  // Both tiers grant the same chat; only Silver grants its room.
  chat = await seed.entitlement('chat');
  silverRoom = await seed.entitlement('silver-room');
  silverMember = await seed.member({ discord: 's-1', subject: ['crm', 'c-1'] });
  lapsed = await seed.member({ discord: 'l-1' });
  const sub = await seed.subscription(silverMember, silverPlan);
  await seed.memberEntitlement(silverMember, chat, { sources: [subscriptionSource(sub, silver, silverPlan)] });
  await seed.memberEntitlement(silverMember, silverRoom, { sources: [subscriptionSource(sub, silver, silverPlan)] });
  await seed.memberEntitlement(lapsed, chat, { status: 'inactive' });
});
afterAll(() => app.close());

const check = (q: string) => call(app.url, 'GET', `/v1/entitlements/check?${q}`, { key: tenant.key });

test('a member with an active entitlement is entitled, by platform or by external subject', async () => {
  for (const q of ['platform=discord&platform_uid=s-1', 'namespace=crm&external_user_id=c-1']) {
    const r = await check(q);
    expect(r.status).toBe(200);
    expect(r.body.entitled).toBe(true);
    expect(r.body.entitlements.map((e: { key: string }) => e.key).sort()).toEqual(['chat', 'silver-room']);
  }
});

test('an unknown identity is simply not entitled', async () => {
  expect((await check('platform=discord&platform_uid=ghost')).body).toEqual({ entitled: false, entitlements: [] });
  expect((await check('namespace=crm&external_user_id=ghost')).body).toEqual({ entitled: false, entitlements: [] });
});

test('a member whose entitlements are all inactive is not entitled', async () => {
  expect((await check('platform=discord&platform_uid=l-1')).body).toEqual({ entitled: false, entitlements: [] });
});

test('tier_id: entitled only through a source on that tier, listing only those entitlements', async () => {
  const viaSilver = await check(`platform=discord&platform_uid=s-1&tier_id=${silver}`);
  expect(viaSilver.body.entitled).toBe(true);
  expect(viaSilver.body.entitlements).toHaveLength(2);
  // Platinum grants the same chat, but this member holds it through Silver.
  expect((await check(`platform=discord&platform_uid=s-1&tier_id=${platinum}`)).body).toEqual({ entitled: false, entitlements: [] });
  expect((await check('platform=discord&platform_uid=s-1&tier_id=tier_00000000000000000000000000')).body.entitled).toBe(false);
});

test('tier_id lists only the entitlements a source of that tier supports', async () => {
  const seed = new Seed(app.owner, tenant.communityId);
  const both = await seed.member({ telegram: 'both' });
  const platPlan = await seed.plan(platinum, { amount: 9000 });
  const s1 = await seed.subscription(both, silverPlan);
  const s2 = await seed.subscription(both, platPlan);
  await seed.memberEntitlement(both, chat, { sources: [subscriptionSource(s1, silver, silverPlan), subscriptionSource(s2, platinum, platPlan)] });
  await seed.memberEntitlement(both, silverRoom, { sources: [subscriptionSource(s1, silver, silverPlan)] });
  const r = await check(`platform=telegram&platform_uid=both&tier_id=${platinum}`);
  expect(r.body.entitled).toBe(true);
  expect(r.body.entitlements.map((e: { key: string }) => e.key)).toEqual(['chat']);
});

test.each([
  ['', 'platform'],
  ['platform=discord', 'platform_uid'],
  ['platform_uid=s-1', 'platform'],
  ['namespace=crm', 'external_user_id'],
  ['external_user_id=c-1', 'namespace'],
  ['platform=discord&platform_uid=s-1&namespace=crm&external_user_id=c-1', 'namespace'],
  ['tier_id=x', 'platform'],
])('check with "%s" answers 400 invalid_request naming %s', async (query, param) => {
  const r = await check(query);
  expect(r.status).toBe(400);
  expect(r.body).toMatchObject({ code: 'invalid_request', param });
});

test('check with an unknown platform answers 422', async () => {
  const r = await check('platform=icq&platform_uid=1');
  expect(r.status).toBe(422);
  expect(r.body).toMatchObject({ code: 'invalid_request', param: 'platform' });
});

test('the check needs members:read', async () => {
  const other = await createTenant(app.owner, ['subscriptions:read']);
  const r = await call(app.url, 'GET', '/v1/entitlements/check?platform=discord&platform_uid=s-1', { key: other.key });
  expect(r.status).toBe(403);
});
