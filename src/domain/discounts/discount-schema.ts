// The discount code with its redemption counts, as billing_api.discounts_list builds it.
import { z } from 'zod';
import { DISCOUNT_DURATIONS, DISCOUNT_INACTIVE_REASONS, DISCOUNT_VALUE_TYPES } from '../../core/statuses';
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
  is_active: z.boolean().describe('Whether a checkout can use the code now: false once it is turned off, expired, at its use limit or not yet started'),
  inactive_reason: z.enum(DISCOUNT_INACTIVE_REASONS).nullable()
    .describe('Why is_active is false (null when active): disabled by the operator, expired (expires_at passed), exhausted (use_limit reached by redemptions and pending checkouts), not_started (starts_at ahead)'),
  tier_ids: z.array(z.string()),
  members: z.array(z.object({ platform: z.string().nullable(), platform_uid: z.string().nullable(), username: z.string().nullable() })),
  redeemed_count: z.number().int(),
  pending_count: z.number().int(),
  created_at: timestamp,
});
