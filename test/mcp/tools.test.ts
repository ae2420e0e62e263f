// Spec: "MCP tool endpoint": exactly these tools, with these inputs and scopes; read
// tools annotated read-only; no cancel tool. The spec also calls both write tools
// non-destructive, but switch_subscription charges at once: issue 26 item 10 has it
// annotated destructive (docs/decisions/mcp-tool-annotations.md).
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { findOperation } from '../../src/operations';
import { createTenant, startApp, TestApp } from '../support/app';
import { tools } from '../../src/mcp/tools';
import { connect } from '../support/mcp-client';

// The spec's tool table, plus the additive invoice tools of issue 11, list_members'
// additive search and filters, the audit log and the reports (issue 31): inputs (required ones
// marked) and the scope of the REST twin.
const TIER = ['name', 'description', 'kind', 'billing_mode', 'rank', 'active', 'features', 'perks', 'entitlements'];
const PLAN = ['name', 'amount_cents', 'currency', 'interval', 'trial_days', 'access_days', 'active'];
const DISCOUNT = ['name', 'value_type', 'percent_off', 'amount_off_cents', 'currency', 'duration', 'duration_months', 'use_limit',
  'min_spend_cents', 'max_spend_cents', 'starts_at', 'expires_at', 'is_active', 'tiers', 'members'];
const SPEC: Record<string, { inputs: string[]; required: string[]; scope: string; write?: true }> = {
  list_subscriptions: { inputs: ['status', 'plan_id', 'member_id', 'cursor', 'limit'], required: [], scope: 'subscriptions:read' },
  get_subscription: { inputs: ['subscription_id'], required: ['subscription_id'], scope: 'subscriptions:read' },
  get_switch_options: { inputs: ['subscription_id'], required: ['subscription_id'], scope: 'subscriptions:read' },
  list_plans: { inputs: [], required: [], scope: 'plans:read' },
  list_members: { inputs: ['q', 'status', 'tier_id', 'plan_id', 'tag', 'created_after', 'created_before', 'cursor', 'limit'], required: [], scope: 'members:read' },
  get_member_entitlements: { inputs: ['member_id'], required: ['member_id'], scope: 'members:read' },
  check_entitlement: { inputs: ['platform', 'platform_uid', 'namespace', 'external_user_id', 'tier_id'], required: [], scope: 'members:read' },
  list_purchases: { inputs: ['cursor', 'limit'], required: [], scope: 'purchases:read' },
  list_invoices: { inputs: ['member_id', 'subscription_id', 'status', 'cursor', 'limit'], required: [], scope: 'invoices:read' },
  get_invoice: { inputs: ['invoice_id'], required: ['invoice_id'], scope: 'invoices:read' },
  get_analytics_summary: { inputs: [], required: [], scope: 'analytics:read' },
  get_revenue_report: { inputs: ['granularity', 'from', 'to'], required: [], scope: 'analytics:read' },
  get_cohorts_report: { inputs: ['from', 'to'], required: [], scope: 'analytics:read' },
  get_churn_report: { inputs: ['from', 'to'], required: [], scope: 'analytics:read' },
  get_member_value_report: { inputs: ['from', 'to'], required: [], scope: 'analytics:read' },
  get_trial_conversion_report: { inputs: ['from', 'to'], required: [], scope: 'analytics:read' },
  get_payment_recovery_report: { inputs: ['from', 'to'], required: [], scope: 'analytics:read' },
  list_events: { inputs: ['types', 'after_id', 'limit'], required: [], scope: 'events:read' },
  list_webhook_endpoints: { inputs: [], required: [], scope: 'webhooks:read' },
  list_webhook_deliveries: { inputs: ['endpoint_id', 'cursor'], required: ['endpoint_id'], scope: 'webhooks:read' },
  list_audit_log: { inputs: ['actor_type', 'actor_id', 'table', 'row_id', 'operation', 'since', 'until', 'cursor', 'limit'], required: [], scope: 'audit:read' },
  create_checkout_link: {
    inputs: ['tier_id', 'plan_id', 'platform', 'platform_uid', 'namespace', 'external_user_id', 'return_url', 'discount_code',
      'client_reference_id', 'customer_email', 'customer_name', 'customer_address_lines', 'customer_country', 'customer_tax_id'],
    required: ['tier_id'], scope: 'checkout:write', write: true,
  },
  switch_subscription: { inputs: ['subscription_id', 'plan_id'], required: ['subscription_id', 'plan_id'], scope: 'subscriptions:write', write: true },
  // The catalog (issue 31 item 1).
  get_catalog: { inputs: [], required: [], scope: 'plans:read' },
  preview_catalog_plan_price: { inputs: ['plan_id', 'amount_cents'], required: ['plan_id', 'amount_cents'], scope: 'catalog:write' },
  create_catalog_tier: { inputs: ['key', ...TIER], required: ['key', 'name'], scope: 'catalog:write', write: true },
  update_catalog_tier: { inputs: ['tier_id', ...TIER], required: ['tier_id'], scope: 'catalog:write', write: true },
  archive_catalog_tier: { inputs: ['tier_id'], required: ['tier_id'], scope: 'catalog:write', write: true },
  create_catalog_plan: { inputs: ['key', 'tier_id', ...PLAN], required: ['key', 'tier_id', 'amount_cents', 'currency'], scope: 'catalog:write', write: true },
  update_catalog_plan: { inputs: ['plan_id', ...PLAN], required: ['plan_id'], scope: 'catalog:write', write: true },
  archive_catalog_plan: { inputs: ['plan_id'], required: ['plan_id'], scope: 'catalog:write', write: true },
  create_catalog_entitlement: { inputs: ['key', 'name', 'benefits'], required: ['key', 'name'], scope: 'catalog:write', write: true },
  update_catalog_entitlement: { inputs: ['entitlement_id', 'name', 'benefits'], required: ['entitlement_id'], scope: 'catalog:write', write: true },
  create_catalog_discount: { inputs: ['code', ...DISCOUNT], required: ['code', 'value_type'], scope: 'catalog:write', write: true },
  update_catalog_discount: { inputs: ['discount_id', ...DISCOUNT], required: ['discount_id'], scope: 'catalog:write', write: true },
  archive_catalog_discount: { inputs: ['discount_id'], required: ['discount_id'], scope: 'catalog:write', write: true },
};

let app: TestApp;
let client: Client;
let listed: Tool[];

beforeAll(async () => {
  app = await startApp();
  const tenant = await createTenant(app.owner);
  client = await connect(app.url, tenant.key);
  listed = (await client.listTools()).tools;
});
afterAll(async () => {
  await client?.close();
  await app.close();
});

test('tools/list answers exactly the spec\'s fourteen tools, the two invoice tools, the audit log and the catalog\'s, and no cancel tool', () => {
  expect(listed.map((t) => t.name).sort()).toEqual(Object.keys(SPEC).sort());
  expect(listed.some((t) => /cancel/.test(t.name))).toBe(false);
});

test('each tool runs the registry operation of the same name, whose scope is the spec\'s', () => {
  for (const tool of tools) {
    const op = findOperation(tool.operation);
    expect({ tool: tool.name, operation: op?.name, scope: op?.scope }).toEqual({ tool: tool.name, operation: tool.name, scope: SPEC[tool.name].scope });
    // Read tools run GET operations; the write tools run POST ones (PATCH to change a catalog object).
    expect({ tool: tool.name, method: op?.method === 'PATCH' ? 'POST' : op?.method }).toEqual({ tool: tool.name, method: SPEC[tool.name].write ? 'POST' : 'GET' });
  }
});

test('input schemas are strict JSON Schema objects with exactly the spec\'s inputs, each described', () => {
  for (const tool of listed) {
    const schema = tool.inputSchema as { type: string; properties?: Record<string, { description?: string }>; required?: string[]; additionalProperties?: boolean };
    const spec = SPEC[tool.name];
    expect({ tool: tool.name, type: schema.type, additionalProperties: schema.additionalProperties }).toEqual({ tool: tool.name, type: 'object', additionalProperties: false });
    expect({ tool: tool.name, inputs: Object.keys(schema.properties ?? {}).sort() }).toEqual({ tool: tool.name, inputs: [...spec.inputs].sort() });
    expect({ tool: tool.name, required: [...(schema.required ?? [])].sort() }).toEqual({ tool: tool.name, required: [...spec.required].sort() });
    for (const [field, prop] of Object.entries(schema.properties ?? {})) {
      expect({ tool: tool.name, field, described: (prop.description ?? '').length > 10 }).toEqual({ tool: tool.name, field, described: true });
    }
  }
});

test('schemas carry the rules an agent needs: page size bounds and default, status values, event types as a list', () => {
  const byName = Object.fromEntries(listed.map((t) => [t.name, t.inputSchema as { properties: Record<string, Record<string, unknown>> }]));
  for (const name of ['list_subscriptions', 'list_members', 'list_purchases', 'list_events']) {
    expect(byName[name].properties.limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 25 });
  }
  expect(byName.list_subscriptions.properties.status.enum).toEqual(['active', 'trialing', 'past_due', 'cancelling', 'cancelled', 'paused']);
  expect(byName.list_events.properties.types).toMatchObject({ type: 'array', items: { type: 'string' } });
});

// What each tool does to the world, as an agent must be told it (MCP tool annotations).
// A read changes nothing (so repeating it is harmless) and touches only this service's
// data. create_checkout_link only adds (a checkout session, maybe a member), at the
// payment provider too. switch_subscription charges at once: destructive. Neither
// write promises that a repeat is harmless. docs/decisions/mcp-tool-annotations.md.
const R = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
const CREATE = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
const CHANGE = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };
const ANNOTATIONS: Record<string, { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean }> = {
  list_subscriptions: R,
  get_subscription: R,
  get_switch_options: R,
  list_plans: R,
  list_members: R,
  get_member_entitlements: R,
  check_entitlement: R,
  list_purchases: R,
  list_invoices: R,
  get_invoice: R,
  get_analytics_summary: R,
  get_revenue_report: R,
  get_cohorts_report: R,
  get_churn_report: R,
  get_member_value_report: R,
  get_trial_conversion_report: R,
  get_payment_recovery_report: R,
  list_events: R,
  list_webhook_endpoints: R,
  list_webhook_deliveries: R,
  list_audit_log: R,
  create_checkout_link: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  switch_subscription: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  // The catalog: a creation only adds (a second call with the same key is refused, not
  // repeated); a change or an archive replaces what was there (the same call again
  // changes nothing more). Neither leaves this service.
  get_catalog: R,
  preview_catalog_plan_price: R,
  create_catalog_tier: CREATE,
  update_catalog_tier: CHANGE,
  archive_catalog_tier: CHANGE,
  create_catalog_plan: CREATE,
  update_catalog_plan: CHANGE,
  archive_catalog_plan: CHANGE,
  create_catalog_entitlement: CREATE,
  update_catalog_entitlement: CHANGE,
  create_catalog_discount: CREATE,
  update_catalog_discount: CHANGE,
  archive_catalog_discount: CHANGE,
};

test('every tool states all four annotations, as the table says: reads read-only and closed-world, a charge destructive', () => {
  expect(Object.keys(ANNOTATIONS).sort()).toEqual(Object.keys(SPEC).sort());
  for (const tool of listed) {
    expect({ tool: tool.name, annotations: tool.annotations }).toEqual({ tool: tool.name, annotations: { title: tool.title, ...ANNOTATIONS[tool.name] } });
    // A read tool runs a GET; a write tool does not.
    expect({ tool: tool.name, readOnly: tool.annotations?.readOnlyHint }).toEqual({ tool: tool.name, readOnly: !SPEC[tool.name].write });
  }
  expect(listed.filter((t) => t.annotations?.destructiveHint).map((t) => t.name).sort()).toEqual(['switch_subscription',
    ...Object.entries(ANNOTATIONS).filter(([, a]) => a === CHANGE).map(([n]) => n)].sort());
});

test('descriptions say what the tool returns and which scope it needs', () => {
  for (const tool of listed) {
    expect(tool.description?.length ?? 0).toBeGreaterThan(60);
    expect({ tool: tool.name, scoped: tool.description?.includes(`Requires the API key scope ${SPEC[tool.name].scope}.`) }).toEqual({ tool: tool.name, scoped: true });
  }
});
