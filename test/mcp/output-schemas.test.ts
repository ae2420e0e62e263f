// Issue 26 item 10: every tool advertises an outputSchema, and what it answers
// validates against it. Every tool is called through the official MCP client (which
// itself refuses structuredContent that breaks the advertised schema) on real data
// made through checkout and the sandbox, and each result is validated again here with
// Ajv (draft 2020-12, formats on): successes against the result branch, errors
// against the problem branch.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { call, startApp, TestApp } from '../support/app';
import { createShop, externalSubject, Shop, subscribe, checkout, pay } from '../support/shop';
import { callTool, connect } from '../support/mcp-client';

let app: TestApp;
let shop: Shop;
let client: Client;
let listed: Tool[];
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
const ids: Record<string, string> = {};
const buyer = externalSubject('silver');

beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: 'cd'.repeat(32) });
  shop = await createShop(app);
  const hook = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: shop.key, body: { url: 'https://hooks.example.com/a' } });
  expect(hook.status).toBe(201);
  ids.endpoint = hook.body.id;
  const silver = await subscribe(app, shop, 'silver', undefined, buyer);
  ids.silverSub = silver.subscriptionId;
  ids.silverMember = silver.memberId;
  const guide = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject('guide') });
  expect((await pay(guide.body.url)).status).toBe(303);
  client = await connect(app.url, shop.key);
  listed = (await client.listTools()).tools;
  const invoices = await call(app.url, 'GET', '/v1/invoices', { key: shop.key });
  ids.invoice = invoices.body.data[0].id;
});
afterAll(async () => {
  await client?.close();
  await app?.close();
});

/** One successful call of every tool, on the data above. */
function successCalls(): [string, Record<string, unknown> | (() => Record<string, unknown>)][] {
  return [
    // The catalog's (issue 31 item 1), on objects they create (ids.<tool>: what a create answered).
    ['get_catalog', {}],
    ['create_catalog_entitlement', { key: 'mcp-ent', name: 'MCP' }],
    ['update_catalog_entitlement', () => ({ entitlement_id: ids.create_catalog_entitlement, name: 'MCP renamed' })],
    ['create_catalog_tier', { key: 'mcp', name: 'MCP tier', entitlements: ['mcp-ent'] }],
    ['update_catalog_tier', () => ({ tier_id: ids.create_catalog_tier, rank: 9 })],
    ['create_catalog_plan', () => ({ key: 'mcp-m', tier_id: ids.create_catalog_tier, amount_cents: 500, currency: 'usd', interval: 'month' })],
    ['preview_catalog_plan_price', () => ({ plan_id: ids.create_catalog_plan, amount_cents: 600 })],
    ['update_catalog_plan', () => ({ plan_id: ids.create_catalog_plan, amount_cents: 600 })],
    ['archive_catalog_plan', () => ({ plan_id: ids.create_catalog_plan })],
    ['archive_catalog_tier', () => ({ tier_id: ids.create_catalog_tier })],
    ['create_catalog_discount', { code: 'MCP10', value_type: 'percent', percent_off: 10 }],
    ['update_catalog_discount', () => ({ discount_id: ids.create_catalog_discount, use_limit: 5 })],
    ['archive_catalog_discount', () => ({ discount_id: ids.create_catalog_discount })],
    ['list_subscriptions', {}],
    ['get_subscription', { subscription_id: ids.silverSub }],
    ['get_switch_options', { subscription_id: ids.silverSub }],
    ['list_plans', {}],
    ['list_members', {}],
    ['get_member_entitlements', { member_id: ids.silverMember }],
    ['check_entitlement', { namespace: buyer.external.namespace, external_user_id: buyer.external.external_user_id }],
    ['list_purchases', {}],
    ['list_invoices', {}],
    ['get_invoice', { invoice_id: ids.invoice }],
    ['get_analytics_summary', {}],
    ['get_revenue_report', {}],
    ['get_cohorts_report', {}],
    ['get_churn_report', {}],
    ['get_member_value_report', {}],
    ['get_trial_conversion_report', {}],
    ['get_payment_recovery_report', {}],
    ['list_events', {}],
    ['list_webhook_endpoints', {}],
    ['list_webhook_deliveries', { endpoint_id: ids.endpoint }],
    ['list_audit_log', { operation: 'insert', limit: 5 }],
    ['create_checkout_link', { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], namespace: 'app', external_user_id: 'new-buyer' }],
    // Last: the upgrade charges, and the subscription moves to gold.
    ['switch_subscription', { subscription_id: ids.silverSub, plan_id: shop.ids.plans['gold-monthly'] }],
  ];
}

type Json = Record<string, unknown>;
const outputOf = (name: string) => listed.find((t) => t.name === name)?.outputSchema as Json | undefined;

function validate(schema: Json, value: unknown): string[] {
  const check = ajv.compile(schema);
  return check(value) ? [] : (check.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message}`);
}

test('every tool advertises an object outputSchema: its operation\'s result, or the problem of an error result', () => {
  expect(listed).toHaveLength(36);
  for (const tool of listed) {
    const schema = tool.outputSchema as Json | undefined;
    expect({ tool: tool.name, type: schema?.type, branches: (schema?.anyOf as unknown[] | undefined)?.length }).toEqual({ tool: tool.name, type: 'object', branches: 2 });
    const [result, problem] = schema!.anyOf as Json[];
    expect({ tool: tool.name, result: result.type, described: Object.keys((result.properties ?? {}) as Json).length > 0 }).toEqual({ tool: tool.name, result: 'object', described: true });
    expect(problem).toMatchObject({ type: 'object', required: ['type', 'title', 'status', 'code'] });
    // Self-contained: an agent's client resolves no reference.
    expect({ tool: tool.name, refs: JSON.stringify(schema).includes('$ref') }).toEqual({ tool: tool.name, refs: false });
  }
});

test('each tool\'s result, through the official client, validates against its advertised outputSchema (and its result branch)', async () => {
  const calls = successCalls();
  expect(calls.map(([name]) => name).sort()).toEqual(listed.map((t) => t.name).sort());
  for (const [name, input] of calls) {
    const args = typeof input === 'function' ? input() : input;
    const result: CallToolResult = await callTool(client, name, args);
    if (name.startsWith('create_catalog_')) ids[name] = (result.structuredContent as { id: string }).id;
    expect({ name, isError: result.isError ?? false, text: result.isError ? JSON.stringify(result.structuredContent) : '' }).toEqual({ name, isError: false, text: '' });
    const schema = outputOf(name)!;
    expect({ name, errors: validate(schema, result.structuredContent) }).toEqual({ name, errors: [] });
    expect({ name, errors: validate((schema.anyOf as Json[])[0], result.structuredContent) }).toEqual({ name, errors: [] });
  }
});

test('timestamps in results are declared date-time, and a malformed one fails the advertised schema', async () => {
  const result = await callTool(client, 'get_subscription', { subscription_id: ids.silverSub });
  const schema = outputOf('get_subscription')!;
  const branch = (schema.anyOf as Json[])[0] as { properties: Record<string, Json> };
  expect(branch.properties.created_at).toMatchObject({ type: 'string', format: 'date-time' });
  const broken = { ...(result.structuredContent as Json), created_at: 'yesterday' };
  expect(validate(branch, broken)).not.toEqual([]);
});

test('error results carry the problem, which validates against the problem branch; its type names this server\'s page', async () => {
  const result = await callTool(client, 'get_subscription', { subscription_id: 'sub_00000000000000000000000000' });
  expect(result.isError).toBe(true);
  const schema = outputOf('get_subscription')!;
  expect(validate(schema, result.structuredContent)).toEqual([]);
  expect(validate((schema.anyOf as Json[])[1], result.structuredContent)).toEqual([]);
  expect(result.structuredContent).toMatchObject({ code: 'not_found', status: 404, type: `${app.url}/problems#not_found` });
});

test('a result that gains a field still validates (clients ignore unknown fields), but one missing a field does not', async () => {
  const result = await callTool(client, 'get_invoice', { invoice_id: ids.invoice });
  const branch = (outputOf('get_invoice')!.anyOf as Json[])[0];
  const body = result.structuredContent as Json;
  expect(validate(branch, { ...body, added_later: 1 })).toEqual([]);
  const { total_cents: _dropped, ...missing } = body;
  expect(validate(branch, missing).join()).toMatch(/total_cents/);
});
