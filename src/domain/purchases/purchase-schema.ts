// The one-time purchase, as billing.purchase_json builds it. Its plan always exists
// (foreign key), so tier_id and tier_name are never null.
import { z } from 'zod';
import { PURCHASE_STATUSES } from '../../core/statuses';
import { timestamp } from '../fields';

export const purchase = z.object({
  id: z.string(),
  status: z.enum(PURCHASE_STATUSES),
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string(),
  tier_name: z.string(),
  member_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  access_expires_at: timestamp.nullable(),
  paid_at: timestamp,
  created_at: timestamp,
});
