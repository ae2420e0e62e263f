// Spec: "MCP tool endpoint" (same bearer keys, scope-denial tool errors),
// "Authentication" (identical 401 for missing, malformed, unknown, revoked keys),
// "Limits" (per-key and per-IP buckets). Decisions: docs/decisions/mcp-key-first.md.
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { revokeKey } from '../../src/domain/communities/community-admin';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { callTool, connect, initializeMessage, resultJson, rpc, toolCallMessage } from '../support/mcp-client';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

async function badKeys(): Promise<Record<string, string | null>> {
  const revoked = await createTenant(app.owner);
  await revokeKey(app.owner, revoked.keyId);
  return { missing: null, malformed: 'nonsense', unknown: `bk_AAAAAAAA_${'x'.repeat(43)}`, revoked: revoked.key };
}

test('a missing, malformed, unknown or revoked key is refused with HTTP 401 and the REST problem body, for every message', async () => {
  const rest = await call(app.url, 'GET', '/v1/plans', { key: null });
  expect(rest.status).toBe(401);
  for (const [kind, key] of Object.entries(await badKeys())) {
    for (const message of [initializeMessage(), { jsonrpc: '2.0', id: 3, method: 'tools/list' }, toolCallMessage('list_plans'), toolCallMessage('no_such_tool')]) {
      const r = await rpc(app.url, key, message);
      expect({ kind, method: message.method, status: r.status, type: r.headers.get('content-type') })
        .toEqual({ kind, method: message.method, status: 401, type: expect.stringMatching(/^application\/problem\+json/) });
      expect(r.text).toBe(rest.text);
    }
    // Even a request the protocol would reject is refused for its key first.
    const garbled = await rpc(app.url, key, '{not json');
    expect({ kind, status: garbled.status, body: garbled.text }).toEqual({ kind, status: 401, body: rest.text });
    const get = await fetch(`${app.url}/mcp`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
    expect({ kind, status: get.status, body: await get.text() }).toEqual({ kind, status: 401, body: rest.text });
  }
});

test('the SDK client cannot connect without a valid key: the HTTP 401 surfaces as a transport error', async () => {
  const err = await connect(app.url, null).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(StreamableHTTPError);
  expect((err as StreamableHTTPError).code).toBe(401);
  expect((err as Error).message).toContain('unauthorized');
});

// Shapes that pass each tool's input schema (ids need not exist: the scope check comes first).
const VALID_ARGS: Record<string, Record<string, unknown>> = {
  list_subscriptions: { status: 'active' },
  get_subscription: { subscription_id: 'sub_00000000000000000000000000' },
  get_switch_options: { subscription_id: 'sub_00000000000000000000000000' },
  list_plans: {},
  list_members: { limit: 5 },
  get_member_entitlements: { member_id: 'mem_00000000000000000000000000' },
  check_entitlement: { platform: 'discord', platform_uid: '1' },
  list_purchases: {},
  list_invoices: { status: 'paid' },
  get_invoice: { invoice_id: 'inv_00000000000000000000000000' },
  get_analytics_summary: {},
  get_revenue_report: {},
  get_cohorts_report: {},
  get_churn_report: {},
  get_member_value_report: {},
  get_trial_conversion_report: {},
  get_payment_recovery_report: {},
  list_events: { types: ['member.entitlement.granted'] },
  list_webhook_endpoints: {},
  list_webhook_deliveries: { endpoint_id: 'we_00000000000000000000000000' },
  list_audit_log: { table: 'plans' },
  create_checkout_link: { tier_id: 'tier_00000000000000000000000000', namespace: 'crm', external_user_id: 'u-1' },
  switch_subscription: { subscription_id: 'sub_00000000000000000000000000', plan_id: 'plan_00000000000000000000000000' },
  get_catalog: {},
  preview_catalog_plan_price: { plan_id: 'plan_00000000000000000000000000', amount_cents: 100 },
  create_catalog_tier: { key: 'gold', name: 'Gold' },
  update_catalog_tier: { tier_id: 'tier_00000000000000000000000000', name: 'Gold' },
  archive_catalog_tier: { tier_id: 'tier_00000000000000000000000000' },
  create_catalog_plan: { key: 'gold-m', tier_id: 'tier_00000000000000000000000000', amount_cents: 100, currency: 'usd', interval: 'month' },
  update_catalog_plan: { plan_id: 'plan_00000000000000000000000000', amount_cents: 100 },
  archive_catalog_plan: { plan_id: 'plan_00000000000000000000000000' },
  create_catalog_entitlement: { key: 'vip', name: 'VIP' },
  update_catalog_entitlement: { entitlement_id: 'ent_00000000000000000000000000', name: 'VIP' },
  create_catalog_discount: { code: 'TEN', value_type: 'percent', percent_off: 10 },
  update_catalog_discount: { discount_id: '00000000-0000-0000-0000-000000000000', name: 'Ten' },
  archive_catalog_discount: { discount_id: '00000000-0000-0000-0000-000000000000' },
};

test('a key lacking a tool\'s scope gets a tool error naming the missing scope (not a protocol error), for every tool', async () => {
  // discounts:read is a scope no tool uses.
  const narrow = await createTenant(app.owner, ['discounts:read']);
  const client = await connect(app.url, narrow.key);
  try {
    const listed = (await client.listTools()).tools;
    expect(listed).toHaveLength(36); // the spec's 14, plus list_invoices and get_invoice (issue 11), list_audit_log, the catalog's 13 and the six reports (issue 31)
    for (const tool of listed) {
      const scope = /Requires the API key scope (\S+)\./.exec(tool.description ?? '')?.[1];
      expect({ tool: tool.name, scope }).toEqual({ tool: tool.name, scope: expect.stringMatching(/^[a-z]+:(read|write)$/) });
      for (const args of [VALID_ARGS[tool.name], { bogus_field: 1 }]) {
        const result = await callTool(client, tool.name, args);
        expect({ tool: tool.name, isError: result.isError }).toEqual({ tool: tool.name, isError: true });
        expect({ tool: tool.name, problem: resultJson(result) }).toEqual({
          tool: tool.name,
          problem: {
            type: `${app.url}/problems#missing_scope`, title: 'Missing scope', status: 403,
            code: 'missing_scope', required_scope: scope, detail: `This key lacks the scope ${scope}.`,
          },
        });
      }
    }
  } finally {
    await client.close();
  }
});

test('the scope denial is the same problem REST answers', async () => {
  const narrow = await createTenant(app.owner, ['discounts:read']);
  const client = await connect(app.url, narrow.key);
  try {
    const rest = await call(app.url, 'GET', '/v1/plans', { key: narrow.key });
    expect(rest.status).toBe(403);
    expect(resultJson(await callTool(client, 'list_plans'))).toEqual(rest.body);
  } finally {
    await client.close();
  }
});

describe('bad input is a tool error naming the field', () => {
  let client: Awaited<ReturnType<typeof connect>>;
  beforeAll(async () => { client = await connect(app.url, tenant.key); });
  afterAll(() => client.close());

  const cases: [string, string, Record<string, unknown>, string][] = [
    ['a missing required field', 'get_subscription', {}, 'subscription_id'],
    ['a wrongly typed field', 'get_member_entitlements', { member_id: 42 }, 'member_id'],
    ['an unknown field', 'list_subscriptions', { colour: 'red' }, 'colour'],
    ['a value outside its enum', 'list_subscriptions', { status: 'sleeping' }, 'status'],
    ['a page size above 100', 'list_members', { limit: 101 }, 'limit'],
    ['an empty event type list', 'list_events', { types: [] }, 'types'],
    ['half a platform identity at checkout', 'create_checkout_link', { tier_id: 'tier_00000000000000000000000000', platform: 'discord' }, 'platform_uid'],
    ['half an external identity at checkout', 'create_checkout_link', { tier_id: 'tier_00000000000000000000000000', external_user_id: 'u' }, 'namespace'],
    ['two identities at checkout', 'create_checkout_link', { tier_id: 'tier_00000000000000000000000000', platform: 'discord', platform_uid: '1', namespace: 'crm', external_user_id: 'u' }, 'platform'],
    ['no identity at checkout', 'create_checkout_link', { tier_id: 'tier_00000000000000000000000000' }, 'platform'],
    ['a missing plan_id on switch', 'switch_subscription', { subscription_id: 'sub_00000000000000000000000000' }, 'plan_id'],
  ];
  test.each(cases)('%s (%s)', async (_rule, name, args, field) => {
    const result = await callTool(client, name, args);
    expect(result.isError).toBe(true);
    const problem = resultJson(result) as Record<string, unknown>;
    expect(problem).toMatchObject({ code: 'invalid_request', status: 422, param: field });
    expect(problem.detail).toEqual(expect.stringContaining(field));
  });

  // Rules the operation holds come back in the tool's own field names.
  test('an unknown event type names "types" (the REST query names it "type")', async () => {
    const result = await callTool(client, 'list_events', { types: ['member.entitlement.granted', 'no.such.type'] });
    expect(result.isError).toBe(true);
    expect(resultJson(result)).toMatchObject({ code: 'invalid_request', param: 'types', detail: expect.stringContaining('no.such.type') });
  });

  test('a cursor this API did not return is a 400 invalid_request naming cursor, as in REST', async () => {
    const result = await callTool(client, 'list_purchases', { cursor: 'garbage' });
    const rest = await call(app.url, 'GET', '/v1/purchases?cursor=garbage', { key: tenant.key });
    expect(rest.status).toBe(400);
    expect(result.isError).toBe(true);
    expect(resultJson(result)).toEqual(rest.body);
    expect(rest.body.param).toBe('cursor');
  });

  test('a non-https return_url is refused naming return_url, as in REST', async () => {
    const result = await callTool(client, 'create_checkout_link', {
      tier_id: 'tier_00000000000000000000000000', namespace: 'crm', external_user_id: 'u-1', return_url: 'http://example.com/back',
    });
    expect(result.isError).toBe(true);
    expect(resultJson(result)).toMatchObject({ code: 'invalid_request', status: 422, param: 'return_url' });
  });

  test('an unknown tool is a protocol error (InvalidParams), as MCP specifies', async () => {
    const err = await client.callTool({ name: 'cancel_subscription', arguments: { subscription_id: 'sub_x' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32602);
  });
});

test('GET and DELETE on /mcp answer 405 (stateless: no stream, no session) for a valid key', async () => {
  for (const method of ['GET', 'DELETE']) {
    const r = await fetch(`${app.url}/mcp`, { method, headers: { authorization: `Bearer ${tenant.key}`, accept: 'text/event-stream' } });
    expect({ method, status: r.status, allow: r.headers.get('allow') }).toEqual({ method, status: 405, allow: 'POST' });
  }
});

test('the endpoint is stateless: no session id, JSON answers, and a tools/call needs no prior initialize', async () => {
  const init = await rpc(app.url, tenant.key, initializeMessage());
  expect(init.status).toBe(200);
  expect(init.headers.get('mcp-session-id')).toBeNull();
  expect(init.headers.get('content-type')).toMatch(/^application\/json/);
  expect(init.body.result.capabilities.tools).toBeDefined();
  const rest = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
  const direct = await rpc(app.url, tenant.key, toolCallMessage('list_plans', {}, 7));
  expect(direct.status).toBe(200);
  expect(direct.body).toMatchObject({ jsonrpc: '2.0', id: 7, result: { structuredContent: rest.body } });
  expect(direct.headers.get('ratelimit-limit')).toBeTruthy();
});
