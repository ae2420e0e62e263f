// A member's data exported (GET /v1/members/{id}/export) and erased (POST
// /v1/members/{id}/erase): the shapes billing_api.member_export and
// billing_private.member_erase answer (db/migrations/fixtures/functions/30-member-privacy.sql;
// docs/decisions/member-export.md, member-erasure.md).
import { z } from 'zod';
import { memberEntitlement } from '../entitlements/entitlement-schema';
import { eventEnvelopeSchema } from '../events/event-schema';
import { timestamp } from '../fields';
import { grant } from '../grants/grant-schema';
import { invoice, invoiceCreditNote } from '../invoices/invoice-schema';
import { mailMessage } from '../mail/mail-operations';
import { purchase } from '../purchases/purchase-schema';
import { subscription } from '../subscriptions/subscription-schema';
import { externalSubject, identity } from './member-schema';

/** The version of the export's format: a field added keeps it; a field renamed or removed changes it. */
export const MEMBER_EXPORT_FORMAT = 'member-export/1';

/** The member's own row, every column of it (billing.member_export_json). */
export const exportedMember = z.object({
  id: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
  erased_at: timestamp.nullable().describe('when the member\'s personal data was erased; null when it was not'),
  email: z.string().nullable(),
  display_name: z.string().nullable(),
  note: z.string().nullable().describe('the operators\' note about the member'),
  tags: z.array(z.string()).describe('the operators\' tags on the member'),
  identities: z.array(identity.extend({ created_at: timestamp })),
  external_subjects: z.array(externalSubject.extend({ created_at: timestamp })),
  billing_details: z.object({
    name: z.string().nullable(),
    address_lines: z.array(z.string()),
    country: z.string().nullable(),
    tax_id: z.string().nullable(),
  }).describe('the billing details the last checkout gave, which its invoices were taxed for'),
  provider_customers: z.array(z.object({ provider: z.string(), customer_ref: z.string(), created_at: timestamp }))
    .describe('the member\'s customer at a payment provider (Stripe\'s cus_...), which holds its own copy of what the buyer gave it'),
});

export const memberExport = z.object({
  format: z.literal(MEMBER_EXPORT_FORMAT),
  exported_at: timestamp,
  community: z.object({ id: z.string(), name: z.string() }),
  member: exportedMember,
  subscriptions: z.array(subscription),
  purchases: z.array(purchase),
  grants: z.array(grant),
  invoices: z.array(invoice),
  invoice_buyers: z.array(z.object({
    invoice_id: z.string(),
    buyer_name: z.string().nullable().describe('the buyer\'s name the invoice was made out to'),
    buyer_address_lines: z.array(z.string()).describe('the buyer\'s address the invoice was made out to'),
  })).describe('the name and address each invoice was made out to (the invoice JSON shows the buyer\'s country and tax id only; the PDF prints these)'),
  credit_notes: z.array(invoiceCreditNote),
  payment_attempts: z.array(z.object({
    id: z.string(), invoice_id: z.string(), status: z.string(), amount_cents: z.number().int(),
    failure_message: z.string().nullable(), provider: z.string(), attempted_at: timestamp,
  })),
  entitlements: z.array(memberEntitlement.extend({
    identities: z.looseObject({}).describe('the identities and external subjects the ledger row last carried ({identities, external_subjects}: its events\' snapshot)'),
    updated_at: timestamp,
  })).describe('every ledger row of the member, active and inactive'),
  benefit_deliveries: z.array(z.object({
    platform_config_id: z.string(), type: z.string(), value: z.string(), want: z.string(), status: z.string(),
    applied_uid: z.string().nullable().describe('the platform user the platform holds the benefit for'),
    error: z.string().nullable(), attempts: z.number().int(), updated_at: timestamp,
  })),
  platform_actions: z.array(z.object({
    id: z.string(), platform_config_id: z.string(), action: z.string(), target: z.string(), outcome: z.string(),
    status_code: z.number().int().nullable(), error: z.string().nullable(), created_at: timestamp,
  })),
  mail_messages: z.array(mailMessage).describe('every message made for the member, without its body'),
  mail_unsubscribes: z.array(z.object({ template: z.string(), created_at: timestamp })),
  link_codes: z.array(z.object({
    id: z.string(), intended_platform: z.string(), expires_at: timestamp, redeemed_at: timestamp.nullable(),
    invalidated_at: timestamp.nullable(), created_at: timestamp,
  })).describe('the link codes made for the member, without the code itself'),
  checkout_sessions: z.array(z.object({
    id: z.string(), status: z.string(), tier_id: z.string(), plan_id: z.string(), amount_cents: z.number().int(),
    discount_cents: z.number().int(), currency: z.string(), subject_kind: z.string(), provider: z.string(),
    client_reference_id: z.string().nullable(), return_url: z.string().nullable(),
    subscription_id: z.string().nullable(), purchase_id: z.string().nullable(),
    customer_email: z.string().nullable(), customer_name: z.string().nullable(), customer_address_lines: z.array(z.string()),
    customer_country: z.string().nullable(), customer_tax_id: z.string().nullable(),
    expires_at: timestamp.nullable(), completed_at: timestamp.nullable(), created_at: timestamp,
  })),
  discount_redemptions: z.array(z.object({ discount_id: z.string(), checkout_id: z.string(), status: z.string(), created_at: timestamp })),
  events: z.array(eventEnvelopeSchema).describe('every event whose data names the member, oldest first'),
});

/** What an erasure did (billing_private.member_erase); a repeat answers changed false and zero counts. */
export const memberErasure = z.object({
  member_id: z.string(),
  erased_at: timestamp,
  changed: z.boolean().describe('false when the member was erased already: nothing was done again'),
  subscriptions_cancelled: z.number().int().min(0).describe('ended now, without a refund'),
  grants_revoked: z.number().int().min(0),
  purchases_ended: z.number().int().min(0).describe('one-time purchases whose access ended now (kept, not refunded)'),
  checkouts_expired: z.number().int().min(0),
  invoices_kept: z.number().int().min(0).describe('the member\'s invoices, kept with the fields the law requires'),
  events_redacted: z.number().int().min(0).describe('events whose copy of the member\'s personal data was removed'),
  discount_codes_naming_member: z.array(z.string()).describe('discount codes whose member list named one of the member\'s '
    + 'identities: the catalog is the operator\'s, so remove them there (the catalog file too)'),
});
