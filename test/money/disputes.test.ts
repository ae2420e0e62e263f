// A disputed invoice cannot be refunded, and shows its dispute (issue 26, item 2):
// POST /v1/invoices/{id}/refunds answers 409 conflict once the payment is disputed
// (before the provider is asked), and the invoice carries the dispute (status, amount,
// reason, opened and closed times) that Stripe's charge.dispute.* events keep current.
import { sandboxDispute } from '../../src/domain/checkout/checkout-completion';
import { call, startApp, TestApp } from '../support/app';
import { deliver, startStripeMock, StripeMock } from '../support/stripe-mock';
import { checkout, createShop, externalSubject, Shop, subscribe } from '../support/shop';

let app: TestApp;
let mock: StripeMock;
beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({}, mock.env);
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

const api = (shop: Shop, method: string, path: string, body?: unknown) => call(app.url, method, path, { key: shop.key, body });
const firstInvoice = async (shop: Shop, subscriptionId: string) =>
  (await api(shop, 'GET', `/v1/invoices?subscription_id=${subscriptionId}`)).body.data.at(-1) as { id: string; dispute: unknown };

test('a disputed sandbox invoice refuses a refund with 409 conflict and shows the open dispute', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  const inv = await firstInvoice(shop, subscriptionId);
  expect(inv.dispute).toBeNull();
  const opened = await sandboxDispute(app.owner, inv.id);
  for (const body of [{}, { amount_cents: 100 }, { revoke_access: true }]) {
    const r = await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, body);
    expect([body, r.status, r.body.code, r.headers.get('content-type')]).toEqual([body, 409, 'conflict', 'application/problem+json; charset=utf-8']);
    expect(r.body.detail).toContain('disputed');
  }
  const got = await api(shop, 'GET', `/v1/invoices/${inv.id}`);
  expect(got.body).toMatchObject({ amount_refunded_cents: 0, status: 'paid' });
  expect(got.body.dispute).toEqual({ id: opened.dispute_id, invoice_id: inv.id, amount_cents: 1500, status: 'needs_response', reason: 'sandbox',
    created_at: expect.stringMatching(/Z$/), opened_at: got.body.dispute.created_at, closed_at: null });
  const { rows } = await app.owner.query('select count(*)::int as n from billing.refunds where invoice_id = $1', [inv.id]);
  expect(rows[0].n).toBe(0);
  // The list shows it too.
  expect((await firstInvoice(shop, subscriptionId)).dispute).toEqual(got.body.dispute);
});

test('concurrent refunds and a dispute never both succeed', async () => {
  const shop = await createShop(app);
  for (let round = 0; round < 4; round++) {
    const { subscriptionId } = await subscribe(app, shop, 'silver');
    const inv = await firstInvoice(shop, subscriptionId);
    const [refund, dispute] = await Promise.all([
      api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, { amount_cents: 100 }),
      sandboxDispute(app.owner, inv.id).then(() => 'opened', (e: { code?: string }) => e.code),
    ]);
    expect(dispute).toBe('opened');
    const { rows } = await app.owner.query<{ n: number }>('select count(*)::int as n from billing.refunds where invoice_id = $1', [inv.id]);
    // Serially: refund then dispute (both, the refund came first), or dispute then a refused refund.
    expect([refund.status, rows[0].n]).toEqual(refund.status === 200 ? [200, 1] : [409, 0]);
  }
});

describe('on Stripe', () => {
  let shop: Shop;
  beforeAll(async () => { shop = await createShop(app, { type: 'stripe' }); });

  async function stripeSubscription() {
    const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
    const ref = `sub_dp_${Date.now()}_${Math.random().toString(36).slice(2, 6)}`;
    mock.subscription({ id: ref, price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id } });
    const done = mock.signedEvent('checkout.session.completed', { id: `cs_${ref}`, object: 'checkout.session', mode: 'subscription', status: 'complete',
      payment_status: 'paid', client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer: 'cus_dp' });
    expect((await deliver(app.url, shop.communityId, done)).status).toBe(200);
    const now = Math.floor(Date.now() / 1000);
    const inv = { id: `in_${ref}`, object: 'invoice', status: 'paid', currency: 'usd', subtotal: 800, total: 800, amount_paid: 800, attempt_count: 1,
      next_payment_attempt: null, billing_reason: 'subscription_create', created: now, payment_intent: `pi_${ref}`,
      period_start: now, period_end: now + 30 * 86400, status_transitions: { paid_at: now },
      parent: { subscription_details: { subscription: ref } }, lines: { data: [{ amount: 800, description: 'Silver', period: { start: 1, end: 2 } }] } };
    expect((await deliver(app.url, shop.communityId, mock.signedEvent('invoice.paid', inv))).status).toBe(200);
    const { rows } = await app.owner.query<{ inv: string }>(
      `select i.id as inv from billing.subscriptions s join billing.invoices i on i.subscription_id = s.id where s.provider_ref = $1`, [ref]);
    return { ref, invoiceId: rows[0].inv, paymentIntent: `pi_${ref}` };
  }

  test('charge.dispute.* keep the invoice\'s dispute current (won, lost, with closed_at); Stripe is never asked to refund it', async () => {
    for (const outcome of ['won', 'lost'] as const) {
      const s = await stripeSubscription();
      const dispute = { id: `du_${s.ref}`, object: 'dispute', amount: 600, status: 'needs_response', reason: 'fraudulent', payment_intent: s.paymentIntent, charge: `ch_${s.ref}` };
      expect((await deliver(app.url, shop.communityId, mock.signedEvent('charge.dispute.created', dispute))).status).toBe(200);
      const open = (await api(shop, 'GET', `/v1/invoices/${s.invoiceId}`)).body.dispute;
      expect(open).toMatchObject({ amount_cents: 600, status: 'needs_response', reason: 'fraudulent', closed_at: null });
      await deliver(app.url, shop.communityId, mock.signedEvent('charge.dispute.updated', { ...dispute, status: 'under_review' }));
      expect((await api(shop, 'GET', `/v1/invoices/${s.invoiceId}`)).body.dispute).toMatchObject({ id: open.id, status: 'under_review', closed_at: null });
      await deliver(app.url, shop.communityId, mock.signedEvent('charge.dispute.closed', { ...dispute, status: outcome }));
      const closed = (await api(shop, 'GET', `/v1/invoices/${s.invoiceId}`)).body.dispute;
      expect(closed).toMatchObject({ id: open.id, status: outcome, opened_at: open.opened_at, closed_at: expect.stringMatching(/Z$/) });
      const refundsBefore = mock.requestsTo('POST', '/v1/refunds').length;
      const r = await api(shop, 'POST', `/v1/invoices/${s.invoiceId}/refunds`, { amount_cents: 100 });
      expect([outcome, r.status, r.body.code]).toEqual([outcome, 409, 'conflict']);
      expect(mock.requestsTo('POST', '/v1/refunds')).toHaveLength(refundsBefore);
      expect((await api(shop, 'GET', `/v1/invoices/${s.invoiceId}`)).body.amount_refunded_cents).toBe(0);
    }
  });
});
