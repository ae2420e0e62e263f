// Spec: GET /v1/discounts lists unarchived codes with redeemed and pending counts.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let spring: string, flat: string;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const ins = async (sql: string, values: unknown[]) => (await app.owner.query(sql, values)).rows[0];
  spring = (await ins(`insert into billing.discount_codes (community_id, code, name, value_type, percent_off, duration, use_limit, tier_ids, members, expires_at)
    values ($1, 'SPRING', 'Spring sale', 'percent', 12.5, 'once', 10, $2, $3, '2030-05-01T00:00:00Z') returning id`,
  [tenant.communityId, [tier], JSON.stringify([{ platform: 'discord', platform_uid: '42', username: 'ann' }])])).id;
  flat = (await ins(`insert into billing.discount_codes (community_id, code, value_type, amount_off_cents, currency, duration, duration_months)
    values ($1, 'FLAT5', 'amount', 500, 'usd', 'repeating', 3) returning id`, [tenant.communityId])).id;
  await ins(`insert into billing.discount_codes (community_id, code, value_type, percent_off, archived_at)
    values ($1, 'OLD', 'percent', 50, now()) returning id`, [tenant.communityId]);
  const member = await seed.member();
  for (const status of ['redeemed', 'redeemed', 'pending', 'released']) {
    const cs = (await ins(`insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, discount_id, amount_cents, currency, subject_kind, provider)
      values ($1, $2, $3, $4, $5, 1000, 'usd', 'member', 'sandbox') returning id`, [tenant.communityId, member, tier, plan, spring])).id;
    await ins(`insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status) values ($1, $2, $3, $4, $5) returning 1`,
      [tenant.communityId, spring, cs, member, status]);
  }
});
afterAll(() => app.close());

test('only unarchived codes are listed, with redeemed and pending counts', async () => {
  const r = await call(app.url, 'GET', '/v1/discounts', { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body.data.map((d: { code: string }) => d.code).sort()).toEqual(['FLAT5', 'SPRING']);
  const s = r.body.data.find((d: { id: string }) => d.id === spring);
  expect(s).toEqual({
    id: spring, code: 'SPRING', name: 'Spring sale', value_type: 'percent', percent_off: 12.5, amount_off_cents: null,
    currency: null, duration: 'once', duration_months: null, use_limit: 10, min_spend_cents: null, max_spend_cents: null,
    starts_at: null, expires_at: '2030-05-01T00:00:00.000Z', is_active: true, inactive_reason: null, tier_ids: [expect.stringMatching(/^tier_/)],
    members: [{ platform: 'discord', platform_uid: '42', username: 'ann' }], redeemed_count: 2, pending_count: 1,
    created_at: expect.stringMatching(/Z$/),
  });
  expect(r.body.data.find((d: { id: string }) => d.id === flat)).toMatchObject({
    value_type: 'amount', percent_off: null, amount_off_cents: 500, currency: 'usd', duration: 'repeating',
    duration_months: 3, redeemed_count: 0, pending_count: 0, tier_ids: [], members: [], name: null,
  });
});

test('discounts need discounts:read', async () => {
  const other = await createTenant(app.owner, ['members:read']);
  expect((await call(app.url, 'GET', '/v1/discounts', { key: other.key })).status).toBe(403);
});
