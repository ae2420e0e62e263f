// The event-type catalog: every event the service emits, what it means and the schema
// of its data. Served by GET /v1/webhooks/event-types; endpoint subscriptions are
// checked against EVENT_TYPES. The events are written by triggers (billing.emit_event
// callers in the SQL); each data schema reuses the resource's own schema, extended
// with what events add, and test/events/feed.test.ts checks every emitted event
// against these schemas.
import { z } from 'zod';
import { checkoutSession } from '../checkout/checkout-schema';
import { entitlementBenefit, memberEntitlement } from '../entitlements/entitlement-schema';
import { timestamp } from '../fields';
import { eventMemberObject } from '../members/member-schema';
import { purchase } from '../purchases/purchase-schema';
import { invoice } from '../invoices/invoice-schema';
import { subscription } from '../subscriptions/subscription-schema';
import { webhookEndpoint } from '../webhooks/webhook-schema';

// Event objects are loose: new fields may appear within a version (clients ignore them).
// Events never carry the member's email (docs/decisions/member-email.md).
const eventMember = eventMemberObject.loose();

/** Values of data.reason on entitlement events. */
export const ENTITLEMENT_REASONS = [
  'subscription_created', 'subscription_activated', 'subscription_updated', 'subscription_cancelling',
  'subscription_paused', 'subscription_ended', 'subscription_deleted', 'plan_changed',
  'purchase_completed', 'purchase_updated', 'purchase_refunded', 'purchase_deleted',
  'access_expired', 'identity_linked', 'identity_unlinked', 'identity_updated',
  'external_subject_attached', 'external_subject_removed', 'benefits_changed', 'tier_entitlements_changed',
  'payment_failed', 'payment_retry_scheduled', 'invoice_paid', 'refunded', 'disputed',
  'grant_created', 'grant_updated', 'grant_revoked',
] as const;

export const entitlementEventDataSchema = z.looseObject({
  member: eventMember,
  entitlement: memberEntitlement.loose(),
  changes: z.looseObject({ added_benefits: z.array(entitlementBenefit), removed_benefits: z.array(entitlementBenefit) }),
  reason: z.string().describe(`why it changed: ${ENTITLEMENT_REASONS.join(', ')} (more may appear)`),
  trigger_event_id: z.string().nullable().describe('id of the lifecycle event that caused it, null when time passing or a catalog edit did'),
});

/** billing.event_subscription_json: the subscription plus its client_reference_id. */
export const subscriptionEventSchema = subscription.extend({ client_reference_id: z.string().nullable() }).loose();
/** billing.event_purchase_json: the purchase plus its client_reference_id. */
export const purchaseEventSchema = purchase.extend({ client_reference_id: z.string().nullable() }).loose();
export const checkoutEventSchema = checkoutSession.loose();

const previous = z.record(z.string(), z.unknown()).nullable()
  .describe('old values of the fields that changed (null on creation)');

const subscriptionData = z.looseObject({ subscription: subscriptionEventSchema, previous_attributes: previous });
const purchaseData = z.looseObject({ purchase: purchaseEventSchema, previous_attributes: previous });
const checkoutData = z.looseObject({ checkout: checkoutEventSchema, previous_attributes: previous });
const memberData = z.looseObject({
  member: eventMember,
  change: z.looseObject({ kind: z.string() }).nullable()
    .describe('what changed: kind identity_linked, identity_unlinked, identity_updated, external_subject_attached or external_subject_removed, with the identity or subject; null on member.created'),
});

/** member.erased (docs/decisions/member-erasure.md): the member as it stays, without any personal data. */
const memberErasedData = z.looseObject({
  member: eventMember.describe('the member after erasure: its id and created_at; identities and external_subjects are empty'),
  erased_at: timestamp,
});

const invoiceData = z.looseObject({ invoice: invoice.loose(), previous_attributes: previous });

const webhookEndpointDisabledData = z.looseObject({
  endpoint: webhookEndpoint.loose(),
  reason: z.string().describe('failing: every delivery attempt failed for 5 days'),
  failing_since: timestamp,
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
  { type: 'member.erased', description: 'A member\'s personal data was erased (POST /v1/members/{id}/erase): identities, external subjects, email and billing details removed, access ended (their member.entitlement.revoked events come first), the events naming them redacted. Carries no personal data: erase what you hold for this member id.', schema: memberErasedData },
  { type: 'invoice.created', description: 'An invoice was written (every charge is one: checkout, trial start, renewal, plan change, one-time purchase).', schema: invoiceData },
  { type: 'invoice.paid', description: 'An invoice was paid in full.', schema: invoiceData },
  { type: 'invoice.payment_failed', description: 'An attempt to collect an invoice failed; next_attempt_at says when it is retried (null: no retry left). A subscription whose renewal failed is past_due (subscription.updated).', schema: invoiceData },
  { type: 'invoice.refunded', description: 'An invoice was refunded, in full or in part (data.refund: id, amount_cents, revoke_access, credit_note_number; the invoice lists the credit note in credit_notes). With revoke_access the subscription or purchase it paid for ended at once.', schema: z.looseObject({ invoice: invoice.loose(), refund: z.looseObject({ id: z.string(), amount_cents: z.number().int() }) }) },
  { type: 'invoice.disputed', description: 'A payment of an invoice was disputed (data.dispute); the subscription or purchase it paid for ended at once. A dispute won restores nothing by itself.', schema: z.looseObject({ invoice: invoice.loose(), dispute: z.looseObject({ id: z.string(), status: z.string() }) }) },
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

/**
 * The test ping of POST /v1/webhooks/endpoints/{id}/test: an envelope a receiver must
 * expect, so the catalog lists it, but never written to the feed and not a type an
 * endpoint subscribes to (it goes to the endpoint tested, whatever its event_types).
 */
export const PING_EVENT_TYPE = 'webhook.ping';
export const pingEventDataSchema = z.looseObject({
  endpoint_id: z.string().describe('the endpoint the ping was sent to'),
  message: z.string(),
});

/** The catalog as GET /v1/webhooks/event-types answers it: every emitted type, then webhook.ping. */
export const EVENT_CATALOG: { data: Array<Omit<EventTypeInfo, 'type'> & { type: EventType | typeof PING_EVENT_TYPE }> } = {
  data: [
    ...ENTRIES.map((e) => ({ type: e.type, description: e.description, data_schema: jsonSchema(e.schema) })),
    {
      type: PING_EVENT_TYPE,
      description: 'A test ping, sent only by POST /v1/webhooks/endpoints/{id}/test to the endpoint tested, whatever its event_types; '
        + 'never in the event feed and not a type an endpoint subscribes to.',
      data_schema: jsonSchema(pingEventDataSchema),
    },
  ],
};
