// Spec: GET /v1/members, /v1/members/{id}, /v1/members/lookup (exactly one identity
// pair) and /v1/members/{id}/entitlements (active ledger entitlements).
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed, subscriptionSource } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let seed: Seed;
let alice: string, bob: string, carol: string;
let tier: string, plan: string, chat: string, vip: string, gone: string;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  seed = new Seed(app.owner, tenant.communityId);
  alice = await seed.member({ discord: 'd-alice', telegram: 't-alice', subject: ['app', 'u-alice'] });
  bob = await seed.member({ discord: 'd-bob', username: null });
  carol = await seed.member();
  tier = await seed.tier({ name: 'Gold' });
  plan = await seed.plan(tier);
  chat = await seed.entitlement('chat', 'Chat access');
  vip = await seed.entitlement('vip', 'VIP room');
  gone = await seed.entitlement('gone', 'Lapsed perk');
  const sub = await seed.subscription(alice, plan);
  await seed.memberEntitlement(alice, chat, {
    sources: [subscriptionSource(sub, tier, plan, 'ref-1')],
    benefits: [{ platform: 'discord', platform_config_id: 'pcfg_1', type: 'role', value: 'gold' }],
    revision: 3,
  });
  await seed.memberEntitlement(alice, vip, { sources: [subscriptionSource(sub, tier, plan)] });
  await seed.memberEntitlement(alice, gone, { status: 'inactive', revision: 2 });
});
afterAll(() => app.close());

test('members list newest first with identities and external subjects, paged by cursor', async () => {
  const first = await call(app.url, 'GET', '/v1/members?limit=2', { key: tenant.key });
  expect(first.status).toBe(200);
  expect(first.body.data.map((m: { id: string }) => m.id)).toEqual([carol, bob]);
  expect(first.body.next_cursor).toEqual(expect.any(String));
  const second = await call(app.url, 'GET', `/v1/members?limit=2&cursor=${first.body.next_cursor}`, { key: tenant.key });
  expect(second.body.data.map((m: { id: string }) => m.id)).toEqual([alice]);
  expect(second.body.next_cursor).toBeNull();
  expect(second.body.data[0]).toEqual({
    id: alice, created_at: expect.stringMatching(/Z$/),
    identities: [
      { platform: 'discord', platform_uid: 'd-alice', username: 'user-d-alice' },
      { platform: 'telegram', platform_uid: 't-alice', username: 'user-t-alice' },
    ],
    external_subjects: [{ namespace: 'app', external_user_id: 'u-alice' }],
    email: null,
    display_name: 'user-d-alice',
    note: null,
    tags: [],
    erased_at: null,
  });
});

test('get member answers the member; a missing username is null and empty lists are []', async () => {
  const r = await call(app.url, 'GET', `/v1/members/${bob}`, { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({ id: bob, created_at: expect.any(String), identities: [{ platform: 'discord', platform_uid: 'd-bob', username: null }], external_subjects: [],
    email: null, display_name: null, note: null, tags: [], erased_at: null });
  expect((await call(app.url, 'GET', '/v1/members/mem_00000000000000000000000000', { key: tenant.key })).status).toBe(404);
});

test('lookup finds a member by platform pair or by external subject pair', async () => {
  const byPlatform = await call(app.url, 'GET', '/v1/members/lookup?platform=telegram&platform_uid=t-alice', { key: tenant.key });
  expect(byPlatform.status).toBe(200);
  expect(byPlatform.body.id).toBe(alice);
  const bySubject = await call(app.url, 'GET', '/v1/members/lookup?namespace=app&external_user_id=u-alice', { key: tenant.key });
  expect(bySubject.body.id).toBe(alice);
});

test('lookup of an unknown identity answers 404', async () => {
  const r = await call(app.url, 'GET', '/v1/members/lookup?platform=discord&platform_uid=nobody', { key: tenant.key });
  expect(r.status).toBe(404);
  expect(r.body.code).toBe('not_found');
});

test.each([
  ['', 'platform'],
  ['platform=discord', 'platform_uid'],
  ['platform_uid=d-alice', 'platform'],
  ['namespace=app', 'external_user_id'],
  ['external_user_id=u-alice', 'namespace'],
  ['platform=discord&platform_uid=d-alice&namespace=app&external_user_id=u-alice', 'namespace'],
])('lookup with "%s" answers 400 invalid_request naming %s', async (query, param) => {
  const r = await call(app.url, 'GET', `/v1/members/lookup?${query}`, { key: tenant.key });
  expect(r.status).toBe(400);
  expect(r.body).toMatchObject({ code: 'invalid_request', param });
  expect(r.body.detail).toContain(param);
});

test('lookup with an unknown platform answers 422', async () => {
  const r = await call(app.url, 'GET', '/v1/members/lookup?platform=myspace&platform_uid=1', { key: tenant.key });
  expect(r.status).toBe(422);
  expect(r.body).toMatchObject({ code: 'invalid_request', param: 'platform' });
});

test('member entitlements lists only active ledger rows, with sources and benefits as held', async () => {
  const r = await call(app.url, 'GET', `/v1/members/${alice}/entitlements`, { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body.data.map((e: { key: string }) => e.key).sort()).toEqual(['chat', 'vip']);
  const chatRow = r.body.data.find((e: { key: string }) => e.key === 'chat');
  expect(chatRow).toEqual({
    id: expect.stringMatching(/^ment_/), entitlement_id: chat, key: 'chat', name: 'Chat access', revision: 3,
    status: 'active', granted_at: expect.any(String), revoked_at: null,
    sources: [expect.objectContaining({ type: 'subscription', tier_id: tier, plan_id: plan, client_reference_id: 'ref-1' })],
    benefits: [{ platform: 'discord', platform_config_id: 'pcfg_1', type: 'role', value: 'gold',
      delivery: { status: 'action_required', updated_at: null,
        error: 'No bot token for this discord connection: set settings.bot_token in the catalog (or DISCORD_BOT_TOKEN).' } }],
  });
});

test('member entitlements of a member with none is an empty list; of an unknown member 404', async () => {
  expect((await call(app.url, 'GET', `/v1/members/${carol}/entitlements`, { key: tenant.key })).body).toEqual({ data: [] });
  expect((await call(app.url, 'GET', '/v1/members/mem_00000000000000000000000000/entitlements', { key: tenant.key })).status).toBe(404);
});

test('member reads need members:read', async () => {
  const other = await createTenant(app.owner, ['subscriptions:read']);
  for (const path of ['/v1/members', `/v1/members/${alice}`, '/v1/members/lookup?platform=discord&platform_uid=d-alice', `/v1/members/${alice}/entitlements`]) {
    const r = await call(app.url, 'GET', path, { key: other.key });
    expect(r.status).toBe(403);
    expect(r.body.required_scope).toBe('members:read');
  }
});
