// The catalog through /v1 (issue 31 item 1): scope catalog:write, Idempotency-Key,
// the database's rules answered as problem+json naming the field, bad input never 500,
// archive instead of delete, and a price change's subscribers counted before and after.
import { SCOPES } from '../../src/core/scopes';
import { call, createTenant, startApp, TestApp, Tenant } from '../support/app';

let app: TestApp;
let shop: Tenant;

beforeAll(async () => {
  app = await startApp();
  shop = await createTenant(app.owner);
});
afterAll(async () => { await app.close(); });

const post = (path: string, body: unknown, headers: Record<string, string> = {}, key = shop.key) => call(app.url, 'POST', path, { key, body, headers });
const patch = (path: string, body: unknown, key = shop.key) => call(app.url, 'PATCH', path, { key, body });

test('a key without catalog:write is refused 403 missing_scope; admins and owners hold the scope, viewers not', async () => {
  const reader = await createTenant(app.owner, SCOPES.filter((s) => s !== 'catalog:write'));
  const r = await post('/v1/catalog/tiers', { key: 'gold', name: 'Gold' }, {}, reader.key);
  expect(r.status).toBe(403);
  expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
  expect(r.body).toMatchObject({ code: 'missing_scope', required_scope: 'catalog:write' });
  const { rows } = await app.owner.query(`select r, 'catalog:write' = any (billing_private.operator_role_scopes(r)) as has
    from unnest(array['viewer', 'admin', 'owner']) r order by r`);
  expect(rows).toEqual([{ r: 'admin', has: true }, { r: 'owner', has: true }, { r: 'viewer', has: false }]);
});

test('create a tier with entitlements, two plans and a discount code; read them back with keys', async () => {
  const pc = await app.owner.query(`insert into billing.platform_configs (community_id, key, platform, settings)
    values ($1, 'discord-main', 'discord', '{"guild_id": "123456789012345678"}') returning id`, [shop.communityId]);
  expect(pc.rowCount).toBe(1);
  const ent = await post('/v1/catalog/entitlements', { key: 'vip', name: 'VIP', benefits: [{ platform: 'discord-main', type: 'role', value: '111111111111111111' }] });
  expect(ent.status).toBe(201);
  expect(ent.body).toMatchObject({ key: 'vip', name: 'VIP', benefits: [{ platform: 'discord-main', type: 'role', value: '111111111111111111' }] });
  const tier = await post('/v1/catalog/tiers', { key: 'gold', name: 'Gold', rank: 2, entitlements: ['vip'] });
  expect(tier.status).toBe(201);
  expect(tier.body).toMatchObject({ key: 'gold', name: 'Gold', kind: 'subscription', billing_mode: 'recurring', active: true, entitlements: ['vip'], plans: [] });
  const monthly = await post('/v1/catalog/plans', { key: 'gold-m', tier_id: tier.body.id, amount_cents: 1000, currency: 'usd', interval: 'month' });
  expect(monthly.status).toBe(201);
  expect(monthly.body).toMatchObject({ key: 'gold-m', tier_id: tier.body.id, amount_cents: 1000, active: true, price_change: null });
  const annual = await post('/v1/catalog/plans', { key: 'gold-y', tier_id: tier.body.id, amount_cents: 10000, currency: 'usd', interval: 'year', trial_days: 7 });
  expect(annual.status).toBe(201);
  const code = await post('/v1/catalog/discounts', { code: 'GOLD20', value_type: 'percent', percent_off: 20, tiers: ['gold'] });
  expect(code.status).toBe(201);
  expect(code.body).toMatchObject({ code: 'GOLD20', percent_off: 20, tier_ids: [tier.body.id], tiers: ['gold'], archived: false, is_active: true });

  const read = await call(app.url, 'GET', '/v1/catalog', { key: shop.key });
  expect(read.status).toBe(200);
  expect(read.body.tiers.map((t: { key: string; plans: { key: string }[] }) => [t.key, t.plans.map((p) => p.key)])).toEqual([['gold', ['gold-m', 'gold-y']]]);
  const plans = await call(app.url, 'GET', '/v1/plans', { key: shop.key });
  expect(plans.body.data[0].plans.map((p: { id: string }) => p.id)).toEqual([monthly.body.id, annual.body.id]);
});

test('platform connections through the API: settings checked by the database, never a secret answered', async () => {
  const created = await post('/v1/catalog/platforms', { key: 'tg-main', platform: 'telegram', name: 'VIP chat', settings: { chat_id: '-1001234567890' } });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ key: 'tg-main', platform: 'telegram', name: 'VIP chat', settings: { chat_id: '-1001234567890' }, bot_token_set: false });
  const bad = await patch(`/v1/catalog/platforms/${created.body.id}`, { settings: { chat_id: 'vip room' } });
  expect(bad.status).toBe(422);
  expect(bad.body).toMatchObject({ code: 'invalid_request', param: 'settings.chat_id' });
  const renamed = await patch(`/v1/catalog/platforms/${created.body.id}`, { name: 'VIP' });
  expect(renamed.body).toMatchObject({ name: 'VIP', settings: { chat_id: '-1001234567890' } });
  // Secrets are stored encrypted: this deployment has no key for them.
  const token = await patch(`/v1/catalog/platforms/${created.body.id}`, { bot_token: `123456:${'A'.repeat(35)}` });
  expect(token.status).toBe(503);
  const read = await call(app.url, 'GET', '/v1/catalog', { key: shop.key });
  expect(read.body.platforms.map((p: { key: string }) => p.key)).toEqual(['discord-main', 'tg-main']);
  expect(JSON.stringify(read.body)).not.toMatch(/bot_token|AAAAAAAAAA/);
});

test('the database\'s rules answer 422 invalid_request naming the field; a key in use 409', async () => {
  const { body: { tiers: [gold] } } = await call(app.url, 'GET', '/v1/catalog', { key: shop.key });
  const noInterval = await post('/v1/catalog/plans', { key: 'gold-x', tier_id: gold.id, amount_cents: 500, currency: 'usd' });
  expect(noInterval.status).toBe(422);
  expect(noInterval.body).toMatchObject({ code: 'invalid_request', param: 'interval',
    detail: 'interval: expected "month" or "year" for a recurring tier' });
  const amount = await post('/v1/catalog/discounts', { code: 'FIVE', value_type: 'amount', amount_off_cents: 500 });
  expect(amount.status).toBe(422);
  expect(amount.body).toMatchObject({ code: 'invalid_request', param: 'currency' });
  const window = await post('/v1/catalog/discounts', { code: 'WIN', value_type: 'percent', percent_off: 5,
    starts_at: '2026-02-01T00:00:00Z', expires_at: '2026-01-01T00:00:00Z' });
  expect(window.body).toMatchObject({ code: 'invalid_request', param: 'expires_at' });
  const unknownEnt = await patch(`/v1/catalog/tiers/${gold.id}`, { entitlements: ['nope'] });
  expect(unknownEnt.status).toBe(422);
  expect(unknownEnt.body).toMatchObject({ code: 'invalid_request', param: 'entitlements[0]' });
  const badKey = await post('/v1/catalog/tiers', { key: 'has space', name: 'X' });
  expect(badKey.body).toMatchObject({ code: 'invalid_request', param: 'key' });
  const benefit = await post('/v1/catalog/entitlements', { key: 'tg', name: 'TG', benefits: [{ platform: 'discord-main', type: 'chat', value: '1' }] });
  expect(benefit.body).toMatchObject({ code: 'invalid_request', param: 'benefits[0].type' });
  const again = await post('/v1/catalog/tiers', { key: 'gold', name: 'Gold again' });
  expect(again.status).toBe(409);
  expect(again.body.code).toBe('conflict');
  const oneTime = await patch(`/v1/catalog/tiers/${gold.id}`, { kind: 'one_time' });
  expect(oneTime.status).toBe(422);
  expect(oneTime.body).toMatchObject({ code: 'invalid_request', param: 'billing_mode' });
  const missing = await patch('/v1/catalog/plans/plan_nope', { amount_cents: 1 });
  expect(missing.status).toBe(404);
});

test('bad input never answers 500: NUL bytes, huge strings, wrong types, unknown fields', async () => {
  const bodies: unknown[] = [
    { key: 'nul', name: 'a\u0000b' },
    { key: 'big', name: 'x'.repeat(100_000) },
    { key: 'x'.repeat(5000), name: 'X' },
    { key: 'types', name: 7 },
    { key: 'perks', name: 'P', perks: [{ title: '' }] },
    { key: 'extra', name: 'E', colour: 'red' },
    { key: 'rank', name: 'R', rank: 1e12 },
  ];
  for (const body of bodies) {
    const r = await post('/v1/catalog/tiers', body);
    expect([400, 422]).toContain(r.status);
    expect(r.body.code).toBe('invalid_request');
  }
  const d = await post('/v1/catalog/discounts', { code: 'T', value_type: 'percent', percent_off: 5, starts_at: '2026-13-45T99:00:00Z' });
  expect(d.status).toBe(422);
  expect(d.body.param).toBe('starts_at');
  const notUuid = await patch('/v1/catalog/discounts/not-a-uuid', { name: 'x' });
  expect(notUuid.status).toBe(404);
});

test('Idempotency-Key: a retry replays the first answer and writes nothing more', async () => {
  const headers = { 'Idempotency-Key': 'create-silver-1' };
  const first = await post('/v1/catalog/tiers', { key: 'silver', name: 'Silver' }, headers);
  expect(first.status).toBe(201);
  const replay = await post('/v1/catalog/tiers', { key: 'silver', name: 'Silver' }, headers);
  expect(replay.status).toBe(201);
  expect(replay.body).toEqual(first.body);
  const other = await post('/v1/catalog/tiers', { key: 'silver', name: 'Other' }, headers);
  expect(other.status).toBe(422);
  expect(other.body.code).toBe('idempotency_key_reuse');
  const { rows } = await app.owner.query('select count(*)::int as n from billing.tiers where community_id = $1 and key = $2', [shop.communityId, 'silver']);
  expect(rows[0].n).toBe(1);
});

test('a price change: the preview counts the subscribers it concerns; they keep their price; archive, never delete', async () => {
  const { body: { tiers } } = await call(app.url, 'GET', '/v1/catalog', { key: shop.key });
  const gold = tiers.find((t: { key: string }) => t.key === 'gold');
  const monthly = gold.plans.find((p: { key: string }) => p.key === 'gold-m');
  // Two subscribers at the plan's price.
  for (const m of ['mem_a', 'mem_b']) {
    await app.owner.query(`select set_config('app.community_id', $1, false)`, [shop.communityId]);
    await app.owner.query(`insert into billing.members (community_id, id) values ($1, billing.gen_id('mem'))`, [shop.communityId]);
    void m;
  }
  const { rows: members } = await app.owner.query('select id from billing.members where community_id = $1 order by id', [shop.communityId]);
  for (const m of members) {
    await app.owner.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end)
      values ($1, $2, $3, 'active', now(), now() + interval '1 month')`, [shop.communityId, m.id, monthly.id]);
  }
  const preview = await call(app.url, 'GET', `/v1/catalog/plans/${monthly.id}/price-preview?amount_cents=1200`, { key: shop.key });
  expect(preview.status).toBe(200);
  expect(preview.body).toEqual({ plan_id: monthly.id, from_cents: 1000, to_cents: 1200, currency: 'usd', subscriptions: 2, pending_migration: 0 });
  const same = await call(app.url, 'GET', `/v1/catalog/plans/${monthly.id}/price-preview?amount_cents=1000`, { key: shop.key });
  expect(same.body.subscriptions).toBe(0);
  const changed = await patch(`/v1/catalog/plans/${monthly.id}`, { amount_cents: 1200 });
  expect(changed.status).toBe(200);
  expect(changed.body).toMatchObject({ amount_cents: 1200, price_change: { from_cents: 1000, to_cents: 1200, subscriptions: 2, pending_migration: 0 } });
  const { rows: prices } = await app.owner.query('select price_cents from billing.subscriptions where community_id = $1', [shop.communityId]);
  expect(prices.map((r) => r.price_cents)).toEqual([1000, 1000]);

  const archived = await post(`/v1/catalog/plans/${monthly.id}/archive`, undefined);
  expect(archived.status).toBe(200);
  expect(archived.body.active).toBe(false);
  const tierArchived = await post(`/v1/catalog/tiers/${gold.id}/archive`, undefined);
  expect(tierArchived.body.active).toBe(false);
  const plans = await call(app.url, 'GET', '/v1/plans', { key: shop.key });
  expect(plans.body.data.map((t: { id: string }) => t.id)).not.toContain(gold.id);
  const { body: { data: codes } } = await call(app.url, 'GET', '/v1/discounts', { key: shop.key });
  const code = codes.find((c: { code: string }) => c.code === 'GOLD20');
  const gone = await post(`/v1/catalog/discounts/${code.id}/archive`, undefined);
  expect(gone.body).toMatchObject({ archived: true, is_active: false, inactive_reason: 'disabled' });
  const edit = await patch(`/v1/catalog/discounts/${code.id}`, { name: 'x' });
  expect(edit.status).toBe(409);
});

test('each write is in the audit log with the key as its actor', async () => {
  const { rows } = await app.owner.query(
    `select table_name, operation, actor_type, actor_id from billing.audit_log
     where community_id = $1 and table_name in ('tiers', 'plans', 'discount_codes', 'entitlements') order by id`, [shop.communityId]);
  expect(rows.length).toBeGreaterThan(5);
  expect(new Set(rows.map((r) => `${r.actor_type}:${r.actor_id}`))).toEqual(new Set([`api_key:${shop.keyId}`]));
});
