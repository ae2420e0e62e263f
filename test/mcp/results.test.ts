// Spec "MCP tool endpoint": tool results are the same JSON objects as REST responses,
// each tool scoped to the key's community. Every tool is called against seeded data
// and compared with its REST twin for the same request.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { callTool, connect, resultJson } from '../support/mcp-client';
import { McpSeed } from './seed';

let app: TestApp;
let tenant: Tenant;
let client: Client;
const s: Record<string, string> = {};

beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: 'ab'.repeat(32) });
  tenant = await createTenant(app.owner);
  client = await connect(app.url, tenant.key);
  const seed = new McpSeed(app.owner, tenant.communityId);
  await seed.useSandboxPayments();
  await seed.platform('discord');

  // Endpoints first, so the events below are enqueued as their deliveries.
  for (const path of ['a', 'b']) {
    const r = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: tenant.key, body: { url: `https://hooks.example.com/${path}` } });
    expect(r.status).toBe(201);
    s[`endpoint_${path}`] = r.body.id;
  }

  s.silver = await seed.tier('Silver', { rank: 1 });
  s.gold = await seed.tier('Gold', { rank: 2 });
  s.duo = await seed.tier('Duo', { rank: 3 });
  s.lifetime = await seed.tier('Lifetime', { rank: 4, kind: 'one_time' });
  s.silverMonthly = await seed.plan(s.silver, 1000);
  s.silverAnnual = await seed.plan(s.silver, 10000, 'year');
  s.goldMonthly = await seed.plan(s.gold, 2500);
  s.duoMonthly = await seed.plan(s.duo, 3000);
  s.duoAnnual = await seed.plan(s.duo, 30000, 'year');
  s.lifetimeOnce = await seed.plan(s.lifetime, 9900, null);
  await seed.entitlement('chat', [s.silver, s.gold, s.lifetime]);
  await seed.entitlement('gold-room', [s.gold]);

  s.alice = await seed.member({ discord: 'alice-1', subject: ['crm', 'alice'] });
  s.bob = await seed.member({ telegram: 'bob-1' });
  s.carol = await seed.member({ subject: ['crm', 'carol'] });
  s.dave = await seed.member({ discord: 'dave-1' });
  s.frank = await seed.member({ discord: 'frank-1' });
  s.aliceSub = await seed.subscription(s.alice, s.silverMonthly);
  s.bobSub = await seed.subscription(s.bob, s.goldMonthly, 'cancelling');
  s.daveSub = await seed.subscription(s.dave, s.silverMonthly);
  s.carolPurchase = await seed.purchase(s.carol, s.lifetimeOnce, 9900);
  s.bobPurchase = await seed.purchase(s.bob, s.lifetimeOnce, 9900);

  // Another community's rows must stay invisible.
  const other = await createTenant(app.owner);
  const otherSeed = new McpSeed(app.owner, other.communityId);
  const otherTier = await otherSeed.tier('Other');
  s.otherSub = await otherSeed.subscription(await otherSeed.member({ discord: 'alice-1' }), await otherSeed.plan(otherTier, 500));
});
afterAll(async () => {
  await client?.close();
  await app?.close();
});

/** Calls the tool, then its REST twin with the same request; both must answer the same JSON. */
async function sameAsRest(tool: string, args: Record<string, unknown>, method: string, path: string, body?: unknown) {
  const result = await callTool(client, tool, args);
  const rest = await call(app.url, method, path, { key: tenant.key, body });
  expect({ tool, isError: result.isError === true }).toEqual({ tool, isError: rest.status >= 400 });
  expect(resultJson(result)).toEqual(rest.body);
  return rest;
}

const ids = (list: { data: { id: string }[] }) => list.data.map((x) => x.id);

test('list_subscriptions: same list as GET /v1/subscriptions, with filters and cursor pages', async () => {
  const all = await sameAsRest('list_subscriptions', {}, 'GET', '/v1/subscriptions');
  expect(ids(all.body).sort()).toEqual([s.aliceSub, s.bobSub, s.daveSub].sort());
  expect((await sameAsRest('list_subscriptions', { status: 'cancelling' }, 'GET', '/v1/subscriptions?status=cancelling')).body.data).toHaveLength(1);
  expect(ids((await sameAsRest('list_subscriptions', { member_id: s.alice }, 'GET', `/v1/subscriptions?member_id=${s.alice}`)).body)).toEqual([s.aliceSub]);
  expect((await sameAsRest('list_subscriptions', { plan_id: s.silverMonthly }, 'GET', `/v1/subscriptions?plan_id=${s.silverMonthly}`)).body.data).toHaveLength(2);
  const first = await sameAsRest('list_subscriptions', { limit: 2 }, 'GET', '/v1/subscriptions?limit=2');
  expect(first.body.next_cursor).toEqual(expect.any(String));
  const second = await sameAsRest('list_subscriptions', { limit: 2, cursor: first.body.next_cursor }, 'GET', `/v1/subscriptions?limit=2&cursor=${first.body.next_cursor}`);
  expect(second.body.data).toHaveLength(1);
});

test('get_subscription: same object as GET /v1/subscriptions/{id}; unknown and foreign ids are the same 404', async () => {
  const r = await sameAsRest('get_subscription', { subscription_id: s.aliceSub }, 'GET', `/v1/subscriptions/${s.aliceSub}`);
  expect(r.body).toMatchObject({ id: s.aliceSub, member_id: s.alice, plan_id: s.silverMonthly, tier_id: s.silver, status: 'active' });
  for (const id of [s.otherSub, 'sub_00000000000000000000000000']) {
    expect((await sameAsRest('get_subscription', { subscription_id: id }, 'GET', `/v1/subscriptions/${id}`)).status).toBe(404);
  }
});

test('get_switch_options: same groups as REST; a cancelling subscription is the same 409', async () => {
  const r = await sameAsRest('get_switch_options', { subscription_id: s.daveSub }, 'GET', `/v1/subscriptions/${s.daveSub}/switch-options`);
  expect(r.body.same_tier.map((o: { plan_id: string }) => o.plan_id)).toContain(s.silverAnnual);
  expect(r.body.upgrades.map((o: { plan_id: string }) => o.plan_id)).toContain(s.goldMonthly);
  const conflict = await sameAsRest('get_switch_options', { subscription_id: s.bobSub }, 'GET', `/v1/subscriptions/${s.bobSub}/switch-options`);
  expect(conflict.status).toBe(409);
});

test('list_plans: same tiers and nested plans as GET /v1/plans', async () => {
  const r = await sameAsRest('list_plans', {}, 'GET', '/v1/plans');
  expect(ids(r.body).sort()).toEqual([s.silver, s.gold, s.duo, s.lifetime].sort());
});

test('list_members: same members as GET /v1/members, page by page', async () => {
  const first = await sameAsRest('list_members', { limit: 3 }, 'GET', '/v1/members?limit=3');
  expect(first.body.data).toHaveLength(3);
  const second = await sameAsRest('list_members', { limit: 3, cursor: first.body.next_cursor }, 'GET', `/v1/members?limit=3&cursor=${first.body.next_cursor}`);
  expect([...ids(first.body), ...ids(second.body)].sort()).toEqual([s.alice, s.bob, s.carol, s.dave, s.frank].sort());
});

test('get_member_entitlements: same ledger entries as GET /v1/members/{id}/entitlements', async () => {
  const r = await sameAsRest('get_member_entitlements', { member_id: s.bob }, 'GET', `/v1/members/${s.bob}/entitlements`);
  expect(r.body.data.map((e: { key: string }) => e.key).sort()).toEqual(['chat', 'gold-room']);
  expect((await sameAsRest('get_member_entitlements', { member_id: 'mem_00000000000000000000000000' }, 'GET', '/v1/members/mem_00000000000000000000000000/entitlements')).status).toBe(404);
});

test('check_entitlement: same answers as GET /v1/entitlements/check for either identity pair, with or without tier_id', async () => {
  const platform = await sameAsRest('check_entitlement', { platform: 'discord', platform_uid: 'alice-1' }, 'GET', '/v1/entitlements/check?platform=discord&platform_uid=alice-1');
  expect(platform.body.entitled).toBe(true);
  const external = await sameAsRest('check_entitlement', { namespace: 'crm', external_user_id: 'carol' }, 'GET', '/v1/entitlements/check?namespace=crm&external_user_id=carol');
  expect(external.body.entitled).toBe(true);
  const viaGold = await sameAsRest('check_entitlement', { platform: 'discord', platform_uid: 'alice-1', tier_id: s.gold }, 'GET', `/v1/entitlements/check?platform=discord&platform_uid=alice-1&tier_id=${s.gold}`);
  expect(viaGold.body.entitled).toBe(false);
  const unknown = await sameAsRest('check_entitlement', { namespace: 'crm', external_user_id: 'nobody' }, 'GET', '/v1/entitlements/check?namespace=crm&external_user_id=nobody');
  expect(unknown.body).toEqual({ entitled: false, entitlements: [] });
  // The pair rule is the operation's: the same problem either way.
  const half = await sameAsRest('check_entitlement', { platform: 'discord' }, 'GET', '/v1/entitlements/check?platform=discord');
  expect(half.status).toBeGreaterThanOrEqual(400);
});

test('list_purchases: same list as GET /v1/purchases', async () => {
  const r = await sameAsRest('list_purchases', {}, 'GET', '/v1/purchases');
  expect(ids(r.body).sort()).toEqual([s.carolPurchase, s.bobPurchase].sort());
  const page = await sameAsRest('list_purchases', { limit: 1 }, 'GET', '/v1/purchases?limit=1');
  await sameAsRest('list_purchases', { cursor: page.body.next_cursor }, 'GET', `/v1/purchases?cursor=${page.body.next_cursor}`);
});

test('the report tools answer what GET /v1/analytics/<report> answers', async () => {
  const revenue = await sameAsRest('get_revenue_report', { granularity: 'month' }, 'GET', '/v1/analytics/revenue?granularity=month');
  expect(revenue.body.granularity).toBe('month');
  await sameAsRest('get_cohorts_report', {}, 'GET', '/v1/analytics/cohorts');
  await sameAsRest('get_churn_report', { from: '2020-01-01' }, 'GET', '/v1/analytics/churn?from=2020-01-01');
});

test('get_analytics_summary: same figures as GET /v1/analytics/summary', async () => {
  const result = await callTool(client, 'get_analytics_summary');
  const rest = await call(app.url, 'GET', '/v1/analytics/summary', { key: tenant.key });
  expect(rest.status).toBe(200);
  expect(rest.body.active_subscribers).toBeGreaterThan(0);
  // The summary states the moment its window starts (now - window): the two calls are
  // moments apart, so that one field is compared to the second.
  const { window_start: toolWindow, ...toolFigures } = resultJson(result) as Record<string, unknown>;
  const { window_start: restWindow, ...restFigures } = rest.body;
  expect(toolFigures).toEqual(restFigures);
  expect(Math.abs(Date.parse(String(toolWindow)) - Date.parse(String(restWindow)))).toBeLessThan(5000);
});

test('list_events: same envelopes as GET /v1/events, filtered by types and after_id', async () => {
  const all = await sameAsRest('list_events', {}, 'GET', '/v1/events');
  expect(all.body.data.length).toBeGreaterThan(3);
  const types = ['member.entitlement.granted', 'subscription.created'];
  const filtered = await sameAsRest('list_events', { types }, 'GET', `/v1/events?type=${types.join(',')}`);
  expect(filtered.body.data.length).toBeGreaterThan(0);
  expect(new Set(filtered.body.data.map((e: { type: string }) => e.type))).toEqual(new Set(types));
  const oldest = all.body.data[all.body.data.length - 1].id;
  const newer = await sameAsRest('list_events', { after_id: oldest, limit: 2 }, 'GET', `/v1/events?after_id=${oldest}&limit=2`);
  expect(newer.body.data).toHaveLength(2);
});

test('list_webhook_endpoints: same endpoints as GET /v1/webhooks/endpoints, without secrets', async () => {
  const r = await sameAsRest('list_webhook_endpoints', {}, 'GET', '/v1/webhooks/endpoints');
  expect(r.body.data.map((e: { id: string }) => e.id).sort()).toEqual([s.endpoint_a, s.endpoint_b].sort());
  expect(JSON.stringify(r.body)).not.toContain('whsec_');
});

test('list_webhook_deliveries: same log as GET /v1/webhooks/endpoints/{id}/deliveries, with its cursor', async () => {
  const path = `/v1/webhooks/endpoints/${s.endpoint_a}/deliveries`;
  const r = await sameAsRest('list_webhook_deliveries', { endpoint_id: s.endpoint_a }, 'GET', path);
  expect(r.body.data.length).toBeGreaterThan(0);
  if (r.body.next_cursor) {
    await sameAsRest('list_webhook_deliveries', { endpoint_id: s.endpoint_a, cursor: r.body.next_cursor }, 'GET', `${path}?cursor=${r.body.next_cursor}`);
  }
  expect((await sameAsRest('list_webhook_deliveries', { endpoint_id: 'we_00000000000000000000000000' }, 'GET', '/v1/webhooks/endpoints/we_00000000000000000000000000/deliveries')).status).toBe(404);
});

describe('create_checkout_link', () => {
  const shape = (link: Record<string, unknown>) => ({ keys: Object.keys(link).sort(), checkout: typeof link.checkout_id, url: typeof link.url });

  test('an external buyer: the link REST would create, for the same member, with the flat fields nested as subject.external', async () => {
    const result = await callTool(client, 'create_checkout_link', {
      tier_id: s.gold, namespace: 'crm', external_user_id: 'carol', return_url: 'https://app.example.com/done',
    });
    expect(result.isError).toBeFalsy();
    const link = resultJson(result) as Record<string, unknown>;
    const rest = await call(app.url, 'POST', '/v1/checkout-links', {
      key: tenant.key, body: { tier_id: s.gold, subject: { external: { namespace: 'crm', external_user_id: 'carol' } }, return_url: 'https://app.example.com/done' },
    });
    expect(rest.status).toBeLessThan(300);
    expect(link.member_id).toBe(s.carol);
    expect(rest.body.member_id).toBe(s.carol);
    expect(shape(link)).toEqual(shape(rest.body));
    const { rows } = await app.owner.query(
      'select member_id, tier_id, plan_id, subject_kind, return_url from billing.checkout_sessions where id = $1', [link.checkout_id]);
    expect(rows).toEqual([{ member_id: s.carol, tier_id: s.gold, plan_id: s.goldMonthly, subject_kind: 'external', return_url: 'https://app.example.com/done' }]);
  });

  test('a platform buyer with plan_id: nested as subject {platform, platform_uid}', async () => {
    const result = await callTool(client, 'create_checkout_link', { tier_id: s.duo, plan_id: s.duoAnnual, platform: 'discord', platform_uid: 'frank-1' });
    expect(result.isError).toBeFalsy();
    const link = resultJson(result) as Record<string, unknown>;
    expect(link.member_id).toBe(s.frank);
    const { rows } = await app.owner.query('select plan_id, subject_kind from billing.checkout_sessions where id = $1', [link.checkout_id]);
    expect(rows).toEqual([{ plan_id: s.duoAnnual, subject_kind: 'platform' }]);
  });

  test("the buyer's billing details and a client reference reach the checkout as REST's body gives them", async () => {
    const details = {
      client_reference_id: 'order-77', customer_email: 'dora@example.com', customer_name: 'Dora Example',
      customer_address_lines: ['Hauptstr. 1', '10115 Berlin'], customer_country: 'DE', customer_tax_id: 'DE123456789',
    };
    const result = await callTool(client, 'create_checkout_link', { tier_id: s.gold, namespace: 'crm', external_user_id: 'dora', ...details });
    expect(result.isError).toBeFalsy();
    const link = resultJson(result) as Record<string, unknown>;
    const rest = await call(app.url, 'POST', '/v1/checkout-links', {
      key: tenant.key, body: { tier_id: s.gold, subject: { external: { namespace: 'crm', external_user_id: 'dora' } }, ...details },
    });
    expect(rest.status).toBeLessThan(300);
    const stored = async (id: unknown) => (await app.owner.query(
      `select client_reference_id, customer_email, customer_name, customer_address_lines, customer_country, customer_tax_id
       from billing.checkout_sessions where id = $1`, [id])).rows[0];
    const viaMcp = await stored(link.checkout_id);
    expect(viaMcp).toMatchObject({ client_reference_id: 'order-77', customer_name: 'Dora Example', customer_country: 'DE', customer_tax_id: 'DE123456789' });
    expect(viaMcp).toEqual(await stored(rest.body.checkout_id));
  });

  test('eligibility failures are the same problems as REST: plan_required, not_found, not_eligible, discount_invalid', async () => {
    const buyer = { namespace: 'crm', external_user_id: 'erin' };
    const subject = { external: buyer };
    const cases: [Record<string, unknown>, Record<string, unknown>, string][] = [
      [{ tier_id: s.duo, ...buyer }, { tier_id: s.duo, subject }, 'plan_required'],
      [{ tier_id: 'tier_00000000000000000000000000', ...buyer }, { tier_id: 'tier_00000000000000000000000000', subject }, 'not_found'],
      [{ tier_id: s.silver, plan_id: s.silverMonthly, platform: 'discord', platform_uid: 'alice-1' },
        { tier_id: s.silver, plan_id: s.silverMonthly, subject: { platform: 'discord', platform_uid: 'alice-1' } }, 'not_eligible'],
      [{ tier_id: s.gold, ...buyer, discount_code: 'NOPE' }, { tier_id: s.gold, subject, discount_code: 'NOPE' }, 'discount_invalid'],
    ];
    for (const [args, body, code] of cases) {
      const rest = await sameAsRest('create_checkout_link', args, 'POST', '/v1/checkout-links', body);
      expect({ args, code: rest.body.code }).toEqual({ args, code });
    }
  });
});

describe('switch_subscription', () => {
  test('a same-tier switch answers the updated subscription: the object GET /v1/subscriptions/{id} then answers', async () => {
    const result = await callTool(client, 'switch_subscription', { subscription_id: s.aliceSub, plan_id: s.silverAnnual });
    expect(result.isError).toBeFalsy();
    const switched = resultJson(result) as Record<string, unknown>;
    expect(switched).toMatchObject({ id: s.aliceSub, plan_id: s.silverAnnual });
    const rest = await call(app.url, 'GET', `/v1/subscriptions/${s.aliceSub}`, { key: tenant.key });
    expect(switched).toEqual(rest.body);
  });

  test('refusals are the same problems as REST: a plan outside the options, a foreign subscription', async () => {
    const bogus = await sameAsRest('switch_subscription', { subscription_id: s.daveSub, plan_id: s.lifetimeOnce },
      'POST', `/v1/subscriptions/${s.daveSub}/switch`, { plan_id: s.lifetimeOnce });
    expect(bogus.status).toBeGreaterThanOrEqual(400);
    const foreign = await sameAsRest('switch_subscription', { subscription_id: s.otherSub, plan_id: s.silverAnnual },
      'POST', `/v1/subscriptions/${s.otherSub}/switch`, { plan_id: s.silverAnnual });
    expect(foreign.status).toBe(404);
    const unchanged = await call(app.url, 'GET', `/v1/subscriptions/${s.daveSub}`, { key: tenant.key });
    expect(unchanged.body.plan_id).toBe(s.silverMonthly);
  });
});
