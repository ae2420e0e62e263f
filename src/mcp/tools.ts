// The MCP tool table: the tools of the spec's "MCP tool endpoint" section, plus the
// additive invoice tools (list_invoices, get_invoice; issue 11) and the audit log
// (list_audit_log; issue 31) and the catalog's (get_catalog, preview_catalog_plan_price and
// the create, change and archive tools of issue 31 item 1).
// Each tool names the registry operation it runs; the tool only reshapes its flat,
// agent-friendly input into the operation's REST input ({params, query, body}).
// Scope, validation rules and the work itself stay in the operation, so a tool
// answers exactly what its REST twin answers: each input field is the operation's own
// field (its type and limits), described in the tool's terms.
import { z } from 'zod';
import { REPORTS } from '../domain/analytics/analytics-reports';
import { limitParam } from '../domain/fields';
import { identityPair } from '../domain/members/member-schema';
import { findOperation } from '../operations';

/** The REST-shaped input a tool produces; path values are positional (see `path`). */
export interface ToolRequest {
  query?: Record<string, unknown>;
  body?: Record<string, unknown>;
}

export interface ToolDef {
  name: string;
  title: string;
  /** What the tool does and returns, written for an agent deciding whether and how to call it. */
  description: string;
  /** Strict: an unknown field is a tool error naming it. */
  input: z.ZodObject<z.ZodRawShape>;
  /** Registry operation this tool runs (src/operations/index.ts findOperation). */
  operation: string;
  /** What calling it does to the world, for an agent deciding whether to ask first (see READ). */
  annotations: ToolHints;
  /**
   * Input fields that fill the operation's path placeholders, in path order
   * (e.g. ['subscription_id'] for /v1/subscriptions/{id}): the adapter reads the
   * placeholder names from the operation, so errors can name the tool's field.
   */
  path?: readonly string[];
  /** Query and body of the REST request for this input. */
  map?: (input: Record<string, unknown>) => ToolRequest;
  /** REST field names (as an error's `param` names them) -> this tool's field names. */
  fieldNames?: Record<string, string>;
}

/** MCP tool annotations (hints an agent uses to decide whether to confirm a call with its user). */
export interface ToolHints {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/**
 * A read: changes nothing, so repeating it changes nothing either, and it reads only
 * this service's own database (closed world). docs/decisions/mcp-tool-annotations.md.
 */
const READ: ToolHints = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

// ---- input fields, taken from the operations ------------------------------------

type Part = 'params' | 'query' | 'body';

/** The field `name` of an operation's params, query or body schema (fails at startup if absent). */
function opField(operation: string, part: Part, name: string): z.ZodType {
  const field = findOperation(operation)?.[part]?.shape[name];
  if (!field) throw new Error(`MCP tools: operation ${operation} has no ${part} field ${name}`);
  return field as z.ZodType;
}

// The cursor travels to the operation verbatim (it decodes it), so the tool takes the text.
const cursor = z.string().min(1).max(200)
  .describe('Opaque cursor: copy next_cursor from the previous page verbatim; omit for the first page.');
const limit = limitParam.describe('Page size, 1 to 100 (default 25).');
const subscriptionId = opField('get_subscription', 'params', 'id').describe('Subscription id (sub_...), as returned by list_subscriptions.');
const memberId = opField('get_member_entitlements', 'params', 'id').describe('Member id (mem_...), as returned by list_members.');
const tierId = (what: string) => opField('create_checkout_link', 'body', 'tier_id').describe(`Plan tier id (tier_...) from list_plans; ${what}`);
// One identity pair, with the types of the REST query (platform: the first-party enum).
const pairField = (name: string) => opField('check_entitlement', 'query', name);
const platform = pairField('platform')
  .describe('Connected platform of the identity, e.g. discord or telegram. Give together with platform_uid.');
const platformUid = pairField('platform_uid')
  .describe("The user's id on that platform. Give together with platform.");
const namespace = pairField('namespace')
  .describe("Operator namespace of an external (operator-owned) user id, e.g. your app's name. Give together with external_user_id.");
const externalUserId = pairField('external_user_id')
  .describe("The user's id in your own application. Give together with namespace.");

/** The buyer's details create_checkout_link takes, as REST's body names them. */
const CHECKOUT_CUSTOMER = ['customer_email', 'customer_name', 'customer_address_lines', 'customer_country', 'customer_tax_id'] as const;

const PAGE_NOTE = 'Newest first. Returns {data: [...], next_cursor}; pass next_cursor as cursor for the next page (null means last page).';

/** Copies the listed entries of `input` that have a value. */
function pick(input: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    if (input[key] !== undefined) out[key] = input[key];
  }
  return out;
}

// ---- the catalog (issue 31 item 1; scope catalog:write) -------------------------------

/**
 * Creating adds to the catalog only; changing replaces what a field held (a price, a
 * tier's links) and archiving withdraws an object from sale: both destructive, as an
 * agent must be told. None reaches the payment provider. docs/decisions/mcp-tool-annotations.md.
 */
const CREATE: ToolHints = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
const CHANGE: ToolHints = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };

const RULES = 'The rules are billing catalog apply\'s, held by the database: a refused value answers invalid_request naming the field.';

/** A catalog write tool: the operation's body fields as they are, and its {id} as `idField`. */
function catalogWrite(name: string, title: string, annotations: ToolHints, description: string, idField?: [string, string]): ToolDef {
  const op = findOperation(name);
  if (!op) throw new Error(`MCP tools: no operation ${name}`);
  const body = (op.body?.shape ?? {}) as z.ZodRawShape;
  const input: z.ZodRawShape = idField ? { [idField[0]]: opField(name, 'params', 'id').describe(idField[1]), ...body } : { ...body };
  return {
    name, title, operation: name, annotations, description: `${description} ${RULES}`,
    input: z.strictObject(input),
    path: idField ? [idField[0]] : undefined,
    map: (i) => ({ body: pick(i, Object.keys(body)) }),
  };
}

function catalogTools(): ToolDef[] {
  const tierId = 'Tier id (tier_...), as get_catalog returns it.';
  const planId = 'Plan id (plan_...), as get_catalog returns it.';
  const entId = 'Entitlement id (ent_...), as get_catalog returns it.';
  const codeId = 'Discount code id (a UUID), as list_discounts or create_catalog_discount returns it.';
  return [
    {
      name: 'get_catalog',
      title: 'Get the catalog',
      operation: 'get_catalog',
      annotations: READ,
      description: 'The whole catalog with ids and keys: every tier (archived ones too, active false) with its plans (price, interval, trial, active) and entitlement keys, and every entitlement with its benefits. Returns {tiers, entitlements}.',
      input: z.strictObject({}),
    },
    {
      name: 'preview_catalog_plan_price',
      title: 'Preview a plan\'s price change',
      operation: 'preview_catalog_plan_price',
      annotations: READ,
      description: 'Before changing a plan\'s price: how many subscriptions it concerns (not cancelled, paying another price than the new one; they keep their price until migrated with notice). Returns {plan_id, from_cents, to_cents, currency, subscriptions, pending_migration}. Tell the user the count before update_catalog_plan.',
      input: z.strictObject({
        plan_id: opField('preview_catalog_plan_price', 'params', 'id').describe(planId),
        amount_cents: opField('preview_catalog_plan_price', 'query', 'amount_cents'),
      }),
      path: ['plan_id'],
      map: (i) => ({ query: pick(i, ['amount_cents']) }),
    },
    catalogWrite('create_catalog_tier', 'Create a tier', CREATE, 'Create a plan tier (key, name; kind, billing_mode, rank, features, perks, entitlement keys). Returns the tier with its (no) plans; add prices with create_catalog_plan.'),
    catalogWrite('update_catalog_tier', 'Change a tier', CHANGE, 'Change a tier\'s fields; a field left out keeps its value, entitlements replaces its links. Returns the tier.', ['tier_id', tierId]),
    catalogWrite('archive_catalog_tier', 'Archive a tier', CHANGE, 'Withdraw a tier from sale (active false; no new checkout; what was sold stays). Returns the tier.', ['tier_id', tierId]),
    catalogWrite('create_catalog_plan', 'Create a plan', CREATE, 'Create a plan (a price) of a tier: key, tier_id, amount_cents, currency, interval (recurring tiers) or access_days (one-time tiers). Returns the plan.'),
    catalogWrite('update_catalog_plan', 'Change a plan', CHANGE, 'Change a plan; a field left out keeps its value. A new amount_cents is for new buyers: existing subscribers keep their price until migrated, and price_change says how many (ask preview_catalog_plan_price first and tell the user). Returns the plan.', ['plan_id', planId]),
    catalogWrite('archive_catalog_plan', 'Archive a plan', CHANGE, 'Withdraw a plan from sale (active false; its subscribers keep it). Returns the plan.', ['plan_id', planId]),
    catalogWrite('create_catalog_entitlement', 'Create an entitlement', CREATE, 'Create an entitlement (key, name) with its benefits on the community\'s platform connections. Returns the entitlement.'),
    catalogWrite('update_catalog_entitlement', 'Change an entitlement', CHANGE, 'Change an entitlement\'s name or replace its benefits (members holding it are updated on their platforms). Returns the entitlement.', ['entitlement_id', entId]),
    catalogWrite('create_catalog_discount', 'Create a discount code', CREATE, 'Create a discount code: percent_off, or amount_off_cents with currency; duration; limits; tiers it is limited to. Returns the code.'),
    catalogWrite('update_catalog_discount', 'Change a discount code', CHANGE, 'Change a discount code; a field left out keeps its value. Returns the code.', ['discount_id', codeId]),
    catalogWrite('archive_catalog_discount', 'Archive a discount code', CHANGE, 'Archive a discount code: it can no longer be redeemed (its redemptions stay); it cannot be changed afterwards. Returns the code.', ['discount_id', codeId]),
  ];
}

export const tools: readonly ToolDef[] = [
  {
    name: 'list_subscriptions',
    title: 'List subscriptions',
    operation: 'list_subscriptions',
    annotations: READ,
    description: `List the community's subscriptions. ${PAGE_NOTE} Each subscription has id, status, plan_id, tier_id, member_id, amount_cents, currency, interval, current_period_end, cancel_at and scheduled_plan_id. Filter by status, plan_id or member_id.`,
    input: z.strictObject({
      status: opField('list_subscriptions', 'query', 'status').describe('Only subscriptions in this status.'),
      plan_id: opField('list_subscriptions', 'query', 'plan_id').describe('Only subscriptions on this billing plan (plan_...).'),
      member_id: opField('list_subscriptions', 'query', 'member_id').describe('Only subscriptions of this member (mem_...).'),
      cursor: cursor.optional(),
      limit,
    }),
    map: (i) => ({ query: pick(i, ['status', 'plan_id', 'member_id', 'cursor', 'limit']) }),
  },
  {
    name: 'get_subscription',
    title: 'Get a subscription',
    operation: 'get_subscription',
    annotations: READ,
    description: 'Get one subscription by id: status, plan and tier, member, amount, current period end, and any scheduled cancellation (cancel_at) or scheduled plan change (scheduled_plan_id, scheduled_at). An id of another community answers not_found.',
    input: z.strictObject({ subscription_id: subscriptionId }),
    path: ['subscription_id'],
  },
  {
    name: 'get_switch_options',
    title: 'Get plan switch options',
    operation: 'get_switch_options',
    annotations: READ,
    description: 'List the plans an active or trialing subscription can switch to, as {same_tier, upgrades, downgrades} (each entry: plan_id, plan_name, tier_id, amount_cents, currency, interval, trial_days). Use a plan_id from here with switch_subscription. A cancelling or paused subscription answers conflict.',
    input: z.strictObject({ subscription_id: subscriptionId }),
    path: ['subscription_id'],
  },
  {
    name: 'list_plans',
    title: 'List plan tiers',
    operation: 'list_plans',
    annotations: READ,
    description: 'List the active plan tiers on sale, each with its active billing plans (id, amount_cents, currency, interval, trial_days). Returns {data: [tier]}. Use a tier id and plan id from here with create_checkout_link.',
    input: z.strictObject({}),
  },
  {
    name: 'list_members',
    title: 'List members',
    operation: 'list_members',
    annotations: READ,
    description: 'List the community\'s members with their platform identities, external subjects, email, display_name '
      + '(the Discord username, else Telegram\'s, else the email, else an external user id), and the operators\' note and '
      + 'tags. Find members with q (a case-insensitive substring of a username, platform id, email, external user id or '
      + `member id) and narrow them by status, tier_id, plan_id (one subscription with them all), tag, created_after and created_before. ${PAGE_NOTE} `
      + 'Send the same search and filters with a cursor.',
    input: z.strictObject({
      q: opField('list_members', 'query', 'q').describe('Search text, e.g. a Discord username: a case-insensitive substring of a username, platform id, email, external user id or member id.'),
      status: opField('list_members', 'query', 'status').describe('Only members with a subscription in this status.'),
      tier_id: opField('list_members', 'query', 'tier_id').describe('Plan tier id (tier_...) from list_plans: only members with a subscription on it.'),
      plan_id: opField('list_members', 'query', 'plan_id').describe('Billing plan id from list_plans: only members with a subscription on it.'),
      tag: opField('list_members', 'query', 'tag').describe('Only members with this tag.'),
      created_after: opField('list_members', 'query', 'created_after').describe('ISO 8601 instant: only members created at or after it.'),
      created_before: opField('list_members', 'query', 'created_before').describe('ISO 8601 instant: only members created before it.'),
      cursor: cursor.optional(),
      limit,
    }),
    map: (i) => ({ query: pick(i, ['q', 'status', 'tier_id', 'plan_id', 'tag', 'created_after', 'created_before', 'cursor', 'limit']) }),
  },
  {
    name: 'get_member_entitlements',
    title: "Get a member's entitlements",
    operation: 'get_member_entitlements',
    annotations: READ,
    description: "List a member's active entitlements as {data: [member entitlement]}: key, name, status, revision, the sources (subscriptions, purchases) that support each, and its platform benefits. This is the authoritative answer to what a member may access.",
    input: z.strictObject({ member_id: memberId }),
    path: ['member_id'],
  },
  {
    name: 'check_entitlement',
    title: 'Check an entitlement',
    operation: 'check_entitlement',
    annotations: READ,
    description: 'Check whether a user has access, identified by exactly one pair: platform with platform_uid, or namespace with external_user_id. Give tier_id to check access to that tier; omit it to check for any access. Returns {entitled, entitlements}; an unknown user is not entitled.',
    input: z.strictObject({
      platform,
      platform_uid: platformUid,
      namespace,
      external_user_id: externalUserId,
      tier_id: opField('check_entitlement', 'query', 'tier_id').describe('Plan tier id (tier_...) from list_plans; omit to check for any access.'),
    }),
    // The pair rule is the operation's (same fields, same names as REST).
    map: (i) => ({ query: pick(i, ['platform', 'platform_uid', 'namespace', 'external_user_id', 'tier_id']) }),
  },
  {
    name: 'list_purchases',
    title: 'List one-time purchases',
    operation: 'list_purchases',
    annotations: READ,
    description: `List one-time purchases (id, status, plan_id, tier_id, member_id, amount_cents, currency, access_expires_at, paid_at). ${PAGE_NOTE}`,
    input: z.strictObject({ cursor: cursor.optional(), limit }),
    map: (i) => ({ query: pick(i, ['cursor', 'limit']) }),
  },
  {
    name: 'list_invoices',
    title: 'List invoices',
    operation: 'list_invoices',
    annotations: READ,
    description: `List invoices, newest first (id, status, billing_reason, member_id, subscription_id or purchase_id, currency, subtotal_cents, discount_cents, total_cents, amount_paid_cents, lines, attempt_count, next_attempt_at, paid_at). Every charge is an invoice; an open one with next_attempt_at is being retried. Filter by member_id, subscription_id or status. ${PAGE_NOTE}`,
    input: z.strictObject({
      member_id: opField('list_invoices', 'query', 'member_id').describe('Member id (mem_...): only this member\'s invoices.'),
      subscription_id: opField('list_invoices', 'query', 'subscription_id').describe('Subscription id (sub_...): only its invoices.'),
      status: opField('list_invoices', 'query', 'status').describe('Only invoices in this status: draft, open (being collected), paid, void or uncollectible.'),
      cursor: cursor.optional(),
      limit,
    }),
    map: (i) => ({ query: pick(i, ['member_id', 'subscription_id', 'status', 'cursor', 'limit']) }),
  },
  {
    name: 'get_invoice',
    title: 'Get an invoice',
    operation: 'get_invoice',
    annotations: READ,
    description: 'Get one invoice by id (inv_...): its status, amounts, lines (each type, description, amount_cents, period) and payment attempts count.',
    input: z.strictObject({ invoice_id: opField('get_invoice', 'params', 'id').describe('Invoice id (inv_...), as returned by list_invoices.') }),
    path: ['invoice_id'],
  },
  {
    name: 'get_analytics_summary',
    title: 'Get the analytics summary',
    operation: 'get_analytics_summary',
    annotations: READ,
    description: 'Get the community\'s headline numbers: {mrr_cents, currency, active_subscribers, recent_signups, recent_cancels}.',
    input: z.strictObject({}),
  },
  ...REPORTS.map((r): ToolDef => {
    const op = `get_${r.name}_report`;
    const granular = r.name === 'revenue';
    return {
      name: op,
      title: `Get the ${r.name.replace(/_/g, ' ')} report`,
      operation: op,
      annotations: READ,
      description: `${r.summary}, as GET /v1/analytics/${r.slug} answers it: {from, to, data: [row]}, each row ${Object.keys(r.row.shape).join(', ')}. `
        + 'Money in minor units, net of tax; rates from 0 to 1; days and months are UTC dates (YYYY-MM-DD). '
        + (granular ? 'granularity day (default; at most 366 days) or month.' : 'One row per month (the 12 to this one by default).'),
      input: z.strictObject({
        ...(granular ? { granularity: opField(op, 'query', 'granularity') } : {}),
        from: opField(op, 'query', 'from'),
        to: opField(op, 'query', 'to'),
      }),
      map: (i) => ({ query: pick(i, ['granularity', 'from', 'to']) }),
    };
  }),
  {
    name: 'list_events',
    title: 'List events',
    operation: 'list_events',
    annotations: READ,
    description: 'Read the event feed, newest first: the same envelopes (id, type, timestamp, api_version, data) that webhooks deliver, e.g. member.entitlement.granted, member.entitlement.updated, member.entitlement.revoked. Give types to filter, and after_id (the newest evt_ id you have seen) to poll for newer events only. Returns {data: [event], next_cursor}; this tool has no cursor input, so read older history with a larger limit (up to 100).',
    input: z.strictObject({
      types: z.array(z.string().min(1).max(100)).min(1).max(50).optional()
        .describe('Only events of these types, e.g. ["member.entitlement.granted"].'),
      after_id: z.string().min(1).max(100).optional().describe('Only events newer than this event id (evt_...).'),
      limit,
    }),
    map: (i) => ({
      query: { ...pick(i, ['after_id', 'limit']), ...(i.types ? { type: (i.types as string[]).join(',') } : {}) },
    }),
    fieldNames: { type: 'types' },
  },
  {
    name: 'list_webhook_endpoints',
    title: 'List webhook endpoints',
    operation: 'list_webhook_endpoints',
    annotations: READ,
    description: "List the community's outbound webhook endpoints (url, subscribed event types, enabled state). Signing secrets are never returned. Use an endpoint id with list_webhook_deliveries.",
    input: z.strictObject({}),
  },
  {
    name: 'list_webhook_deliveries',
    title: 'List webhook deliveries',
    operation: 'list_webhook_deliveries',
    annotations: READ,
    description: "List the delivery attempt log of one webhook endpoint, newest first: which events were delivered, their status and the endpoint's last response. Returns {data: [delivery], next_cursor}.",
    input: z.strictObject({
      endpoint_id: opField('list_webhook_deliveries', 'params', 'id').describe('Webhook endpoint id, as returned by list_webhook_endpoints.'),
      cursor: cursor.optional(),
    }),
    path: ['endpoint_id'],
    map: (i) => ({ query: pick(i, ['cursor']) }),
  },
  {
    name: 'list_audit_log',
    title: 'List the audit log',
    operation: 'list_audit_log',
    annotations: READ,
    description: `Read who changed what: one entry per changed row (id, occurred_at, actor_type, actor_id, key_id, request_id, table, row_id, operation, changed, before, after), for the catalog, API keys, webhook endpoints, settings and operators, and for changes an actor (a key, an operator, the CLI, a member in the portal) made to subscriptions, invoices, refunds, grants and members. Credentials and personal data are never in it. Filter by actor_type, actor_id, table, row_id, operation, since and until. ${PAGE_NOTE}`,
    input: z.strictObject({
      actor_type: opField('list_audit_log', 'query', 'actor_type').describe('Only changes made by this kind of actor: operator, api_key, member, cli, sql_login or service.'),
      actor_id: opField('list_audit_log', 'query', 'actor_id').describe('Only changes made by this actor: an operator (opu_...), a key (key_...), a member (mem_...), a CLI command or a login role.'),
      table: opField('list_audit_log', 'query', 'table').describe('Only changes of this table, e.g. plans or subscriptions.'),
      row_id: opField('list_audit_log', 'query', 'row_id').describe('Only changes of this row (its id, e.g. plan_... or sub_...).'),
      operation: opField('list_audit_log', 'query', 'operation').describe('Only inserts, updates or deletes.'),
      since: opField('list_audit_log', 'query', 'since').describe('Only changes at or after this instant (RFC 3339) or day (YYYY-MM-DD, UTC).'),
      until: opField('list_audit_log', 'query', 'until').describe('Only changes before this instant (RFC 3339) or day (YYYY-MM-DD, UTC).'),
      cursor: cursor.optional(),
      limit,
    }),
    map: (i) => ({ query: pick(i, ['actor_type', 'actor_id', 'table', 'row_id', 'operation', 'since', 'until', 'cursor', 'limit']) }),
  },
  {
    name: 'create_checkout_link',
    title: 'Create a checkout link',
    operation: 'create_checkout_link',
    // Additive: a new checkout session (and, for a new buyer, the member); nothing is
    // charged or changed. Each call makes another session (not idempotent), at the
    // payment provider too (Stripe: open world).
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    description: 'Create a checkout page URL for a buyer to pay for a plan tier. Identify the buyer by exactly one pair: platform with platform_uid (a connected platform identity), or namespace with external_user_id (a user of your own application; the member is created if needed). plan_id is required when the tier has more than one active plan (see list_plans). Returns {checkout_id, member_id, url, expires_at}. Creating a link grants nothing: access starts only when the buyer pays. Fails with not_eligible if the buyer already has the tier, plan_required, discount_invalid or payment_config_inactive.',
    input: z.strictObject({
      tier_id: tierId('the tier to sell.'),
      plan_id: opField('create_checkout_link', 'body', 'plan_id')
        .describe('Billing plan (plan_...) of that tier; required only when the tier has several active plans.'),
      platform,
      platform_uid: platformUid,
      namespace,
      external_user_id: externalUserId,
      return_url: opField('create_checkout_link', 'body', 'return_url')
        .describe('HTTPS page the buyer returns to after paying (external buyers only); checkout_id is appended. Reaching it does not confirm payment.'),
      discount_code: opField('create_checkout_link', 'body', 'discount_code').describe('Discount code to apply (case-insensitive).'),
      client_reference_id: opField('create_checkout_link', 'body', 'client_reference_id')
        .describe('Your own reference for this sale, copied into the entitlement\'s source metadata.'),
      // The buyer's details, as REST takes them (docs/decisions/tax.md): they decide the
      // tax of the checkout's invoice and become the member's when paid.
      customer_email: opField('create_checkout_link', 'body', 'customer_email')
        .describe('The buyer\'s email, set on the member when the checkout completes if it has none.'),
      customer_name: opField('create_checkout_link', 'body', 'customer_name').describe('The buyer\'s name for invoices.'),
      customer_address_lines: opField('create_checkout_link', 'body', 'customer_address_lines')
        .describe('The buyer\'s postal address as printed lines, at most 6.'),
      customer_country: opField('create_checkout_link', 'body', 'customer_country')
        .describe('The buyer\'s country, ISO 3166-1 alpha-2 (e.g. "DE"): it decides the tax of their invoices.'),
      customer_tax_id: opField('create_checkout_link', 'body', 'customer_tax_id')
        .describe('The buyer\'s tax id; an EU VAT id of another member state than the community\'s makes the sale reverse charged.'),
    }),
    map: (i) => {
      const pair = identityPair(i);
      const subject = pair.kind === 'platform'
        ? { platform: pair.platform, platform_uid: pair.platform_uid }
        : { external: { namespace: pair.namespace, external_user_id: pair.external_user_id } };
      return {
        body: {
          ...pick(i, ['tier_id', 'plan_id']), subject,
          ...pick(i, ['return_url', 'discount_code', 'client_reference_id', ...CHECKOUT_CUSTOMER]),
        },
      };
    },
    fieldNames: {
      subject: 'platform',
      'subject.platform': 'platform',
      'subject.platform_uid': 'platform_uid',
      'subject.external': 'namespace',
      'subject.external.namespace': 'namespace',
      'subject.external.external_user_id': 'external_user_id',
    },
  },
  {
    name: 'switch_subscription',
    title: 'Switch a subscription to another plan',
    operation: 'switch_subscription',
    // Destructive: a same-tier switch or an upgrade replaces the plan and charges the
    // prorated difference at once (a downgrade replaces it at the period end); no call
    // undoes a charge. A repeat is not promised to be harmless, and the charge goes
    // through the payment provider (open world).
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    description: 'Move an active or trialing subscription to another plan taken from get_switch_options. A same-tier plan or an upgrade applies at once and charges the prorated difference immediately; a downgrade is scheduled for the period end (scheduled_plan_id, scheduled_at). Returns the updated subscription. Confirm with the user first: a charge cannot be undone by another call. This does not cancel anything.',
    input: z.strictObject({
      subscription_id: subscriptionId,
      plan_id: opField('switch_subscription', 'body', 'plan_id').describe('Target billing plan (plan_...), one of the plan_id values from get_switch_options.'),
    }),
    path: ['subscription_id'],
    map: (i) => ({ body: pick(i, ['plan_id']) }),
  },
  ...catalogTools(),
];

export function findTool(name: string): ToolDef | undefined {
  return tools.find((t) => t.name === name);
}
