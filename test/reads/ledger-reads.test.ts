// The read API over the real ledger: subscriptions written as the lifecycle writes
// them, entitlements maintained by the ledger triggers (db/migrations/fixtures/functions/50-ledger.sql), read back
// through GET /v1/entitlements/check and GET /v1/members/{id}/entitlements.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let seed: Seed;
let silver: string, platinum: string, silverPlan: string, chat: string, pcfg: string;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  seed = new Seed(app.owner, tenant.communityId);
  silver = await seed.tier({ name: 'Silver' });
  platinum = await seed.tier({ name: 'Platinum' });
  silverPlan = await seed.plan(silver);
  await seed.plan(platinum, { amount: 5000 });
  chat = await seed.entitlement('chat', 'Chat');
  const q = (sql: string, values: unknown[]) => app.owner.query(sql, values);
  pcfg = (await q(`insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'main', 'discord', '{"guild_id": "1"}') returning id`, [tenant.communityId])).rows[0].id;
  await q(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value) values ($1, $2, $3, 'role', 'chatter')`, [tenant.communityId, chat, pcfg]);
  for (const tier of [silver, platinum]) {
    await q('insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)', [tenant.communityId, tier, chat]);
  }
});
afterAll(() => app.close());

const check = (q: string) => call(app.url, 'GET', `/v1/entitlements/check?${q}`, { key: tenant.key });

test('a Silver subscription entitles through Silver, not through Platinum, though both grant chat', async () => {
  const member = await seed.member({ discord: 'ledger-1' });
  const sub = await seed.subscription(member, silverPlan);
  const any = await check('platform=discord&platform_uid=ledger-1');
  expect(any.body.entitled).toBe(true);
  expect(any.body.entitlements).toEqual([expect.objectContaining({
    entitlement_id: chat, key: 'chat', name: 'Chat', status: 'active', revoked_at: null,
    sources: [expect.objectContaining({ type: 'subscription', id: sub, tier_id: silver, plan_id: silverPlan })],
    benefits: [{ platform: 'discord', platform_config_id: pcfg, type: 'role', value: 'chatter' }],
  })]);
  expect((await check(`platform=discord&platform_uid=ledger-1&tier_id=${silver}`)).body.entitled).toBe(true);
  expect((await check(`platform=discord&platform_uid=ledger-1&tier_id=${platinum}`)).body).toEqual({ entitled: false, entitlements: [] });
  const listed = await call(app.url, 'GET', `/v1/members/${member}/entitlements`, { key: tenant.key });
  // The list adds each benefit's delivery on its platform (this connection has no bot
  // token: action_required, nothing queued); the check, the hot path, does not
  // (docs/decisions/platform-delivery.md).
  const pending = { status: 'action_required', updated_at: null,
    error: 'No bot token for this discord connection: set settings.bot_token in the catalog (or DISCORD_BOT_TOKEN).' };
  expect(listed.body.data).toEqual(any.body.entitlements.map((e: { benefits: object[] }) =>
    ({ ...e, benefits: e.benefits.map((b) => ({ ...b, delivery: pending })) })));
});

test('when the only source ends, the member is no longer entitled and lists nothing', async () => {
  const member = await seed.member({ discord: 'ledger-2' });
  const sub = await seed.subscription(member, silverPlan);
  expect((await check('platform=discord&platform_uid=ledger-2')).body.entitled).toBe(true);
  await app.owner.query(`update billing.subscriptions set status = 'cancelled', cancelled_at = now() where id = $1`, [sub]);
  expect((await check('platform=discord&platform_uid=ledger-2')).body).toEqual({ entitled: false, entitlements: [] });
  expect((await call(app.url, 'GET', `/v1/members/${member}/entitlements`, { key: tenant.key })).body).toEqual({ data: [] });
});
