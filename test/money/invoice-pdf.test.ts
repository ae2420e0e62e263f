// Invoices and receipts as PDF (issue 30 item 3; docs/decisions/invoice-pdf.md):
// GET /v1/invoices/{id}/pdf answers application/pdf whose text (read back with
// pdf-parse) names both parties, the number (or Draft), the dates, the lines, the
// discount, the total in the currency's own places, the paid date and method, and the
// credit notes of its refunds; the gate refuses what it refuses for any invoice read.
// The sandbox member portal and the dashboard link each invoice to it.
import { createKey } from '../../src/domain/communities/community-admin';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { call, startApp, TestApp } from '../support/app';
import { pdfText } from '../support/pdf-text';
import { checkout, createShop, pay, Shop } from '../support/shop';

let app: TestApp;
let shop: Shop;
let yen: Shop;

beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
  await app.owner.query(
    `update billing.communities set legal_name = 'Gold Club Ltd', address_lines = array['1 Harbour Street', 'Dublin D02 X285'],
       country = 'IE', tax_id = 'IE1234567T' where id = $1`, [shop.communityId]);
  yen = await createShop(app, { type: 'sandbox' }, {
    tiers: [{ key: 'dojo', name: 'Dojo', kind: 'subscription', billing_mode: 'recurring', rank: 1,
      plans: [{ key: 'dojo-monthly', name: 'Dojo monthly', amount_cents: 1200, currency: 'jpy', interval: 'month' }] }],
    discounts: [],
  });
});
afterAll(() => app.close());

interface Pdf { status: number; type: string | null; disposition: string | null; text: string; bytes: Buffer }

async function fetchPdf(url: string, headers: Record<string, string>): Promise<Pdf> {
  const res = await fetch(url, { headers });
  const bytes = Buffer.from(await res.arrayBuffer());
  const type = res.headers.get('content-type');
  return { status: res.status, type, disposition: res.headers.get('content-disposition'), bytes, text: type === 'application/pdf' ? await pdfText(bytes) : '' };
}

const pdfOf = (s: Shop, invoiceId: string) => fetchPdf(`${app.url}/v1/invoices/${invoiceId}/pdf`, { authorization: `Bearer ${s.key}` });

async function invoiceOf(s: Shop, subscriptionId: string) {
  const list = await call(app.url, 'GET', `/v1/invoices?subscription_id=${subscriptionId}`, { key: s.key });
  expect(list.status).toBe(200);
  return list.body.data[0];
}

/** A paid subscription bought by a Discord member named `username`, optionally of a plan and with a discount code. */
async function paidBy(s: Shop, tier: string, username: string, extra: { plan?: string; discountCode?: string } = {}) {
  const link = await checkout(app, s, {
    tier_id: s.ids.tiers[tier], subject: { platform: 'discord', platform_uid: `d-${username}-${Date.now()}`, username },
    ...(extra.plan ? { plan_id: s.ids.plans[extra.plan] } : {}),
    ...(extra.discountCode ? { discount_code: extra.discountCode } : {}),
  });
  if (link.status !== 200) throw new Error(`checkout: ${link.text}`);
  expect((await pay(link.body.url)).status).toBe(303);
  const { rows } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  return { memberId: link.body.member_id as string, invoice: await invoiceOf(s, rows[0].id) };
}

test('a paid invoice in a currency of 2 places: number, both parties, lines, discount, total, paid date and method', async () => {
  const { invoice, memberId } = await paidBy(shop, 'gold', 'ann_gold', { plan: 'gold-monthly', discountCode: 'WELCOME10' });
  expect(invoice).toMatchObject({ status: 'paid', currency: 'usd', subtotal_cents: 1500, discount_cents: 150, total_cents: 1350 });
  const pdf = await pdfOf(shop, invoice.id);
  expect(pdf.status).toBe(200);
  expect(pdf.type).toBe('application/pdf');
  expect(pdf.disposition).toBe(`inline; filename="${invoice.number}.pdf"`);
  expect(pdf.bytes.subarray(0, 5).toString()).toBe('%PDF-');
  const text = pdf.text;
  expect(text).toContain(`Number: ${invoice.number}`);
  expect(invoice.number).toMatch(/^\d{4}-\d{6}$/);
  // The seller's legal name, address, country and tax id; the buyer as known: a username and the member id.
  for (const seller of ['Gold Club Ltd', '1 Harbour Street', 'Dublin D02 X285', 'IE', 'Tax id: IE1234567T']) expect(text).toContain(seller);
  expect(text).toContain('Discord: ann_gold');
  expect(text).toContain(`Member ${memberId}`);
  // Lines and totals in dollars and cents.
  expect(text).toContain(invoice.lines.find((l: { type: string }) => l.type === 'plan').description);
  expect(text).toMatch(/Subtotal\s+15\.00 USD/);
  expect(text).toMatch(/Discount\s+-1\.50 USD/);
  expect(text).toMatch(/Total\s+13\.50 USD/);
  expect(text).toContain(`Date: ${invoice.created_at.slice(0, 10)}`);
  expect(text).toContain(`Paid: ${invoice.paid_at.slice(0, 10)} by sandbox test card (no money moved)`);
  // No tax rates exist yet: no tax line is printed.
  expect(text).not.toMatch(/VAT|GST|Tax\s+\d/);
});

test('a currency of 0 places prints whole units: 1200 JPY, never 12.00', async () => {
  const { invoice } = await paidBy(yen, 'dojo', 'kenji');
  expect(invoice).toMatchObject({ currency: 'jpy', total_cents: 1200 });
  const pdf = await pdfOf(yen, invoice.id);
  expect(pdf.status).toBe(200);
  expect(pdf.text).toMatch(/Total\s+1200 JPY/);
  expect(pdf.text).not.toContain('12.00');
  // A community without legal fields is named by its display name.
  const { rows } = await app.owner.query<{ name: string }>('select name from billing.communities where id = $1', [yen.communityId]);
  expect(pdf.text).toContain(rows[0].name);
  expect(pdf.text).not.toContain('Tax id');
});

test('text the standard fonts cannot show prints as ?, never as other glyphs; Latin-1 prints as written', async () => {
  const { invoice } = await paidBy(yen, 'dojo', 'hana');
  await app.owner.query(`update billing.communities set legal_name = '株式会社 Dojo Café' where id = $1`, [yen.communityId]);
  try {
    const pdf = await pdfOf(yen, invoice.id);
    expect(pdf.status).toBe(200);
    expect(pdf.text).toContain('???? Dojo Café');
  } finally {
    await app.owner.query('update billing.communities set legal_name = null where id = $1', [yen.communityId]);
  }
});

test('a refunded invoice lists its credit note: number, date and amount', async () => {
  const { invoice } = await paidBy(shop, 'silver', 'bo_silver');
  const refund = await call(app.url, 'POST', `/v1/invoices/${invoice.id}/refunds`, { key: shop.key, body: { amount_cents: 300 } });
  expect(refund.status).toBe(200);
  const number = refund.body.credit_note_number as string;
  expect(number).toMatch(/^CN-/);
  const text = (await pdfOf(shop, invoice.id)).text;
  expect(text).toContain('Credit notes');
  expect(text).toContain(`${number} of ${refund.body.created_at.slice(0, 10)}, refund ${refund.body.id}`);
  expect(text).toMatch(/Refunded\s+-3\.00 USD/);
  expect(text).toMatch(/Total\s+8\.00 USD/);
});

test('a draft has no number: the PDF says Draft and is named by its id', async () => {
  const { rows: [sub] } = await app.owner.query<{ id: string; member_id: string }>(
    `select id, member_id from billing.subscriptions where community_id = $1 limit 1`, [shop.communityId]);
  const { rows: [draft] } = await app.owner.query<{ id: string }>(
    `insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
       subtotal_cents, discount_cents, total_cents, provider, created_at)
     values ($1, $2, $3, 'draft', 'subscription_cycle', 'usd',
       '[{"type": "plan", "description": "Gold monthly (next period)", "amount_cents": 1500, "period_start": null, "period_end": null}]',
       1500, 0, 1500, 'sandbox', now()) returning id`, [shop.communityId, sub.member_id, sub.id]);
  const pdf = await pdfOf(shop, draft.id);
  expect(pdf.status).toBe(200);
  expect(pdf.disposition).toBe(`inline; filename="${draft.id}.pdf"`);
  expect(pdf.text).toContain('Draft: not numbered');
  expect(pdf.text).not.toContain('Number:');
  expect(pdf.text).not.toContain('Paid:');
  expect(pdf.text).toContain('Gold monthly (next period)');
});

test('unknown or another community\'s invoice answers 404; a key without invoices:read answers 403', async () => {
  const missing = await call(app.url, 'GET', '/v1/invoices/inv_00000000000000000000000000/pdf', { key: shop.key });
  expect(missing.status).toBe(404);
  expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(missing.body.code).toBe('not_found');
  const { invoice } = await paidBy(yen, 'dojo', 'other_shop');
  const foreign = await call(app.url, 'GET', `/v1/invoices/${invoice.id}/pdf`, { key: shop.key });
  expect(foreign.status).toBe(404);
  expect(foreign.body.code).toBe('not_found');
  const narrow = await createKey(app.owner, yen.communityId, ['plans:read']);
  const refused = await call(app.url, 'GET', `/v1/invoices/${invoice.id}/pdf`, { key: narrow.key });
  expect(refused.status).toBe(403);
  expect(refused.body).toMatchObject({ code: 'missing_scope', required_scope: 'invoices:read' });
  // Through call(): a success is held to the OpenAPI document's application/pdf too.
  const ok = await call(app.url, 'GET', `/v1/invoices/${invoice.id}/pdf`, { key: yen.key });
  expect(ok.status).toBe(200);
});

test('the OpenAPI document describes an application/pdf answer', async () => {
  const doc = (await call(app.url, 'GET', '/v1/openapi.json')).body;
  const op = doc.paths['/v1/invoices/{id}/pdf'].get;
  expect(op.operationId).toBe('get_invoice_pdf');
  expect(op['x-required-scope']).toBe('invoices:read');
  expect(Object.keys(op.responses['200'].content)).toEqual(['application/pdf']);
  expect(op.responses['200'].headers['Content-Disposition']).toBeDefined();
  expect(op.responses['404']).toBeDefined();
});

/** Opens a member portal session for memberId; its cookie and base path. */
async function portalFor(s: Shop, memberId: string) {
  const session = await call(app.url, 'POST', `/v1/members/${memberId}/portal-sessions`, { key: s.key, body: {} });
  expect(session.status).toBe(200);
  const opened = await fetch(session.body.url);
  const page = await opened.text();
  const cookie = (opened.headers.get('set-cookie') ?? '').split(';')[0];
  expect(cookie).toMatch(/^billing_portal=bmp_/);
  return { page, cookie, base: new URL(session.body.url).pathname };
}

test('the member portal links each invoice to its PDF, which serves the member\'s own invoices only', async () => {
  const ann = await paidBy(shop, 'silver', 'portal_ann');
  const bo = await paidBy(shop, 'silver', 'portal_bo');
  const portal = await portalFor(shop, ann.memberId);
  const href = `${portal.base}/invoices/${ann.invoice.id}/pdf`;
  expect(portal.page).toContain(`href="${href}"`);
  expect(portal.page).toContain(`${ann.invoice.number} (PDF)`);
  const mine = await fetchPdf(`${app.url}${href}`, { cookie: portal.cookie });
  expect(mine.status).toBe(200);
  expect(mine.type).toBe('application/pdf');
  expect(mine.text).toContain(`Number: ${ann.invoice.number}`);
  expect(mine.text).toContain('Discord: portal_ann');
  // Another member's invoice, even of the same community: the database's member fence answers 404.
  const theirs = await fetch(`${app.url}${portal.base}/invoices/${bo.invoice.id}/pdf`, { headers: { cookie: portal.cookie } });
  expect(theirs.status).toBe(404);
  expect(theirs.headers.get('content-type')).toMatch(/^text\/html/);
  // Without the session cookie: nothing.
  expect((await fetch(`${app.url}${href}`)).status).toBe(401);
});

test('the dashboard links each invoice to its PDF, served to a signed-in operator', async () => {
  const { invoice } = await paidBy(shop, 'silver', 'dash_cy');
  const invite = await inviteOperator(app.owner, shop.communityId, `viewer-${Date.now()}@example.com`, 'viewer');
  const signed = await signInWithLink(app.api, invite.token, '10.77.0.1');
  if (!signed.ok) throw new Error('sign-in refused');
  const cookie = `billing_session=${signed.session.token}`;
  const page = await (await fetch(`${app.url}/dashboard/invoices`, { headers: { cookie } })).text();
  expect(page).toContain(`href="/dashboard/invoices/${invoice.id}/pdf"`);
  const pdf = await fetchPdf(`${app.url}/dashboard/invoices/${invoice.id}/pdf`, { cookie });
  expect(pdf.status).toBe(200);
  expect(pdf.text).toContain(`Number: ${invoice.number}`);
  const { invoice: foreign } = await paidBy(yen, 'dojo', 'dash_other');
  expect((await fetch(`${app.url}/dashboard/invoices/${foreign.id}/pdf`, { headers: { cookie } })).status).toBe(404);
});
