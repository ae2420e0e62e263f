// The community's tax settings as billing_api.tax_settings_get answers them
// (db/migrations/fixtures/functions/46-tax.sql; docs/decisions/tax.md): the seller its
// invoices name, its tax rates by country, and whether Stripe computes the tax. Set
// through the catalog file (`seller`, `tax_rates`, `payment_provider.automatic_tax`).
import { z } from 'zod';
import { timestamp } from '../fields';

export const taxRate = z.object({
  id: z.string().describe('txr_...'),
  country: z.string().describe('ISO 3166-1 alpha-2: the buyer country it taxes'),
  name: z.string().describe('what invoices call it: VAT, GST, Sales tax'),
  rate_ppm: z.number().int().min(0).max(1_000_000).describe('parts per million, exact: 20% = 200000, 8.875% = 88750'),
  inclusive: z.boolean().describe('true: prices include it (the tax is the part of them); false: added on top'),
  active: z.boolean().describe('an inactive rate is kept but not charged'),
  updated_at: timestamp,
});

export const taxSettings = z.object({
  seller: z.object({
    name: z.string().describe('the community\'s display name'),
    legal_name: z.string().nullable().describe('printed on invoices instead of the display name when set'),
    address_lines: z.array(z.string()),
    country: z.string().nullable().describe('ISO 3166-1 alpha-2: decides the tax when a buyer\'s country is unknown, and the EU reverse charge'),
    tax_id: z.string().nullable(),
    eu_vat_id_valid: z.boolean().nullable().describe('for a seller in the EU: whether tax_id looks like a VAT id of its country; null elsewhere'),
  }),
  rates: z.array(taxRate).describe('by country'),
  stripe_automatic_tax: z.boolean().describe('Stripe Tax computes the tax of Stripe checkouts (payment_provider.automatic_tax)'),
});
