// The subscription, as billing.subscription_json builds it (amount, currency and
// interval of the current plan). A subscription's plan always exists (foreign key,
// on delete restrict), so tier_id and tier_name are never null.
import { z } from 'zod';
import { BILLING_INTERVALS, SUBSCRIPTION_STATUSES } from '../../core/statuses';
import { timestamp } from '../fields';

export const subscription = z.object({
  id: z.string(),
  status: z.enum(SUBSCRIPTION_STATUSES),
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string(),
  tier_name: z.string(),
  member_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  interval: z.enum(BILLING_INTERVALS).nullable(),
  current_period_end: timestamp.nullable(),
  cancel_at: timestamp.nullable(),
  paused_until: timestamp.nullable(),
  scheduled_plan_id: z.string().nullable(),
  scheduled_at: timestamp.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

/** A plan a subscription can switch to (billing_api.subscription_switch_options). */
export const switchOption = z.object({
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  interval: z.enum(BILLING_INTERVALS).nullable(),
  trial_days: z.number().int(),
});
