// The event-type catalog: every event the service emits, what it means and the JSON
// Schema of its data. Served by GET /v1/webhooks/event-types; the webhooks work
// reuses EVENT_TYPES to validate endpoint subscriptions. The events themselves are
// written by triggers in db/migrations/current/020-ledger.sql and 030-events.sql:
// keep the two in step (test/events/catalog.test.ts checks emitted events against
// these schemas).
import { z } from 'zod';

const ts = z.string().describe('ISO 8601 UTC timestamp');
const nts = ts.nullable();

// Objects are loose: new fields may appear within a version (clients ignore them).
export const identitySchema = z.looseObject({
  platform: z.string(),
  platform_uid: z.string(),
  username: z.string().nullable(),
});

export const externalSubjectSchema = z.looseObject({ namespace: z.string(), external_user_id: z.string() });

export const memberSchema = z.looseObject({
  id: z.string(),
  created_at: ts,
  identities: z.array(identitySchema),
  external_subjects: z.array(externalSubjectSchema),
});

export const sourceSchema = z.looseObject({
  type: z.enum(['subscription', 'purchase']),
  id: z.string(),
  status: z.string(),
  tier_id: z.string(),
  plan_id: z.string(),
  client_reference_id: z.string().nullable(),
  valid_until: nts.describe('current_period_end of a subscription, access_expires_at of a purchase; null = no end'),
});

export const benefitSchema = z.looseObject({
  platform: z.string(),
  platform_config_id: z.string(),
  type: z.string(),
  value: z.string(),
});

export const memberEntitlementSchema = z.looseObject({
  id: z.string(),
  entitlement_id: z.string(),
  key: z.string(),
  name: z.string(),
  revision: z.number().int().min(1),
  status: z.enum(['active', 'inactive']),
  granted_at: nts,
  revoked_at: nts,
  sources: z.array(sourceSchema).describe('the sources that currently support the entitlement (empty when inactive)'),
  benefits: z.array(benefitSchema).describe('the entitlement\'s benefits while active (empty when inactive)'),
});

/** Values of data.reason on entitlement events. */
export const ENTITLEMENT_REASONS = [
  'subscription_created', 'subscription_activated', 'subscription_updated', 'subscription_cancelling',
  'subscription_paused', 'subscription_ended', 'subscription_deleted', 'plan_changed',
  'purchase_completed', 'purchase_updated', 'purchase_refunded', 'purchase_deleted',
  'access_expired', 'identity_linked', 'identity_unlinked', 'identity_updated',
  'external_subject_attached', 'external_subject_removed', 'benefits_changed', 'tier_entitlements_changed',
] as const;

export const entitlementEventDataSchema = z.looseObject({
  member: memberSchema,
  entitlement: memberEntitlementSchema,
  changes: z.looseObject({ added_benefits: z.array(benefitSchema), removed_benefits: z.array(benefitSchema) }),
  reason: z.string().describe(`why it changed: ${ENTITLEMENT_REASONS.join(', ')} (more may appear)`),
  trigger_event_id: z.string().nullable().describe('id of the lifecycle event that caused it, null when time passing or a catalog edit did'),
});

const previous = z.record(z.string(), z.unknown()).nullable()
  .describe('old values of the fields that changed (null on creation)');

export const subscriptionEventSchema = z.looseObject({
  id: z.string(),
  status: z.enum(['active', 'trialing', 'past_due', 'cancelling', 'cancelled', 'paused']),
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string(),
  tier_name: z.string(),
  member_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  interval: z.string().nullable(),
  current_period_end: nts,
  cancel_at: nts,
  paused_until: nts,
  scheduled_plan_id: z.string().nullable(),
  scheduled_at: nts,
  client_reference_id: z.string().nullable(),
  created_at: ts,
  updated_at: ts,
});

export const purchaseEventSchema = z.looseObject({
  id: z.string(),
  status: z.enum(['completed', 'refunded']),
  plan_id: z.string(),
  plan_name: z.string().nullable(),
  tier_id: z.string(),
  tier_name: z.string(),
  member_id: z.string(),
  amount_cents: z.number().int(),
  currency: z.string(),
  access_expires_at: nts,
  paid_at: ts,
  client_reference_id: z.string().nullable(),
  created_at: ts,
});

export const checkoutEventSchema = z.looseObject({
  id: z.string(),
  checkout_id: z.string(),
  status: z.enum(['open', 'completed', 'expired']),
  member_id: z.string(),
  tier_id: z.string(),
  plan_id: z.string(),
  amount_cents: z.number().int(),
  discount_cents: z.number().int(),
  currency: z.string(),
  client_reference_id: z.string().nullable(),
  subject_kind: z.string(),
  expires_at: nts,
  completed_at: nts,
  created_at: ts,
});

const subscriptionData = z.looseObject({ subscription: subscriptionEventSchema, previous_attributes: previous });
const purchaseData = z.looseObject({ purchase: purchaseEventSchema, previous_attributes: previous });
const checkoutData = z.looseObject({ checkout: checkoutEventSchema, previous_attributes: previous });
const memberData = z.looseObject({
  member: memberSchema,
  change: z.looseObject({ kind: z.string() }).nullable()
    .describe('what changed: kind identity_linked, identity_unlinked, identity_updated, external_subject_attached or external_subject_removed, with the identity or subject; null on member.created'),
});

const webhookEndpointDisabledData = z.looseObject({
  endpoint: z.looseObject({ id: z.string(), url: z.string(), enabled: z.boolean(), disabled_reason: z.string().nullable() }),
  reason: z.string().describe('failing: every delivery attempt failed for 5 days'),
  failing_since: ts,
});

interface CatalogEntry {
  type: string;
  description: string;
  schema: z.ZodType;
}

const ENTRIES = [
  { type: 'member.entitlement.granted', description: 'An entitlement became active for a member (inactive-to-active edge). Decide access from these three entitlement events.', schema: entitlementEventDataSchema },
  { type: 'member.entitlement.updated', description: 'Sources, benefits or linked identities of an entitlement changed while its status stayed the same (one source ending while another still supports it; an external subject attached; a plan switch within access).', schema: entitlementEventDataSchema },
  { type: 'member.entitlement.revoked', description: 'An entitlement became inactive for a member (active-to-inactive edge); changes.removed_benefits lists what to take away.', schema: entitlementEventDataSchema },
  { type: 'subscription.created', description: 'A subscription was created.', schema: subscriptionData },
  { type: 'subscription.updated', description: 'A subscription changed (status other than cancelled, plan, period, scheduled switch, pause); previous_attributes holds the old values.', schema: subscriptionData },
  { type: 'subscription.cancelled', description: 'A subscription ended (status became cancelled).', schema: subscriptionData },
  { type: 'purchase.created', description: 'A one-time purchase was recorded.', schema: purchaseData },
  { type: 'purchase.updated', description: 'A purchase changed (for example its access_expires_at).', schema: purchaseData },
  { type: 'purchase.refunded', description: 'A purchase was refunded.', schema: purchaseData },
  { type: 'checkout.created', description: 'A checkout session was created. It grants nothing by itself.', schema: checkoutData },
  { type: 'checkout.completed', description: 'A checkout session was paid; the subscription or purchase events follow.', schema: checkoutData },
  { type: 'checkout.expired', description: 'A checkout session expired unpaid. No entitlement changes.', schema: checkoutData },
  { type: 'member.created', description: 'A member was created.', schema: memberData },
  { type: 'member.updated', description: 'A member\'s platform identities or external subjects changed.', schema: memberData },
  { type: 'webhook_endpoint.disabled', description: 'A webhook endpoint was disabled because every delivery to it failed for 5 days.', schema: webhookEndpointDisabledData },
] as const satisfies readonly CatalogEntry[];

export type EventType = (typeof ENTRIES)[number]['type'];

/** Every event type the service emits. */
export const EVENT_TYPES: readonly EventType[] = ENTRIES.map((e) => e.type);

export function isEventType(value: string): value is EventType {
  return (EVENT_TYPES as readonly string[]).includes(value);
}

/** The zod schema of an event type's data (for tests and typed consumers). */
export function eventDataSchema(type: EventType): z.ZodType {
  return ENTRIES.find((e) => e.type === type)!.schema;
}

export interface EventTypeInfo {
  type: EventType;
  description: string;
  data_schema: Record<string, unknown>;
}

function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const s = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
  delete s.$schema;
  return s;
}

/** The catalog as GET /v1/webhooks/event-types answers it. */
export const EVENT_CATALOG: { data: EventTypeInfo[] } = {
  data: ENTRIES.map((e) => ({ type: e.type, description: e.description, data_schema: jsonSchema(e.schema) })),
};

/** The envelope every event shares (feed and webhook deliveries). */
export const eventEnvelopeSchema = z.object({
  id: z.string().describe('evt_ id; stable across retries'),
  type: z.string(),
  timestamp: ts,
  api_version: z.string(),
  data: z.looseObject({}),
});
