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

/** What the platform holds of a benefit (docs/decisions/platform-delivery.md). The ledger stays the authority. */
export const benefitDelivery = z.object({
  status: z.enum(['pending', 'delivered', 'failed', 'action_required'])
    .describe('pending: not tried yet; failed: the platform or the network failed, retried with backoff; action_required: error says what to fix'),
  updated_at: timestamp.nullable(),
  error: z.string().nullable(),
});

export const entitlementBenefit = z.looseObject({
  platform: z.string(),
  platform_config_id: z.string(),
  type: z.string(),
  value: z.string(),
  delivery: benefitDelivery.optional().describe('in member entitlement lists only (not in the check or in events)'),
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
