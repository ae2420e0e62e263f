// The checkout: what create_checkout_link takes and answers, and the checkout session
// as checkout events carry it (billing.event_checkout_json).
import { z } from 'zod';
import { CHECKOUT_STATUSES, CHECKOUT_SUBJECT_KINDS } from '../../core/statuses';
import { platform, timestamp } from '../fields';

const id = z.string().min(1).max(100);

/** https only: the buyer's browser is sent there after payment. */
export const httpsUrl = z.string().max(2000).refine((value) => {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}, { message: 'must be an absolute https:// URL' });

/** Exactly one buyer form (docs/decisions/checkout-subject-forms.md). */
export const checkoutSubject = z.union([
  z.strictObject({ member_id: id.describe('An existing member of the community') }),
  z.strictObject({
    external: z.strictObject({
      namespace: z.string().min(1).max(200),
      external_user_id: z.string().min(1).max(200),
    }).describe("The operator's own user: created and mapped on first use"),
  }),
  z.strictObject({
    platform: platform.describe('A connected first-party platform'),
    platform_uid: z.string().min(1).max(200),
    username: z.string().min(1).max(200).optional(),
  }),
], { error: 'subject must be exactly one of {member_id}, {external: {namespace, external_user_id}} or {platform, platform_uid, username?}' });

export const checkoutLink = z.object({
  checkout_id: z.string(),
  member_id: z.string(),
  url: z.string(),
  expires_at: timestamp.nullable(),
  trial_days: z.number().int().min(0).describe('The free trial this checkout starts: the plan\'s trial_days, or 0 when the buyer has had a trial of this tier (a trial is given once per tier)'),
});

/** The checkout session of checkout.* events (billing.event_checkout_json). */
export const checkoutSession = z.object({
  id: z.string(),
  checkout_id: z.string(),
  status: z.enum(CHECKOUT_STATUSES),
  member_id: z.string(),
  tier_id: z.string(),
  plan_id: z.string(),
  amount_cents: z.number().int(),
  discount_cents: z.number().int(),
  currency: z.string(),
  client_reference_id: z.string().nullable(),
  subject_kind: z.enum(CHECKOUT_SUBJECT_KINDS),
  expires_at: timestamp.nullable(),
  completed_at: timestamp.nullable(),
  created_at: timestamp,
});
