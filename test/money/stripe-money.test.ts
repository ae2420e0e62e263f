// Money on Stripe, through the real SDK's webhook signing against the local mock:
// invoice.* events are mirrored into invoices (lines add up, paid once, older or
// repeated events harmless), a failed renewal keeps access while Stripe still plans a
// retry and ends it when none is left, and unpaid never entitles.
import { call, startApp, TestApp } from '../support/app';
import { deliver, startStripeMock, StripeMock } from '../support/stripe-mock';
import { checkout, createShop, externalSubject, Shop } from '../support/shop';

let mock: StripeMock;
let app: TestApp;
let shop: Shop;

beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({}, mock.env);
  shop = await createShop(app, { type: 'stripe' });
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

const now = () => Math.floor(Date.now() / 1000);
let seq = 0;

async function stripeSubscribe(opts: { completeFirst?: boolean } = {}) {
  const subject = externalSubject('stripe-money');
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
  expect(link.status).toBe(200);
  const ref = `sub_money_${++seq}_${Date.now()}`;
  mock.subscription({ id: ref, customer: `cus_m${seq}`, price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id } });
  if (opts.completeFirst !== false) {
    const completed = mock.signedEvent('checkout.session.completed', {
      id: `cs_test_m${seq}`, object: 'checkout.session', mode: 'subscription', status: 'complete', payment_status: 'paid',
      client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer: `cus_m${seq}`,
    });
    expect((await deliver(app.url, shop.communityId, completed)).status).toBe(200);
  }
  return { ref, checkoutId: link.body.checkout_id as string, subject: subject.external };
}

function stripeInvoice(id: string, subRef: string, o: { status: string; total?: number; subtotal?: number; attempt?: number; next?: number | null;
  reason?: string; checkoutId?: string }) {
  const start = now() - 60;
  return {
    id, object: 'invoice', status: o.status, currency: 'usd', subtotal: o.subtotal ?? 800, total: o.total ?? 800,
    amount_paid: o.status === 'paid' ? o.total ?? 800 : 0, attempt_count: o.attempt ?? 1, next_payment_attempt: o.next ?? null,
    billing_reason: o.reason ?? 'subscription_cycle', created: start, period_start: start, period_end: start + 30 * 86400,
    status_transitions: { paid_at: o.status === 'paid' ? now() : null },
    parent: { type: 'subscription_details', subscription_details: { subscription: subRef, metadata: o.checkoutId ? { checkout_id: o.checkoutId } : {} } },
    lines: { object: 'list', data: [{ id: `il_${id}`, amount: o.subtotal ?? 800, description: '1 × Silver (at $8.00 / month)',
      period: { start, end: start + 30 * 86400 }, parent: { subscription_item_details: { proration: false } } }] },
  };
}

async function send(type: string, object: Record<string, unknown>, created = now()) {
  const event = mock.signedEvent(type, object, { created });
  const r = await deliver(app.url, shop.communityId, event);
  expect(r.status).toBe(200);
  return { event, body: r.body };
}

async function invoiceRow(providerRef: string) {
  const { rows } = await app.owner.query(`select billing.invoice_json(i) as j from billing.invoices i where provider_ref = $1`, [providerRef]);
  return rows[0]?.j;
}

async function entitled(subject: { namespace: string; external_user_id: string }) {
  const r = await call(app.url, 'GET', `/v1/entitlements/check?namespace=${subject.namespace}&external_user_id=${subject.external_user_id}`, { key: shop.key });
  return r.body.entitled as boolean;
}

test('invoice.paid is mirrored as a paid invoice whose lines add up (a Stripe discount becomes a discount line)', async () => {
  const { ref } = await stripeSubscribe();
  const inv = `in_paid_${seq}`;
  await send('invoice.paid', stripeInvoice(inv, ref, { status: 'paid', subtotal: 800, total: 720, reason: 'subscription_create' }));
  const row = await invoiceRow(inv);
  expect(row).toMatchObject({ status: 'paid', billing_reason: 'subscription_create', subtotal_cents: 800, discount_cents: 80,
    total_cents: 720, amount_paid_cents: 720 });
  expect(row.lines.map((l: { type: string; amount_cents: number }) => [l.type, l.amount_cents])).toEqual([['plan', 800], ['discount', -80]]);
  // The same event again, and an older failure afterwards, change nothing.
  await send('invoice.paid', stripeInvoice(inv, ref, { status: 'paid', subtotal: 800, total: 720 }));
  await send('invoice.payment_failed', stripeInvoice(inv, ref, { status: 'open', subtotal: 800, total: 720, next: now() + 86400 }), now() - 3600);
  expect(await invoiceRow(inv)).toMatchObject({ status: 'paid', attempt_count: 1, next_attempt_at: null });
  const { rows } = await app.owner.query(`select count(*)::int as n from billing.payment_attempts a join billing.invoices i
    on i.community_id = a.community_id and i.id = a.invoice_id where i.provider_ref = $1 and a.status = 'succeeded'`, [inv]);
  expect(rows[0].n).toBe(1);
});

test('a failed renewal keeps access while Stripe plans a retry, and ends it when none is left', async () => {
  const { ref, subject } = await stripeSubscribe();
  expect(await entitled(subject)).toBe(true);
  const inv = `in_fail_${seq}`;
  await send('invoice.payment_failed', stripeInvoice(inv, ref, { status: 'open', attempt: 1, next: now() + 3 * 86400 }));
  await send('customer.subscription.updated', mock.subscription({ id: ref, price: 'price_silver_m', status: 'past_due' }));
  expect(await invoiceRow(inv)).toMatchObject({ status: 'open', attempt_count: 1 });
  expect(await entitled(subject)).toBe(true);
  await send('invoice.payment_failed', stripeInvoice(inv, ref, { status: 'open', attempt: 4, next: null }), now() + 1);
  expect(await invoiceRow(inv)).toMatchObject({ status: 'open', attempt_count: 2, next_attempt_at: null });
  expect(await entitled(subject)).toBe(false);
  const { rows } = await app.owner.query(`select data->>'reason' as reason from billing.events where community_id = $1
    and type = 'member.entitlement.revoked' order by id desc limit 1`, [shop.communityId]);
  expect(rows[0].reason).toBe('payment_failed');
  // A later successful retry restores it.
  await send('invoice.paid', stripeInvoice(inv, ref, { status: 'paid', attempt: 5 }), now() + 2);
  await send('customer.subscription.updated', mock.subscription({ id: ref, price: 'price_silver_m', status: 'active' }), now() + 3);
  expect(await entitled(subject)).toBe(true);
});

test('an unpaid Stripe subscription never entitles, even with a retry still recorded', async () => {
  const { ref, subject } = await stripeSubscribe();
  const inv = `in_unpaid_${seq}`;
  await send('invoice.payment_failed', stripeInvoice(inv, ref, { status: 'open', attempt: 1, next: now() + 86400 }));
  await send('customer.subscription.updated', mock.subscription({ id: ref, price: 'price_silver_m', status: 'past_due' }));
  expect(await entitled(subject)).toBe(true);
  await send('customer.subscription.updated', mock.subscription({ id: ref, price: 'price_silver_m', status: 'unpaid' }), now() + 1);
  expect(await entitled(subject)).toBe(false);
});

test('an invoice that arrives before checkout.session.completed completes the checkout first', async () => {
  const { ref, checkoutId, subject } = await stripeSubscribe({ completeFirst: false });
  const inv = `in_early_${seq}`;
  await send('invoice.paid', stripeInvoice(inv, ref, { status: 'paid', reason: 'subscription_create', checkoutId }));
  expect(await invoiceRow(inv)).toMatchObject({ status: 'paid', total_cents: 800 });
  expect(await entitled(subject)).toBe(true);
  const { rows } = await app.owner.query(`select status from billing.checkout_sessions where id = $1`, [checkoutId]);
  expect(rows[0].status).toBe('completed');
});
