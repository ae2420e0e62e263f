// The plan tier with its billing plans, as billing_api.plans_list/plans_get build it.
import { z } from 'zod';
import { BILLING_INTERVALS, TIER_BILLING_MODES, TIER_KINDS } from '../../core/statuses';

export const billingPlan = z.object({
  id: z.string(),
  name: z.string().nullable(),
  amount_cents: z.number().int(),
  currency: z.string(),
  interval: z.enum(BILLING_INTERVALS).nullable(),
  trial_days: z.number().int(),
  access_days: z.number().int().nullable(),
});

export const tier = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  kind: z.enum(TIER_KINDS),
  billing_mode: z.enum(TIER_BILLING_MODES),
  rank: z.number().int(),
  features: z.array(z.string()),
  perks: z.array(z.object({ title: z.string(), detail: z.string().nullable().optional() })),
  plans: z.array(billingPlan),
});
