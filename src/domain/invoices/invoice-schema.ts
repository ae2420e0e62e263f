// The invoice, as billing.invoice_json builds it (db/migrations/fixtures/functions/46-invoices.sql):
// every charge is one, its lines add up to its total (database constraints), and it
// is paid at most once.
import { z } from 'zod';
import { DISPUTE_STATUSES, INVOICE_BILLING_REASONS, INVOICE_LINE_TYPES, INVOICE_STATUSES } from '../../core/statuses';
import { timestamp } from '../fields';

export const invoiceLine = z.object({
  type: z.enum(INVOICE_LINE_TYPES).describe('plan: a period of a plan; proration: a plan change (credit is negative); discount: negative'),
  description: z.string(),
  amount_cents: z.number().int(),
  period_start: timestamp.nullable(),
  period_end: timestamp.nullable(),
}).loose();

/** The dispute of an invoice's payment (billing.dispute_json): kept current by Stripe's charge.dispute.* events. */
export const invoiceDispute = z.object({
  id: z.string().describe('dp_...'),
  invoice_id: z.string(),
  amount_cents: z.number().int().min(0).describe('the amount the buyer disputed'),
  status: z.enum(DISPUTE_STATUSES).describe('needs_response and under_review while open; won or lost once closed'),
  reason: z.string().nullable().describe('the card network\'s reason (Stripe: fraudulent, product_not_received, ...)'),
  created_at: timestamp,
  opened_at: timestamp.describe('when the dispute was opened (= created_at)'),
  closed_at: timestamp.nullable().describe('when it was won or lost; null while open'),
});

/** A credit note as its invoice lists it (billing.credit_note_json): every refund makes one. */
export const invoiceCreditNote = z.object({
  id: z.string().describe('cn_...'),
  number: z.string().describe('its own gapless sequence per community and series: CN-2026-000001'),
  refund_id: z.string().describe('re_...: the refund it documents'),
  amount_cents: z.number().int().min(1),
  tax_cents: z.number().int().min(0).describe('the tax it credits, part of amount_cents: the invoice\'s tax in proportion to what was '
    + 'refunded (the credit notes of a fully refunded invoice add up to its tax_cents)'),
  created_at: timestamp,
});

/** A tax line (billing.invoice_tax, db/migrations/fixtures/functions/46-tax.sql; docs/decisions/tax.md). */
export const invoiceTaxLine = z.object({
  name: z.string().describe('as the community names it: VAT, GST, Sales tax'),
  country: z.string().nullable().describe('ISO 3166-1 alpha-2 code of the rate that applied (null when the provider did not say)'),
  rate_ppm: z.number().int().min(0).max(1_000_000).nullable()
    .describe('the rate in parts per million (20% = 200000; 0 when reverse charged; null when the provider did not say)'),
  inclusive: z.boolean().describe('true: part of the lines\' amounts (prices include it); false: added to the total'),
  taxable_cents: z.number().int().nullable().describe('what it was computed on, without the tax (null when unknown)'),
  amount_cents: z.number().int().min(0),
});

export const invoice = z.object({
  id: z.string().describe('inv_...'),
  number: z.string().nullable().describe('gapless per community and series (2026-000042: the year of created_at, or the '
    + 'community\'s own series), given when the invoice is finalized and kept if it is voided; null before'),
  status: z.enum(INVOICE_STATUSES),
  billing_reason: z.enum(INVOICE_BILLING_REASONS),
  member_id: z.string(),
  subscription_id: z.string().nullable(),
  purchase_id: z.string().nullable(),
  currency: z.string(),
  subtotal_cents: z.number().int().describe('sum of the plan and proration lines'),
  discount_cents: z.number().int().min(0).describe('minus the sum of the discount lines'),
  total_cents: z.number().int().min(0).describe('subtotal_cents - discount_cents'),
  amount_paid_cents: z.number().int().min(0),
  amount_refunded_cents: z.number().int().min(0),
  lines: z.array(invoiceLine),
  period_start: timestamp.nullable(),
  period_end: timestamp.nullable(),
  attempt_count: z.number().int().min(0),
  next_attempt_at: timestamp.nullable().describe('when the next payment retry is due; null when none is planned'),
  paid_at: timestamp.nullable(),
  created_at: timestamp,
  dispute: invoiceDispute.nullable().describe('the dispute of its payment, null when none: a disputed invoice cannot be refunded (409 conflict)'),
  credit_notes: z.array(invoiceCreditNote).describe('the credit notes of its refunds, oldest first'),
  tax_cents: z.number().int().min(0).describe('the sum of tax_lines: part of total_cents (an inclusive tax is inside the lines, an '
    + 'exclusive one is added: total_cents = subtotal_cents - discount_cents + the exclusive tax lines)'),
  total_excluding_tax_cents: z.number().int().describe('total_cents - tax_cents'),
  tax_lines: z.array(invoiceTaxLine).describe('the tax it charged, computed once per invoice (empty: no tax)'),
  tax_country: z.string().nullable().describe('the country whose tax applied: the buyer\'s, else the community\'s when the buyer\'s '
    + 'is unknown; null when none applied'),
  reverse_charge: z.boolean().describe('an EU business buyer in another member state than the community, with a VAT id: no VAT, '
    + 'the buyer accounts for it (tax_note says so)'),
  tax_note: z.string().nullable().describe('the legal mention the invoice carries (the reverse charge\'s), null when none'),
  buyer_country: z.string().nullable().describe('the buyer\'s country (ISO 3166-1 alpha-2) as the invoice was taxed'),
  buyer_tax_id: z.string().nullable().describe('the buyer\'s tax id (a VAT id) as given at checkout'),
  seller_country: z.string().nullable().describe('the community\'s country when the invoice was taxed'),
  seller_tax_id: z.string().nullable().describe('the community\'s tax id when the invoice was taxed'),
});

export const refund = z.object({
  id: z.string().describe('re_...'),
  invoice_id: z.string(),
  amount_cents: z.number().int().min(1),
  revoke_access: z.boolean(),
  created_at: timestamp,
  credit_note_number: z.string().describe('the number of the credit note the refund made (CN-2026-000001)'),
});
