// The catalog from the API and the dashboard (issue 31 item 1): create, change and
// archive tiers, plans, entitlements with their benefits and discount codes, with the
// scope catalog:write. Every write is a SQL operation whose function merges the
// request into the stored object and calls that object's put
// (db/migrations/fixtures/functions/20-catalog-write.sql), which `billing catalog
// apply` calls too: the rules are the database's, once, so the file, the dashboard and
// the API cannot disagree (docs/decisions/catalog-write-rules-in-sql.md). The schemas
// here say the types and bounds for the OpenAPI document and refuse the absurd early;
// the rules across fields (a recurring plan's interval, a discount's value) are SQL's.
import { z } from 'zod';
import { idParam, timestamp } from '../fields';
import { defineOperation, Operation } from '../operation';
import { catalog, catalogDiscount, catalogEntitlement, catalogPlanChange, catalogTier, pricePreview } from './catalog-schema';
import { platformConnection, platformSecret, platformSettings, savePlatformConnection } from './platform-config-operations';

const key = z.string().min(1).max(100).describe('Letters, digits, "_", ".", ":" or "-", at most 100 characters; unique in the community; never changes');
const text = (max: number) => z.string().max(max);
const int = z.number().int().min(-2147483648).max(2147483647);
const nonNeg = z.number().int().min(0).max(2147483647);

const tierFields = {
  name: text(200).describe('Shown to buyers'),
  description: text(2000).nullable().optional().describe('Shown to buyers under the name; null: none'),
  kind: z.enum(['subscription', 'one_time']).optional().describe('Default subscription'),
  billing_mode: z.enum(['recurring', 'one_time']).optional().describe('By kind when absent: a one_time tier is billed one_time'),
  rank: int.optional().describe('Order, and what counts as an upgrade (higher)'),
  active: z.boolean().optional().describe('false: archived, not offered (default true)'),
  features: z.array(text(500)).max(100).optional().describe('Feature lines shown to buyers, in order'),
  perks: z.array(z.object({ title: text(200), detail: text(1000).nullable().optional() })).max(100).optional().describe('Perks shown to buyers: a title and an optional detail each'),
  entitlements: z.array(key).max(100).optional().describe('Entitlement keys; the tier\'s links become exactly these'),
};

const planFields = {
  name: text(200).nullable().optional().describe('Shown to buyers, e.g. "Monthly"; null: none'),
  amount_cents: nonNeg.describe('The price new buyers pay, in minor units. A change leaves existing subscribers at theirs until `billing plans migrate` moves them with notice'),
  currency: z.string().max(3).describe('Lowercase ISO 4217, e.g. "usd"'),
  interval: z.enum(['month', 'year']).nullable().optional().describe('Required for a recurring tier; null for a one_time tier'),
  trial_days: nonNeg.optional().describe('Free days before the first charge (recurring plans; default 0)'),
  access_days: nonNeg.nullable().optional().describe('One-time plans only: how long access lasts (null: forever)'),
  active: z.boolean().optional().describe('false: archived, no new checkout (default true)'),
};

const entitlementFields = {
  name: text(200).describe('Shown to members and operators'),
  benefits: z.array(z.object({
    platform: key.describe('A platform connection\'s key'),
    type: text(100).describe('Discord: role or channel; Telegram: chat'),
    value: text(500).describe('The role, channel or chat id'),
  })).max(100).optional().describe('The entitlement\'s benefits become exactly these'),
};

const discountFields = {
  name: text(200).nullable().optional().describe('Shown to operators; null: none'),
  value_type: z.enum(['percent', 'amount']).describe('percent (with percent_off) or amount (with amount_off_cents and currency)'),
  percent_off: z.number().nullable().optional().describe('For value_type percent: above 0, at most 100'),
  amount_off_cents: nonNeg.nullable().optional().describe('For value_type amount, with currency'),
  currency: z.string().max(3).nullable().optional().describe('For value_type amount: lowercase ISO 4217, e.g. "usd"'),
  duration: z.enum(['once', 'repeating', 'forever']).optional().describe('How many invoices the discount applies to (default once)'),
  duration_months: nonNeg.nullable().optional().describe('Exactly when duration is repeating'),
  use_limit: nonNeg.nullable().optional().describe('How many redemptions in all (null: unlimited)'),
  min_spend_cents: nonNeg.nullable().optional().describe('The smallest price the code applies to, in minor units'),
  max_spend_cents: nonNeg.nullable().optional().describe('The largest price the code applies to, in minor units'),
  starts_at: timestamp.max(40).nullable().optional().describe('RFC 3339 instant from which the code is redeemable'),
  expires_at: timestamp.max(40).nullable().optional().describe('RFC 3339 instant, after starts_at, when the code stops'),
  is_active: z.boolean().optional().describe('false: turned off, not redeemable (default true)'),
  tiers: z.array(key).max(100).optional().describe('Tier keys the code is limited to ([]: any)'),
  members: z.array(z.object({
    platform: z.enum(['discord', 'telegram']), platform_uid: text(200), username: text(200).nullable().optional(),
  })).max(1000).optional().describe('Only these members may redeem it ([]: anyone)'),
};

/** PATCH: every field optional; a field left out keeps its value. */
const partial = <T extends z.ZodRawShape>(shape: T) => z.object(shape).partial();

const WRITE = 'Additive (issue 31). The rules are the same as `billing catalog apply`\'s, held by the database; '
  + 'a refused value answers 422 invalid_request naming the field in param. ';

export const catalogWriteOperations: Operation[] = [
  defineOperation({
    name: 'get_catalog',
    method: 'GET',
    path: '/v1/catalog',
    scope: 'plans:read',
    tag: 'Catalog',
    summary: 'The catalog with keys: its platform connections (never a secret), every tier (archived ones too) with its plans, and every entitlement with its benefits',
    response: catalog,
    sql: 'catalog_get',
  }),
  defineOperation({
    name: 'create_catalog_platform',
    method: 'POST',
    path: '/v1/catalog/platforms',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Add a platform connection (a Discord server or a Telegram chat), with its bot token if given',
    description: 'Additive (issue 31). The settings are checked by the database (billing.platform_settings_problem), as for '
      + '`billing catalog apply` and the dashboard; a refused one answers 422 naming it in param. Secrets are write-only: '
      + 'stored encrypted (WEBHOOK_ENCRYPTION_KEY; without it 503), never answered. A key in use answers 409 conflict. '
      + 'Connections are not archived: they carry benefits members hold.',
    body: z.object({
      key,
      platform: z.enum(['discord', 'telegram']).describe('discord or telegram; never changes'),
      name: text(200).nullable().optional().describe('Shown to operators; null: none'),
      settings: platformSettings.optional(),
      bot_token: platformSecret('The bot token'),
      client_secret: platformSecret('The Discord application\'s OAuth2 client secret'),
    }),
    response: platformConnection,
    status: 201,
    idempotent: true,
    handler: savePlatformConnection,
  }),
  defineOperation({
    name: 'update_catalog_platform',
    method: 'PATCH',
    path: '/v1/catalog/platforms/{id}',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Change a platform connection\'s name and settings, and set, replace or remove its secrets',
    description: 'Additive (issue 31). A field left out keeps its value; settings replaces them whole. Its key and platform stay.',
    params: z.object({ id: idParam('Connection id (pcfg_...)') }),
    body: z.object({
      name: text(200).nullable().optional().describe('Shown to operators; null: none'),
      settings: platformSettings.optional(),
      bot_token: platformSecret('The bot token'),
      client_secret: platformSecret('The Discord application\'s OAuth2 client secret'),
    }),
    response: platformConnection,
    idempotent: true,
    handler: savePlatformConnection,
  }),
  defineOperation({
    name: 'create_catalog_tier',
    method: 'POST',
    path: '/v1/catalog/tiers',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Create a tier',
    description: `${WRITE}A key in use answers 409 conflict.`,
    body: z.object({ key, ...tierFields }),
    response: catalogTier,
    status: 201,
    idempotent: true,
    sql: 'catalog_tier_create',
  }),
  defineOperation({
    name: 'update_catalog_tier',
    method: 'PATCH',
    path: '/v1/catalog/tiers/{id}',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Change a tier',
    description: `${WRITE}A field left out keeps its value. Its plans must still fit its billing_mode.`,
    params: z.object({ id: idParam('Tier id (tier_...)') }),
    body: partial(tierFields),
    response: catalogTier,
    idempotent: true,
    sql: 'catalog_tier_update',
  }),
  defineOperation({
    name: 'archive_catalog_tier',
    method: 'POST',
    path: '/v1/catalog/tiers/{id}/archive',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Archive a tier: no longer offered; what was sold on it stays',
    description: 'Sets active false (PATCH active true offers it again). Tiers are never deleted: subscriptions and purchases name them.',
    params: z.object({ id: idParam('Tier id (tier_...)') }),
    response: catalogTier,
    idempotent: true,
    sql: 'catalog_tier_archive',
  }),
  defineOperation({
    name: 'create_catalog_plan',
    method: 'POST',
    path: '/v1/catalog/plans',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Create a plan (a price) of a tier',
    description: `${WRITE}A key in use answers 409 conflict.`,
    body: z.object({ key, tier_id: idParam('The tier (tier_...)'), ...planFields }),
    response: catalogPlanChange,
    status: 201,
    idempotent: true,
    sql: 'catalog_plan_create',
  }),
  defineOperation({
    name: 'update_catalog_plan',
    method: 'PATCH',
    path: '/v1/catalog/plans/{id}',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Change a plan; a new price is for new buyers',
    description: `${WRITE}A field left out keeps its value. A new amount_cents is what new buyers pay; existing subscribers `
      + 'keep their price until `billing plans migrate` moves them with notice: price_change says how many (ask '
      + 'GET /v1/catalog/plans/{id}/price-preview before).',
    params: z.object({ id: idParam('Plan id (plan_...)') }),
    body: partial(planFields),
    response: catalogPlanChange,
    idempotent: true,
    sql: 'catalog_plan_update',
  }),
  defineOperation({
    name: 'archive_catalog_plan',
    method: 'POST',
    path: '/v1/catalog/plans/{id}/archive',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Archive a plan: no new checkout; its subscribers keep it',
    description: 'Sets active false. Plans are never deleted: subscriptions, purchases and invoices name them.',
    params: z.object({ id: idParam('Plan id (plan_...)') }),
    response: catalogPlanChange,
    idempotent: true,
    sql: 'catalog_plan_archive',
  }),
  defineOperation({
    name: 'preview_catalog_plan_price',
    method: 'GET',
    path: '/v1/catalog/plans/{id}/price-preview',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'How many subscribers a new price of a plan concerns, before it is saved',
    params: z.object({ id: idParam('Plan id (plan_...)') }),
    query: z.object({ amount_cents: z.coerce.number().int().min(0).max(2147483647).describe('The new price, in minor units') }),
    response: pricePreview,
    sql: 'catalog_plan_price_preview',
  }),
  defineOperation({
    name: 'create_catalog_entitlement',
    method: 'POST',
    path: '/v1/catalog/entitlements',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Create an entitlement with its benefits',
    description: `${WRITE}A key in use answers 409 conflict.`,
    body: z.object({ key, ...entitlementFields }),
    response: catalogEntitlement,
    status: 201,
    idempotent: true,
    sql: 'catalog_entitlement_create',
  }),
  defineOperation({
    name: 'update_catalog_entitlement',
    method: 'PATCH',
    path: '/v1/catalog/entitlements/{id}',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Change an entitlement\'s name or benefits',
    description: `${WRITE}A field left out keeps its value; benefits replaces them whole (members holding it are updated).`,
    params: z.object({ id: idParam('Entitlement id (ent_...)') }),
    body: partial(entitlementFields),
    response: catalogEntitlement,
    idempotent: true,
    sql: 'catalog_entitlement_update',
  }),
  defineOperation({
    name: 'create_catalog_discount',
    method: 'POST',
    path: '/v1/catalog/discounts',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Create a discount code',
    description: `${WRITE}A code in use (case-insensitively, archived ones too) answers 409 conflict.`,
    body: z.object({ code: z.string().max(64).describe('1 to 64 letters, digits, "_" or "-"; matched case-insensitively'), ...discountFields }),
    response: catalogDiscount,
    status: 201,
    idempotent: true,
    sql: 'catalog_discount_create',
  }),
  defineOperation({
    name: 'update_catalog_discount',
    method: 'PATCH',
    path: '/v1/catalog/discounts/{id}',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Change a discount code',
    description: `${WRITE}A field left out keeps its value. An archived code answers 409 conflict.`,
    params: z.object({ id: idParam('Discount id (a UUID)') }),
    body: partial(discountFields),
    response: catalogDiscount,
    idempotent: true,
    sql: 'catalog_discount_update',
  }),
  defineOperation({
    name: 'archive_catalog_discount',
    method: 'POST',
    path: '/v1/catalog/discounts/{id}/archive',
    scope: 'catalog:write',
    tag: 'Catalog',
    summary: 'Archive a discount code: no longer redeemable; redemptions stay',
    params: z.object({ id: idParam('Discount id (a UUID)') }),
    response: catalogDiscount,
    idempotent: true,
    sql: 'catalog_discount_archive',
  }),
];
