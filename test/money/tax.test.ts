// Tax (issue 30 item 5; docs/decisions/tax.md): rates per buyer country set in the
// catalog file (inclusive or exclusive, exact parts per million), the buyer's country and
// tax id from checkout (the link or the sandbox page's billing details), and every
// invoice path (checkout, renewal alone and in a batch, a declined renewal, a plan
// change, a one-time purchase) taxed by one SQL computation: tax lines, subtotal, tax and
// total that add up as constraints, the parties' countries and tax ids, the EU reverse
// charge with its legal mention (JSON and PDF), credit notes with proportional tax, and
// MRR and revenue that leave the tax out.
import { call, startApp, TestApp } from '../support/app';
import { pdfText } from '../support/pdf-text';
import { advance, catalog, checkout, createShop, externalSubject, pay, Shop } from '../support/shop';
import { sandboxSetCard } from '../../src/domain/checkout/checkout-completion';
import { applyCatalog } from '../../src/domain/catalog/catalog-file';
import { asTenant } from '../support/tenant';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';

let app: TestApp;
let shop: Shop;

const SELLER = { legal_name: 'Gold Club Ltd', address_lines: ['1 Harbour Street', 'Dublin D02 X285'], country: 'IE', tax_id: 'IE1234567T' };
const RATES = [
  { country: 'IE', name: 'VAT', rate_ppm: 230000, inclusive: true },
  { country: 'DE', name: 'VAT', rate_ppm: 190000 },
  { country: 'FR', name: 'TVA', rate_ppm: 200000 },
  { country: 'GR', name: 'VAT', rate_ppm: 240000 },
  { country: 'AU', name: 'GST', rate_ppm: 100000, active: false },
];

beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app, { type: 'sandbox' }, { seller: SELLER, tax_rates: RATES });
});
afterAll(() => app.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A checkout paid on the sandbox page; the invoice of its first charge. */
async function buy(tier: string, details: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers[tier], subject: externalSubject('tax'), ...details, ...extra });
  if (link.status !== 200) throw new Error(`checkout: ${link.text}`);
  const paid = await pay(link.body.url);
  expect(paid.status).toBe(303);
  const { rows: [cs] } = await app.owner.query<{ subscription_id: string | null; purchase_id: string | null }>(
    'select subscription_id, purchase_id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  const list = await call(app.url, 'GET', `/v1/invoices?member_id=${link.body.member_id}`, { key: shop.key });
  expect(list.status).toBe(200);
  return { invoice: list.body.data[0] as Json, page: paid.page, memberId: link.body.member_id as string, ...cs, url: link.body.url as string };
}

const line = (over: Json) => ({ name: 'VAT', country: 'DE', rate_ppm: 190000, inclusive: false, ...over });

test('the catalog file sets the seller and the rates; GET /v1/tax-settings and the catalog file show them; a second apply changes nothing', async () => {
  const r = await call(app.url, 'GET', '/v1/tax-settings', { key: shop.key });
  expect(r.status).toBe(200);
  expect(r.body.seller).toMatchObject({ ...SELLER, eu_vat_id_valid: true });
  expect(r.body.rates.map((x: Json) => [x.country, x.name, x.rate_ppm, x.inclusive, x.active])).toEqual([
    ['AU', 'GST', 100000, false, false], ['DE', 'VAT', 190000, false, true], ['FR', 'TVA', 200000, false, true],
    ['GR', 'VAT', 240000, false, true], ['IE', 'VAT', 230000, true, true]]);
  expect(r.body.stripe_automatic_tax).toBe(false);
  const file = await asTenant(app.owner, shop.communityId, async (c) => (await c.query('select billing_api.catalog_file($1) as f', [{}])).rows[0].f);
  expect(file.seller).toEqual(SELLER);
  expect(file.tax_rates).toHaveLength(5);
  const again = await applyCatalog(app.owner, shop.communityId, catalog({ type: 'sandbox' }, { seller: SELLER, tax_rates: RATES }));
  expect(again.changes).toEqual([]);
});

test('the database refuses a rate it cannot charge: a country not in capitals, more than 100%, a country twice', async () => {
  const bad = [
    [`insert into billing.tax_rates (community_id, country, name, rate_ppm) values ($1, 'de', 'VAT', 1)`, '23514'],
    [`insert into billing.tax_rates (community_id, country, name, rate_ppm) values ($1, 'NL', 'VAT', 1000001)`, '23514'],
    [`insert into billing.tax_rates (community_id, country, name, rate_ppm) values ($1, 'DE', 'VAT', 1)`, '23505'],
  ];
  for (const [sql, code] of bad) {
    await expect(app.owner.query(sql, [shop.communityId])).rejects.toMatchObject({ code });
  }
});

test('exclusive tax: a German buyer pays the price plus 19%, and the page says so before paying', async () => {
  const { invoice, page } = await buy('gold', { customer_country: 'DE' }, { plan_id: shop.ids.plans['gold-monthly'] });
  expect(page).toContain('VAT 19% (DE), added to the price: 2.85 USD');
  expect(page).toMatch(/Due today<\/dt><dd><strong>17\.85 USD<\/strong>/);
  expect(invoice).toMatchObject({ status: 'paid', subtotal_cents: 1500, discount_cents: 0, tax_cents: 285, total_cents: 1785,
    amount_paid_cents: 1785, total_excluding_tax_cents: 1500, tax_country: 'DE', reverse_charge: false, tax_note: null,
    buyer_country: 'DE', buyer_tax_id: null, seller_country: 'IE', seller_tax_id: 'IE1234567T' });
  expect(invoice.tax_lines).toEqual([line({ taxable_cents: 1500, amount_cents: 285 })]);
});

test('inclusive tax: an Irish buyer pays the price, of which VAT 23% is the part; rounding half away from zero', async () => {
  const { invoice } = await buy('gold', { customer_country: 'IE' }, { plan_id: shop.ids.plans['gold-monthly'] });
  // 1500 * 23 / 123 = 280.49 -> 280
  expect(invoice).toMatchObject({ subtotal_cents: 1500, tax_cents: 280, total_cents: 1500, amount_paid_cents: 1500, total_excluding_tax_cents: 1220 });
  expect(invoice.tax_lines).toEqual([{ name: 'VAT', country: 'IE', rate_ppm: 230000, inclusive: true, taxable_cents: 1220, amount_cents: 280 }]);
  // A discount lowers what is taxed: 1350 * 19% = 256.5 -> 257 (half away from zero).
  const { invoice: discounted } = await buy('gold', { customer_country: 'DE' }, { plan_id: shop.ids.plans['gold-monthly'], discount_code: 'WELCOME10' });
  expect(discounted).toMatchObject({ subtotal_cents: 1500, discount_cents: 150, tax_cents: 257, total_cents: 1607 });
});

test('the buyer\'s country unknown, the seller\'s decides; a country without an active rate pays none', async () => {
  const { invoice: unknown } = await buy('silver');
  expect(unknown).toMatchObject({ buyer_country: null, tax_country: 'IE', tax_cents: 150, total_cents: 800 });
  const { invoice: us } = await buy('silver', { customer_country: 'US' });
  expect(us).toMatchObject({ buyer_country: 'US', tax_country: null, tax_cents: 0, total_cents: 800, tax_lines: [] });
  const { invoice: au } = await buy('silver', { customer_country: 'AU' });
  expect(au).toMatchObject({ tax_cents: 0, tax_lines: [] });
});

test('EU B2B: a VAT id of another member state is reverse charged with the legal mention; a malformed one, or one of the seller\'s state, is not', async () => {
  const { invoice } = await buy('silver', { customer_country: 'DE', customer_tax_id: 'DE 123 456 789', customer_name: 'Musterfirma GmbH' });
  expect(invoice).toMatchObject({ tax_cents: 0, total_cents: 800, reverse_charge: true, buyer_tax_id: 'DE 123 456 789', tax_country: 'DE',
    tax_note: 'Reverse charge: VAT to be accounted for by the recipient, Article 196 Directive 2006/112/EC.' });
  expect(invoice.tax_lines).toEqual([line({ rate_ppm: 0, taxable_cents: 800, amount_cents: 0 })]);
  // Greece's VAT ids start EL.
  expect((await buy('silver', { customer_country: 'GR', customer_tax_id: 'EL123456789' })).invoice).toMatchObject({ reverse_charge: true, tax_cents: 0 });
  expect((await buy('silver', { customer_country: 'DE', customer_tax_id: 'DE12' })).invoice).toMatchObject({ reverse_charge: false, tax_cents: 152 });
  expect((await buy('silver', { customer_country: 'DE', customer_tax_id: 'FR12345678901' })).invoice).toMatchObject({ reverse_charge: false, tax_cents: 152 });
  // A business in the seller's own state pays its VAT.
  expect((await buy('silver', { customer_country: 'IE', customer_tax_id: 'IE9876543W' })).invoice).toMatchObject({ reverse_charge: false, tax_cents: 150 });
});

test('the sandbox page asks for billing details: the tax follows the country at once, a bad country is refused beside its field', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject('page') });
  const url = new URL(link.body.url);
  const before = await (await fetch(url)).text();
  expect(before).toContain('Billing details');
  expect(before).toContain('VAT 23% (IE), included in the price: 1.50 USD');
  const details = `${url.pathname}/details${url.search}`;
  const post = (body: Record<string, string>) => fetch(`${app.url}${details}`, { method: 'POST', redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(body).toString() });
  const refused = await post({ customer_country: 'Germany' });
  expect(refused.status).toBe(422);
  const refusedPage = await refused.text();
  expect(refusedPage).toContain('customer_country: expected a two-letter ISO 3166-1 country code');
  expect(refusedPage).toContain('aria-invalid="true"');
  const saved = await post({ customer_name: 'Anna Schmidt', customer_address: 'Hauptstr. 1\n10115 Berlin', customer_country: 'de', customer_tax_id: '' });
  expect(saved.status).toBe(303);
  const after = await (await fetch(url)).text();
  expect(after).toContain('VAT 19% (DE), added to the price: 1.52 USD');
  expect(after).toMatch(/Due today<\/dt><dd><strong>9\.52 USD<\/strong>/);
  expect(after).toContain('value="Anna Schmidt"');
  expect((await pay(link.body.url)).status).toBe(303);
  const { rows: [m] } = await app.owner.query('select billing_name, billing_address_lines, billing_country, billing_tax_id from billing.members where id = $1', [link.body.member_id]);
  expect(m).toEqual({ billing_name: 'Anna Schmidt', billing_address_lines: ['Hauptstr. 1', '10115 Berlin'], billing_country: 'DE', billing_tax_id: null });
  const inv = (await call(app.url, 'GET', `/v1/invoices?member_id=${link.body.member_id}`, { key: shop.key })).body.data[0];
  expect(inv).toMatchObject({ total_cents: 952, tax_cents: 152, buyer_country: 'DE' });
});

test('POST /v1/checkout-links refuses a malformed country by its field', async () => {
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject('bad'), customer_country: 'DEU' });
  expect(r.status).toBe(422);
  expect(r.body.param).toBe('customer_country');
});

test('renewals are taxed by the buyer\'s country at renewal time, in a batch and one by one (a declined card)', async () => {
  const ok = await buy('silver', { customer_country: 'DE' });
  const declining = await buy('silver', { customer_country: 'DE' });
  expect(ok.invoice.total_cents).toBe(952);
  // Both buyers moved to France since: the renewals charge French VAT.
  await app.owner.query(`update billing.members set billing_country = 'FR' where id = any ($1)`, [[ok.memberId, declining.memberId]]);
  await sandboxSetCard(app.owner, declining.subscription_id!, true);
  await advance(app, shop, 32);
  const { rows } = await app.owner.query<Json>(
    `select subscription_id, status, subtotal_cents, tax_cents, total_cents, amount_paid_cents, tax_country, buyer_country, tax_lines,
       (select array_agg(a.amount_cents order by a.id) from billing.payment_attempts a where a.invoice_id = i.id) as attempts
     from billing.invoices i where subscription_id = any ($1) and billing_reason = 'subscription_cycle' order by subscription_id`,
    [[ok.subscription_id, declining.subscription_id]]);
  const byId = new Map(rows.map((r) => [r.subscription_id, r]));
  expect(byId.get(ok.subscription_id)).toMatchObject({ status: 'paid', subtotal_cents: 800, tax_cents: 160, total_cents: 960,
    amount_paid_cents: 960, tax_country: 'FR', buyer_country: 'FR' });
  expect(byId.get(declining.subscription_id)).toMatchObject({ status: 'open', tax_cents: 160, total_cents: 960, amount_paid_cents: 0 });
  // What was charged (or tried) is the taxed total.
  expect(byId.get(ok.subscription_id)!.attempts.map(Number)).toEqual([960]);
  expect([...new Set(byId.get(declining.subscription_id)!.attempts.map(Number))]).toEqual([960]);
  expect(byId.get(ok.subscription_id)!.tax_lines).toEqual([{ name: 'TVA', country: 'FR', rate_ppm: 200000, inclusive: false, taxable_cents: 800, amount_cents: 160 }]);
});

test('a plan change\'s proration and a one-time purchase are taxed the same way', async () => {
  const { subscription_id: sub } = await buy('silver', { customer_country: 'DE' });
  const r = await call(app.url, 'POST', `/v1/subscriptions/${sub}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['gold-monthly'] } });
  expect(r.status).toBe(200);
  const { rows: [inv] } = await app.owner.query<Json>(
    `select subtotal_cents::int as sub, tax_cents::int as tax, total_cents::int as total, amount_paid_cents::int as paid, tax_country
     from billing.invoices where subscription_id = $1 and billing_reason = 'subscription_update'`, [sub]);
  expect(inv.sub).toBeGreaterThan(0);
  expect(inv).toEqual({ sub: inv.sub, tax: Math.round(inv.sub * 0.19), total: inv.sub + Math.round(inv.sub * 0.19), paid: inv.total, tax_country: 'DE' });
  const { invoice, purchase_id: purchase } = await buy('guide', { customer_country: 'DE' });
  expect(invoice).toMatchObject({ billing_reason: 'purchase', purchase_id: purchase, subtotal_cents: 900, tax_cents: 171, total_cents: 1071, amount_paid_cents: 1071 });
  const { rows: [p] } = await app.owner.query('select amount_cents from billing.purchases where id = $1', [purchase]);
  expect(p.amount_cents).toBe(900);
});

test('refunds make credit notes with the tax in proportion, adding up to the invoice\'s tax', async () => {
  const { invoice } = await buy('gold', { customer_country: 'DE' }, { plan_id: shop.ids.plans['gold-monthly'] });
  const first = await call(app.url, 'POST', `/v1/invoices/${invoice.id}/refunds`, { key: shop.key, body: { amount_cents: 1000 } });
  expect(first.status).toBe(200);
  const rest = await call(app.url, 'POST', `/v1/invoices/${invoice.id}/refunds`, { key: shop.key, body: {} });
  expect(rest.status).toBe(200);
  // 285 * 1000 / 1785 = 159.66 -> 160; the rest credits what is left: 125.
  expect(rest.body.invoice.credit_notes.map((c: Json) => [c.amount_cents, c.tax_cents])).toEqual([[1000, 160], [785, 125]]);
});

test('an invoice\'s sums are constraints: the total adds the exclusive tax, the tax is its lines, a reverse charge carries none', async () => {
  const { invoice } = await buy('silver', { customer_country: 'US' });
  const insert = (cols: { total: number; tax: number; lines: unknown[]; reverse?: boolean }) => app.owner.query(
    `insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
       subtotal_cents, discount_cents, total_cents, provider, created_at, tax_lines, tax_cents, reverse_charge)
     values ($1, $2, $3, 'draft', 'subscription_cycle', 'usd', '[{"type": "plan", "description": "x", "amount_cents": 800}]',
       800, 0, $4, 'sandbox', now(), $5, $6, $7)`,
    [shop.communityId, invoice.member_id, invoice.subscription_id, cols.total, JSON.stringify(cols.lines), cols.tax, cols.reverse ?? false]);
  const de = line({ taxable_cents: 800, amount_cents: 152 });
  await expect(insert({ total: 800, tax: 152, lines: [de] })).rejects.toMatchObject({ code: '23514', constraint: 'invoices_total' });
  await expect(insert({ total: 952, tax: 150, lines: [de] })).rejects.toMatchObject({ code: '23514', constraint: 'invoices_tax_is_lines' });
  await expect(insert({ total: 952, tax: 152, lines: [de], reverse: true })).rejects.toMatchObject({ code: '23514', constraint: 'invoices_reverse_charge_untaxed' });
  await expect(insert({ total: 648, tax: -152, lines: [{ ...de, amount_cents: -152 }] })).rejects.toMatchObject({ code: '23514' });
  await expect(insert({ total: 952, tax: 152, lines: [de] })).resolves.toBeDefined();
  // A finalized invoice keeps its tax and the parties it was taxed for.
  const { rows: [paid] } = await app.owner.query<Json>(
    `select i.id from billing.invoices i where i.community_id = $1 and i.tax_cents > 0 and i.status = 'paid' limit 1`, [shop.communityId]);
  await expect(app.owner.query(`update billing.invoices set tax_country = 'FR' where id = $1`, [paid.id])).rejects.toMatchObject({ code: 'BL409' });
});

test('the PDF prints both parties with their tax ids, the tax lines, subtotal, tax and total, and the reverse charge\'s mention', async () => {
  const reverse = await buy('silver', { customer_country: 'DE', customer_tax_id: 'DE123456789', customer_name: 'Musterfirma GmbH',
    customer_address_lines: ['Hauptstr. 1', '10115 Berlin'] });
  const text = async (id: string) => {
    const res = await fetch(`${app.url}/v1/invoices/${id}/pdf`, { headers: { authorization: `Bearer ${shop.key}` } });
    expect(res.status).toBe(200);
    return pdfText(Buffer.from(await res.arrayBuffer()));
  };
  const r = await text(reverse.invoice.id);
  for (const s of ['Gold Club Ltd', '1 Harbour Street', 'Dublin D02 X285', 'Tax id: IE1234567T', 'Musterfirma GmbH', 'Hauptstr. 1', '10115 Berlin', 'Tax id: DE123456789']) {
    expect(r).toContain(s);
  }
  expect(r).toMatch(/VAT 0% \(DE\) on 8\.00 USD\s+0\.00 USD/);
  expect(r).toMatch(/Subtotal\s+8\.00 USD/);
  expect(r).toMatch(/Tax\s+0\.00 USD/);
  expect(r).toMatch(/Total\s+8\.00 USD/);
  expect(r.replace(/\s+/g, ' ')).toContain('Reverse charge: VAT to be accounted for by the recipient, Article 196 Directive 2006/112/EC.');
  // The name and address are the PDF's only: never in the invoice's JSON or any event (webhooks).
  const { rows: [leaks] } = await app.owner.query<{ n: number }>(
    `select count(*)::int as n from billing.events where community_id = $1 and (data::text like '%Musterfirma%' or data::text like '%Hauptstr%')`, [shop.communityId]);
  expect(leaks.n).toBe(0);
  expect(JSON.stringify(reverse.invoice)).not.toMatch(/Musterfirma|Hauptstr/);
  const exclusive = await text((await buy('gold', { customer_country: 'DE' }, { plan_id: shop.ids.plans['gold-monthly'] })).invoice.id);
  expect(exclusive).toMatch(/VAT 19% \(DE\) on 15\.00 USD\s+2\.85 USD/);
  expect(exclusive).toMatch(/Tax\s+2\.85 USD/);
  expect(exclusive).toMatch(/Total\s+17\.85 USD/);
  expect(exclusive).toMatch(/Total excluding tax\s+15\.00 USD/);
  expect(exclusive).not.toContain('Reverse charge');
  const inclusive = await text((await buy('gold', { customer_country: 'IE' }, { plan_id: shop.ids.plans['gold-monthly'] })).invoice.id);
  expect(inclusive).toMatch(/VAT 23% \(IE\) on 12\.20 USD, included\s+2\.80 USD/);
  expect(inclusive).toMatch(/Total\s+15\.00 USD/);
});

test('tax does not move MRR: exclusive tax is left out, inclusive tax taken out; revenue is net of tax', async () => {
  const mrrShop = await createShop(app, { type: 'sandbox' }, { seller: SELLER, tax_rates: RATES });
  const subscribeIn = async (country: string | null) => {
    const link = await checkout(app, mrrShop, { tier_id: mrrShop.ids.tiers.silver, subject: externalSubject('mrr'), ...(country ? { customer_country: country } : {}) });
    expect((await pay(link.body.url)).status).toBe(303);
    const { rows } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
    return rows[0].id;
  };
  const mrrOf = async (ids: string[]) => (await app.owner.query<{ sub: string; cents: string }>(
    `select subscription_id as sub, sum(to_cents - from_cents)::numeric(12,4)::text as cents from billing.mrr_movements
     where community_id = $1 and subscription_id = any ($2) group by 1`, [mrrShop.communityId, ids])).rows;
  const untaxed = await subscribeIn('US');
  const exclusive = await subscribeIn('DE');
  const inclusive = await subscribeIn('IE');
  const moves = new Map((await mrrOf([untaxed, exclusive, inclusive])).map((r) => [r.sub, Number(r.cents)]));
  // The German buyer pays 9.52, the American 8.00: the same MRR.
  expect(moves.get(exclusive)).toBe(800);
  expect(moves.get(untaxed)).toBe(800);
  // The Irish buyer pays 8.00 of which 23% VAT: 800 / 1.23 = 650.41 a month.
  expect(moves.get(inclusive)).toBeCloseTo(650.4065, 3);
  const mrr = await asTenant(app.owner, mrrShop.communityId, async (c) => (await c.query('select mrr_cents::int as m from analytics.mrr')).rows[0].m,
    { role: 'billing_api' });
  expect(mrr).toBe(2250);
  // A one-time purchase from Ireland: 9.00 of which 23% VAT (168).
  const guide = await checkout(app, mrrShop, { tier_id: mrrShop.ids.tiers.guide, subject: externalSubject('mrr'), customer_country: 'IE' });
  expect((await pay(guide.body.url)).status).toBe(303);
  const revenue = await asTenant(app.owner, mrrShop.communityId, async (c) => (await c.query(
    `select sum(r.subscription_cents)::int as net, sum(r.purchase_cents)::int as purchases,
       (select sum(p.tax_cents)::int from analytics.paid_invoices_daily p) as tax from analytics.revenue_daily r`)).rows[0],
  { role: 'billing_api' });
  // Paid 800 + 952 + 800 + 900; tax 152 + 150 + 168.
  expect(revenue).toEqual({ net: 800 + 800 + 650, purchases: 900 - 168, tax: 152 + 150 + 168 });
  // A renewal in the same country moves nothing.
  await advance(app, mrrShop, 32);
  expect(new Map((await mrrOf([untaxed, exclusive, inclusive])).map((r) => [r.sub, Number(r.cents)])).get(exclusive)).toBe(800);
});

test('GraphQL invoices carry the tax', async () => {
  const { invoice } = await buy('silver', { customer_country: 'DE', customer_tax_id: 'DE123456789' });
  const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.key}` },
    body: JSON.stringify({ query: '{ invoices(first: 100) { nodes { id taxCents taxCountry reverseCharge buyerTaxId sellerTaxId taxLines } } }' }) });
  const body = await res.json();
  expect(body.errors).toBeUndefined();
  const node = body.data.invoices.nodes.find((n: Json) => n.id === invoice.id);
  expect(node).toMatchObject({ taxCountry: 'DE', reverseCharge: true, buyerTaxId: 'DE123456789', sellerTaxId: 'IE1234567T' });
  expect(String(node.taxCents)).toBe('0');
  expect(node.taxLines).toEqual(invoice.tax_lines);
});

test('the member portal\'s plan change shows what is due now with the tax its invoice will add', async () => {
  const { subscription_id: sub, memberId } = await buy('silver', { customer_country: 'DE' });
  const session = await call(app.url, 'POST', `/v1/members/${memberId}/portal-sessions`, { key: shop.key, body: {} });
  expect(session.status).toBe(200);
  const opened = await fetch(session.body.url);
  await opened.text();
  const cookie = (opened.headers.get('set-cookie') ?? '').split(';')[0];
  const base = new URL(session.body.url).pathname;
  const page = await (await fetch(`${app.url}${base}/subscriptions/${sub}/switch`, { headers: { cookie } })).text();
  const due = /Due now: <strong>([0-9.]+) USD<\/strong> \(([0-9.]+) USD for the rest of the period, less ([0-9.]+) USD unused on your current plan, plus VAT 19% ([0-9.]+) USD\)/
    .exec(page.split('Gold monthly')[1] ?? '');
  expect(due).not.toBeNull();
  const [dueNow, charge, credit, tax] = due!.slice(1).map((x) => Math.round(Number(x) * 100));
  expect(tax).toBe(Math.round((charge - credit) * 0.19));
  expect(dueNow).toBe(charge - credit + tax);
});

test('the dashboard\'s Settings page shows the seller, the rates and Stripe Tax to a viewer', async () => {
  const invite = await inviteOperator(app.owner, shop.communityId, `viewer-tax-${Date.now()}@example.com`, 'viewer');
  const signed = await signInWithLink(app.api, invite.token, '10.77.0.30');
  if (!signed.ok) throw new Error('sign-in refused');
  const res = await fetch(`${app.url}/dashboard/settings`, { headers: { cookie: `billing_session=${signed.session.token}` } });
  expect(res.status).toBe(200);
  const page = (await res.text()).replace(/\s+/g, ' ');
  for (const s of ['Gold Club Ltd', '1 Harbour Street', 'IE1234567T', '<td>DE</td><td>VAT</td><td>19%</td><td>exclude it (added)</td><td>yes</td>',
    '<td>IE</td><td>VAT</td><td>23%</td><td>include it</td><td>yes</td>', '<td>AU</td><td>GST</td><td>10%</td><td>exclude it (added)</td><td>no</td>',
    'Stripe Tax</h2><p>Off.']) {
    expect(page).toContain(s);
  }
  expect(page).toContain('href="/dashboard/settings" aria-current="page"');
});
