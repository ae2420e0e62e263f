// The catalog's objects as the /v1/catalog operations answer them (with their keys, and
// inactive ones too): billing.catalog_tier_json, catalog_plan_json,
// catalog_entitlement_json and billing_private.catalog_discount_answer
// (db/migrations/fixtures/functions/20-catalog-write.sql).
import { z } from 'zod';
import { timestamp } from '../fields';
import { discount } from '../discounts/discount-schema';

export const catalogPlan = z.object({
  id: z.string(),
  key: z.string(),
  tier_id: z.string(),
  name: z.string().nullable(),
  amount_cents: z.number().int().describe('What new buyers pay, in minor units; existing subscribers keep their price until migrated'),
  currency: z.string(),
  interval: z.enum(['month', 'year']).nullable(),
  trial_days: z.number().int(),
  access_days: z.number().int().nullable(),
  active: z.boolean().describe('false once archived: no new checkout; what was sold stays'),
  stripe_price_id: z.string().nullable(),
  created_at: timestamp,
});

export const priceChange = z.object({
  from_cents: z.number().int(),
  to_cents: z.number().int(),
  currency: z.string(),
  subscriptions: z.number().int().describe('Subscriptions of the plan, not cancelled, that keep another price than the new one (until `billing plans migrate` moves them with notice)'),
  pending_migration: z.number().int().describe('How many of them already have a price migration pending'),
  subscription_ids: z.array(z.string()).describe('Their ids, the first 1000 in id order'),
});

export const catalogPlanChange = catalogPlan.extend({
  price_change: priceChange.nullable().describe('When this write changed the price: whom it concerns; else null'),
});

export const pricePreview = z.object({
  plan_id: z.string(),
  from_cents: z.number().int(),
  to_cents: z.number().int(),
  currency: z.string(),
  subscriptions: z.number().int().describe('Subscriptions the new price concerns: not cancelled, paying another price than it; they keep theirs until migrated with notice'),
  pending_migration: z.number().int(),
});

export const catalogTier = z.object({
  id: z.string(),
  key: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  kind: z.enum(['subscription', 'one_time']),
  billing_mode: z.enum(['recurring', 'one_time']),
  rank: z.number().int(),
  active: z.boolean().describe('false once archived: not offered (no checkout, not in GET /v1/plans)'),
  features: z.array(z.string()),
  perks: z.array(z.object({ title: z.string(), detail: z.string().nullable() })),
  entitlements: z.array(z.string()).describe('The keys of the entitlements the tier gives'),
  plans: z.array(catalogPlan),
  created_at: timestamp,
  updated_at: timestamp,
});

export const catalogEntitlement = z.object({
  id: z.string(),
  key: z.string(),
  name: z.string(),
  benefits: z.array(z.object({ platform: z.string().describe('The platform connection\'s key'), type: z.string(), value: z.string() })),
  created_at: timestamp,
});

export const catalogDiscount = discount.extend({
  tiers: z.array(z.string()).describe('The keys of the tiers the code is limited to ([]: any)'),
  archived: z.boolean().describe('Archived: no longer redeemable and left out of the catalog file'),
});

export const catalogPlatform = z.object({
  id: z.string(),
  key: z.string(),
  platform: z.enum(['discord', 'telegram']),
  name: z.string().nullable(),
  settings: z.record(z.string(), z.string()).describe('Never a secret: bot tokens and client secrets are stored encrypted apart'),
});

export const catalog = z.object({
  platforms: z.array(catalogPlatform),
  tiers: z.array(catalogTier),
  entitlements: z.array(catalogEntitlement),
});
