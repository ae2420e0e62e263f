// The discount code with its redemption counts, as billing_api.discounts_list builds it.
import { z } from 'zod';
import { DISCOUNT_DURATIONS, DISCOUNT_VALUE_TYPES } from '../../core/statuses';
import { timestamp } from '../fields';

export const discount = z.object({
  id: z.string().describe('UUID'),
  code: z.string(),
  name: z.string().nullable(),
  value_type: z.enum(DISCOUNT_VALUE_TYPES),
  percent_off: z.number().nullable(),
  amount_off_cents: z.number().int().nullable(),
  currency: z.string().nullable(),
  duration: z.enum(DISCOUNT_DURATIONS),
  duration_months: z.number().int().nullable(),
  use_limit: z.number().int().nullable(),
  min_spend_cents: z.number().int().nullable(),
  max_spend_cents: z.number().int().nullable(),
  starts_at: timestamp.nullable(),
  expires_at: timestamp.nullable(),
  is_active: z.boolean(),
  tier_ids: z.array(z.string()),
  members: z.array(z.object({ platform: z.string().nullable(), platform_uid: z.string().nullable(), username: z.string().nullable() })),
  redeemed_count: z.number().int(),
  pending_count: z.number().int(),
  created_at: timestamp,
});
