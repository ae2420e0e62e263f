// The receipt's link to its PDF (issue 30; docs/decisions/mail-invoice-links.md): a
// signed link, without API key or portal session, downloads that invoice's PDF for its
// member; the refund notice links the invoice with its credit note. A tampered,
// expired, foreign or revoked link answers a 404 page, and no link reaches the logs.
// No mail worker here (test/mail/mail-delivery.test.ts has the one that sends): the
// messages are read from the outbox and their links filled as the worker fills them.
import crypto from 'node:crypto';
import { captureLogs } from '../../src/core/log';
import { fillLinks, invoicePdfLink } from '../../src/domain/mail/mail-links';
import { call, startApp, TestApp } from '../support/app';
import { pdfText } from '../support/pdf-text';
import { checkout, createShop, externalSubject, pay, Shop } from '../support/shop';

const KEY = crypto.randomBytes(32).toString('base64');
let app: TestApp;
let shop: Shop;

beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: KEY });
  shop = await createShop(app);
});
afterAll(() => app.close());

async function buy(email: string | null) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(),
    ...(email ? { customer_email: email } : {}) });
  expect(link.status).toBe(200);
  expect((await pay(link.body.url)).status).toBe(303);
  const memberId = link.body.member_id as string;
  const invoices = await call(app.url, 'GET', `/v1/invoices?member_id=${memberId}`, { key: shop.key });
  return { memberId, invoice: invoices.body.data[0] as { id: string; number: string; total_cents: number } };
}

/** The text of a member's message of one template, its links filled as the worker fills them. */
async function messageText(memberId: string, template: string): Promise<string> {
  const { rows } = await app.owner.query<{ text_body: string }>(
    'select text_body from billing.mail_messages where community_id = $1 and member_id = $2 and template = $3', [shop.communityId, memberId, template]);
  expect(rows).toHaveLength(1);
  return fillLinks(rows[0].text_body, { baseUrl: app.url, key: KEY, communityId: shop.communityId, memberId }, false);
}

const pdfLinkIn = (text: string) => /(http:\/\/\S+\/mail\/invoices\/\S+)/.exec(text)?.[1];

async function download(url: string) {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
}

async function expectRefused(url: string) {
  const res = await download(url);
  expect([res.status, res.type]).toEqual([404, 'text/html; charset=utf-8']);
  expect(res.bytes.toString()).toContain('This link is not valid or has expired');
}

test('the receipt\'s link downloads its invoice\'s PDF without a key or a session, and is never logged', async () => {
  const logs = captureLogs('debug');
  try {
    const { memberId, invoice } = await buy(`pdf.${Date.now()}@example.test`);
    const text = await messageText(memberId, 'receipt');
    const url = pdfLinkIn(text)!;
    expect(text).toContain(`Download the invoice (PDF): ${url}`);
    expect(url).toContain(`/mail/invoices/${shop.communityId}/${memberId}/${invoice.id}/pdf?exp=`);
    const pdf = await download(url);
    expect([pdf.status, pdf.type]).toEqual([200, 'application/pdf']);
    const pdfTextOf = await pdfText(pdf.bytes);
    expect(pdfTextOf).toContain(`Number: ${invoice.number}`);
    expect(pdfTextOf).toMatch(/Total\s+15\.00 USD/);
    expect(pdfTextOf).toContain(`Member ${memberId}`);
    // Good for more than a year: a receipt is looked up at tax time.
    const exp = Number(new URL(url).searchParams.get('exp'));
    expect(exp * 1000 - Date.now()).toBeGreaterThan(365 * 86400_000);
    const sig = new URL(url).searchParams.get('sig')!;
    expect(logs.text()).toContain('/mail/invoices/{communityId}/{memberId}/{invoiceId}/pdf');
    expect(logs.text()).not.toContain(sig);
  } finally {
    logs.stop();
  }
});

test('a tampered, foreign, expired or revoked link answers a 404 page, never another invoice', async () => {
  const a = await buy(`a.${Date.now()}@example.test`);
  const b = await buy(null);
  const good = invoicePdfLink(app.url, KEY, shop.communityId, a.memberId, a.invoice.id);
  expect((await download(good)).status).toBe(200);
  const u = new URL(good);
  const sig = u.searchParams.get('sig')!;
  // A changed signature, expiry or invoice.
  await expectRefused(good.replace(`sig=${sig}`, `sig=${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`));
  await expectRefused(good.replace(/exp=(\d+)/, (_m, e) => `exp=${Number(e) + 1}`));
  await expectRefused(good.replace(a.invoice.id, b.invoice.id));
  // Signed with another key, or for another member than the invoice's.
  await expectRefused(invoicePdfLink(app.url, 'another key', shop.communityId, a.memberId, a.invoice.id));
  await expectRefused(invoicePdfLink(app.url, KEY, shop.communityId, b.memberId, a.invoice.id));
  // Another community's invoice, even for a member id that exists there.
  const other = await createShop(app);
  await expectRefused(invoicePdfLink(app.url, KEY, other.communityId, a.memberId, a.invoice.id));
  // Expired.
  await expectRefused(invoicePdfLink(app.url, KEY, shop.communityId, a.memberId, a.invoice.id, Date.now() - 401 * 86400_000));
  // A portal link's signature opens no PDF.
  await expectRefused(`${app.url}/mail/invoices/${shop.communityId}/${a.memberId}/${a.invoice.id}/pdf?${new URL(
    (await messageText(a.memberId, 'receipt')).match(/\S+\/mail\/portal\/\S+/)![0]).search.slice(1)}`);
  // The member erased: the link they were sent opens nothing any more.
  await app.owner.query('delete from billing.members where community_id = $1 and id = $2', [shop.communityId, a.memberId]);
  await expectRefused(good);
});

test('the refund notice links the invoice with its credit note', async () => {
  const { memberId, invoice } = await buy(`refund.${Date.now()}@example.test`);
  const refund = await call(app.url, 'POST', `/v1/invoices/${invoice.id}/refunds`, { key: shop.key, body: { amount_cents: 500 } });
  expect(refund.status).toBe(200);
  const text = await messageText(memberId, 'refund_issued');
  expect(text).toContain(`Credit note: ${refund.body.credit_note_number}`);
  const url = pdfLinkIn(text)!;
  expect(text).toContain(`The invoice with its credit note (PDF): ${url}`);
  const pdf = await download(url);
  expect(pdf.status).toBe(200);
  const body = await pdfText(pdf.bytes);
  expect(body).toContain(`Number: ${invoice.number}`);
  expect(body).toContain(`${refund.body.credit_note_number} of ${refund.body.created_at.slice(0, 10)}`);
  expect(body).toMatch(/Refunded\s+-5\.00 USD/);
});
