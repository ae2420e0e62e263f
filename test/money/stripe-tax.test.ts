// Tax with Stripe (issue 30 item 5; docs/decisions/tax.md), through the real SDK against
// the local Stripe stand-in: a community's payment_provider.automatic_tax turns on Stripe
// Tax in its Checkout Sessions (with the address and tax id collection it needs); the
// Checkout Session's customer_details (name, address and country, tax ids) become the
// member's billing details; and invoices record the tax Stripe charged (its invoice's
// total_taxes, a one-time session's total_details), the reverse charge included, never
// a local rate Stripe did not charge.
import { call, startApp, TestApp } from '../support/app';
import { deliver, startStripeMock, StripeMock, unflatten } from '../support/stripe-mock';
import { checkout, createShop, externalSubject, Shop } from '../support/shop';

let mock: StripeMock;
let app: TestApp;
let taxed: Shop;
let plain: Shop;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SELLER = { legal_name: 'Gold Club Ltd', country: 'IE', tax_id: 'IE1234567T' };

beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({}, mock.env);
  // Both have local rates; only Stripe's tax counts on Stripe's invoices.
  taxed = await createShop(app, { type: 'stripe', automatic_tax: true } as { type: string }, { seller: SELLER,
    tax_rates: [{ country: 'DE', name: 'VAT', rate_ppm: 190000 }, { country: 'IE', name: 'VAT', rate_ppm: 230000, inclusive: true }] });
  plain = await createShop(app, { type: 'stripe' }, { seller: SELLER, tax_rates: [{ country: 'DE', name: 'VAT', rate_ppm: 190000 }] });
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

const now = () => Math.floor(Date.now() / 1000);
let seq = 0;

const GERMAN_BUSINESS = {
  email: 'buyer@example.de', name: 'Anna Schmidt', business_name: 'Musterfirma GmbH', phone: null, tax_exempt: 'none', individual_name: null,
  address: { line1: 'Hauptstr. 1', line2: null, postal_code: '10115', city: 'Berlin', state: null, country: 'DE' },
  tax_ids: [{ type: 'eu_vat', value: 'DE123456789' }],
};

async function lastSessionForm(shop: Shop, tier: string): Promise<Json> {
  const before = mock.requests.length;
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers[tier], ...(tier === 'gold' ? { plan_id: shop.ids.plans['gold-monthly'] } : {}), subject: externalSubject() });
  expect(link.status).toBe(200);
  return unflatten(mock.requests.slice(before).find((q) => q.path === '/v1/checkout/sessions')!.form);
}

test('automatic_tax in the catalog turns on Stripe Tax in Checkout, with the address and tax id it needs; without it, none', async () => {
  const on = await lastSessionForm(taxed, 'silver');
  expect(on.automatic_tax).toEqual({ enabled: 'true' });
  expect(on.billing_address_collection).toBe('required');
  expect(on.tax_id_collection).toEqual({ enabled: 'true' });
  const off = await lastSessionForm(plain, 'silver');
  expect(off.automatic_tax).toBeUndefined();
  expect(off.tax_id_collection).toBeUndefined();
  const settings = await call(app.url, 'GET', '/v1/tax-settings', { key: taxed.key });
  expect(settings.body.stripe_automatic_tax).toBe(true);
  expect((await call(app.url, 'GET', '/v1/tax-settings', { key: plain.key })).body.stripe_automatic_tax).toBe(false);
});

/** A Stripe subscription bought through a completed Checkout Session with these customer_details. */
async function stripeSubscribe(shop: Shop, customerDetails: Json) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject('stax') });
  expect(link.status).toBe(200);
  const ref = `sub_tax_${++seq}_${Date.now()}`;
  mock.subscription({ id: ref, customer: `cus_t${seq}`, price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id } });
  const completed = mock.signedEvent('checkout.session.completed', {
    id: `cs_test_t${seq}`, object: 'checkout.session', mode: 'subscription', status: 'complete', payment_status: 'paid',
    client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer: `cus_t${seq}`,
    customer_details: customerDetails,
  });
  expect((await deliver(app.url, shop.communityId, completed)).status).toBe(200);
  return { ref, memberId: link.body.member_id as string };
}

function stripeInvoice(id: string, subRef: string, o: { subtotal: number; total: number; taxes: Json[]; country?: string; taxIds?: Json[] }) {
  const start = now() - 60;
  return {
    id, object: 'invoice', status: 'paid', currency: 'usd', subtotal: o.subtotal, total: o.total, amount_paid: o.total, attempt_count: 1,
    next_payment_attempt: null, billing_reason: 'subscription_create', created: start, period_start: start, period_end: start + 30 * 86400,
    status_transitions: { paid_at: now() }, customer_address: o.country ? { country: o.country } : null, customer_tax_ids: o.taxIds ?? [],
    total_taxes: o.taxes,
    parent: { type: 'subscription_details', subscription_details: { subscription: subRef, metadata: {} } },
    lines: { object: 'list', data: [{ id: `il_${id}`, amount: o.subtotal, description: '1 × Silver (at $8.00 / month)',
      period: { start, end: start + 30 * 86400 }, parent: { subscription_item_details: { proration: false } } }] },
  };
}

async function mirrored(shop: Shop, invoice: Json): Promise<Json> {
  expect((await deliver(app.url, shop.communityId, mock.signedEvent('invoice.paid', invoice))).status).toBe(200);
  const { rows } = await app.owner.query('select billing.invoice_json(i) as j from billing.invoices i where provider_ref = $1', [invoice.id]);
  return rows[0].j;
}

test('the Checkout Session\'s customer_details become the member\'s billing details', async () => {
  const { memberId } = await stripeSubscribe(taxed, GERMAN_BUSINESS);
  const { rows: [m] } = await app.owner.query('select billing_name, billing_address_lines, billing_country, billing_tax_id from billing.members where id = $1', [memberId]);
  expect(m).toEqual({ billing_name: 'Musterfirma GmbH', billing_address_lines: ['Hauptstr. 1', '10115 Berlin'], billing_country: 'DE', billing_tax_id: 'DE123456789' });
});

test('a Stripe invoice records the tax Stripe charged: its lines, rate, country and the buyer\'s tax id; the total adds up', async () => {
  const { ref } = await stripeSubscribe(taxed, { ...GERMAN_BUSINESS, tax_ids: [] });
  const inv = await mirrored(taxed, stripeInvoice(`in_tax_${seq}`, ref, { subtotal: 800, total: 952, country: 'DE',
    taxes: [{ amount: 152, tax_behavior: 'exclusive', taxable_amount: 800, taxability_reason: 'standard_rated', type: 'tax_rate_details', tax_rate_details: { tax_rate: 'txr_1' } }] }));
  expect(inv).toMatchObject({ status: 'paid', subtotal_cents: 800, discount_cents: 0, tax_cents: 152, total_cents: 952, amount_paid_cents: 952,
    tax_country: 'DE', buyer_country: 'DE', reverse_charge: false, seller_country: 'IE', seller_tax_id: 'IE1234567T' });
  expect(inv.tax_lines).toEqual([{ name: 'Tax', country: 'DE', rate_ppm: 190000, inclusive: false, taxable_cents: 800, amount_cents: 152 }]);
  // No line was needed to explain the total.
  expect(inv.lines.map((l: Json) => l.type)).toEqual(['plan']);
});

test('Stripe\'s reverse charge is recorded with the legal mention', async () => {
  const { ref } = await stripeSubscribe(taxed, GERMAN_BUSINESS);
  const inv = await mirrored(taxed, stripeInvoice(`in_rc_${seq}`, ref, { subtotal: 800, total: 800, country: 'DE',
    taxIds: [{ type: 'eu_vat', value: 'DE123456789' }],
    taxes: [{ amount: 0, tax_behavior: 'exclusive', taxable_amount: 800, taxability_reason: 'reverse_charge', type: 'tax_rate_details', tax_rate_details: null }] }));
  expect(inv).toMatchObject({ tax_cents: 0, total_cents: 800, reverse_charge: true, buyer_tax_id: 'DE123456789',
    tax_note: 'Reverse charge: VAT to be accounted for by the recipient, Article 196 Directive 2006/112/EC.' });
});

test('a Stripe invoice without tax carries none, whatever the local rates say', async () => {
  const { ref } = await stripeSubscribe(plain, { ...GERMAN_BUSINESS, tax_ids: [] });
  const inv = await mirrored(plain, stripeInvoice(`in_none_${seq}`, ref, { subtotal: 800, total: 800, country: 'DE', taxes: [] }));
  expect(inv).toMatchObject({ tax_cents: 0, total_cents: 800, tax_lines: [], buyer_country: 'DE' });
});

test('a one-time purchase through Stripe records the tax of its Checkout Session', async () => {
  const link = await checkout(app, taxed, { tier_id: taxed.ids.tiers.guide, subject: externalSubject('stax-pay') });
  expect(link.status).toBe(200);
  const pi = `pi_tax_${++seq}`;
  expect((await deliver(app.url, taxed.communityId, mock.signedEvent('checkout.session.completed', {
    id: `cs_pay_t${seq}`, object: 'checkout.session', mode: 'payment', status: 'complete', payment_status: 'paid',
    metadata: { checkout_id: link.body.checkout_id }, payment_intent: pi, customer: `cus_p${seq}`,
    amount_subtotal: 900, amount_total: 1071, total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 171 },
    customer_details: { ...GERMAN_BUSINESS, tax_ids: [] },
  }))).status).toBe(200);
  const list = await call(app.url, 'GET', `/v1/invoices?member_id=${link.body.member_id}`, { key: taxed.key });
  expect(list.body.data[0]).toMatchObject({ billing_reason: 'purchase', subtotal_cents: 900, tax_cents: 171, total_cents: 1071,
    amount_paid_cents: 1071, buyer_country: 'DE', tax_country: 'DE' });
  expect(list.body.data[0].tax_lines).toEqual([{ name: 'Tax', country: 'DE', rate_ppm: null, inclusive: false, taxable_cents: 900, amount_cents: 171 }]);
});
