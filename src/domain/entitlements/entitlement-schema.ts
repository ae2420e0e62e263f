// The member entitlement, as billing.member_entitlement_json builds it from the
// ledger: its supporting sources (billing.ledger_desired) and its benefits.
import { z } from 'zod';
import { MEMBER_ENTITLEMENT_STATUSES } from '../../core/statuses';
import { timestamp } from '../fields';

/** One supporting source: an active subscription, a completed purchase or a grant (comp). */
export const entitlementSource = z.looseObject({
  type: z.enum(['subscription', 'purchase', 'grant']),
  id: z.string(),
  status: z.string(),
  tier_id: z.string(),
  plan_id: z.string().nullable().describe('null for a grant'),
  client_reference_id: z.string().nullable(),
  valid_until: timestamp.nullable().describe('current_period_end of a subscription, access_expires_at of a purchase, expires_at of a grant; null = no end'),
});

export const entitlementBenefit = z.looseObject({
  platform: z.string(),
  platform_config_id: z.string(),
  type: z.string(),
  value: z.string(),
});

export const memberEntitlement = z.object({
  id: z.string(),
  entitlement_id: z.string(),
  key: z.string(),
  name: z.string(),
  revision: z.number().int().min(1),
  status: z.enum(MEMBER_ENTITLEMENT_STATUSES),
  granted_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
  sources: z.array(entitlementSource).describe('the sources that currently support the entitlement (empty when inactive)'),
  benefits: z.array(entitlementBenefit).describe('the entitlement\'s benefits while active (empty when inactive)'),
});
