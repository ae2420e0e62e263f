// The Stripe adapter against a local Stripe-compatible server (test/support/stripe-mock.ts):
// checkout sessions, inbound webhooks (signature, exactly once, any order), and the
// provider calls of cancel, reactivate, switch and the portal.
import net from 'node:net';
import { call, startApp, TestApp } from '../support/app';
import { deliver, startStripeMock, StripeMock, unflatten } from '../support/stripe-mock';
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
let subSeq = 0;

/** A Stripe checkout paid through checkout.session.completed: returns our ids. */
async function stripeSubscribe(tierKey = 'silver', planKey?: string) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers[tierKey], ...(planKey ? { plan_id: shop.ids.plans[planKey] } : {}), subject: externalSubject() });
  expect(link.status).toBe(200);
  const ref = `sub_stripe_${++subSeq}_${Date.now()}`;
  const customer = `cus_${subSeq}`;
  const price = planKey === 'gold-monthly' ? 'price_gold_m' : 'price_silver_m';
  mock.subscription({ id: ref, customer, price, metadata: { checkout_id: link.body.checkout_id } });
  const completed = mock.signedEvent('checkout.session.completed', {
    id: `cs_test_${subSeq}`, object: 'checkout.session', mode: 'subscription', status: 'complete', payment_status: 'paid',
    client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer,
  });
  expect((await deliver(app.url, shop.communityId, completed)).status).toBe(200);
  const { rows } = await app.owner.query<{ id: string }>('select id from billing.subscriptions where provider_ref = $1', [ref]);
  return { link: link.body, ref, customer, subscriptionId: rows[0].id };
}

test('a checkout link creates a Stripe Checkout Session (subscription mode, reference, metadata, trial)', async () => {
  const before = mock.requests.length;
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject(), return_url: 'https://shop.example/done' });
  expect(r.status).toBe(200);
  expect(r.body.url).toMatch(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/);
  const req = mock.requests.slice(before).find((q) => q.path === '/v1/checkout/sessions')!;
  const form = unflatten(req.form) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(form.mode).toBe('subscription');
  expect(form.client_reference_id).toBe(r.body.checkout_id);
  expect(form.line_items[0]).toEqual({ price: 'price_gold_y', quantity: '1' });
  expect(form.subscription_data).toEqual({ metadata: expect.objectContaining({ checkout_id: r.body.checkout_id }), trial_period_days: '7' });
  expect(new URL(form.success_url).searchParams.get('checkout_id')).toBe(r.body.checkout_id);
  expect(req.idempotencyKey).toBe(`checkout-${r.body.checkout_id}`);
  expect(Math.abs(new Date(r.body.expires_at).getTime() - Date.now() - 86400e3)).toBeLessThan(60e3);
  const { rows } = await app.owner.query('select provider_ref from billing.checkout_sessions where id = $1', [r.body.checkout_id]);
  expect(rows[0].provider_ref).toMatch(/^cs_test_/);
});

test('a discount becomes a Stripe coupon, and a one-time tier uses payment mode', async () => {
  const before = mock.requests.length;
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(), discount_code: 'welcome10' });
  expect(r.status).toBe(200);
  const coupon = mock.requests.slice(before).find((q) => q.path === '/v1/coupons')!;
  expect(coupon.form).toMatchObject({ percent_off: '10', duration: 'once' });
  const session = mock.requests.slice(before).find((q) => q.path === '/v1/checkout/sessions')!;
  expect(session.form['discounts[0][coupon]']).toMatch(/^co_mock/);
  const once = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject() });
  const pay = mock.requests.filter((q) => q.path === '/v1/checkout/sessions').at(-1)!;
  expect(once.status).toBe(200);
  expect(pay.form.mode).toBe('payment');
  expect(pay.form['line_items[0][price_data][unit_amount]']).toBe('900');
});

test('a bad signature is refused and applies nothing', async () => {
  const event = mock.signedEvent('checkout.session.completed', { id: 'cs_x', object: 'checkout.session', metadata: { checkout_id: 'cs_nope' } });
  const r = await deliver(app.url, shop.communityId, event, 't=1,v1=deadbeef');
  expect(r.status).toBe(400);
  const { rows } = await app.owner.query('select count(*)::int as n from billing.provider_events where event_id = $1', [event.id]);
  expect(rows[0].n).toBe(0);
});

test('checkout.session.completed creates the subscription once, however often it is delivered', async () => {
  const { subscriptionId, ref, link } = await stripeSubscribe();
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body).toMatchObject({ status: 'active', member_id: link.member_id, plan_id: shop.ids.plans['silver-monthly'] });
  const again = mock.signedEvent('checkout.session.completed', { id: 'cs_again', object: 'checkout.session', mode: 'subscription',
    payment_status: 'paid', metadata: { checkout_id: link.checkout_id }, subscription: ref, customer: 'cus_x' });
  await deliver(app.url, shop.communityId, again);
  const dup = await deliver(app.url, shop.communityId, again);
  expect(dup.body).toMatchObject({ duplicate: true });
  const { rows } = await app.owner.query('select count(*)::int as n from billing.subscriptions where member_id = $1', [link.member_id]);
  expect(rows[0].n).toBe(1);
  const ents = await call(app.url, 'GET', `/v1/members/${link.member_id}/entitlements`, { key: shop.key });
  expect(ents.body.data.map((e: { key: string }) => e.key)).toEqual(['member-chat']);
});

test('subscription events apply in any order: an older state never overwrites a newer one', async () => {
  const { subscriptionId, ref } = await stripeSubscribe();
  const t = now();
  const cancelling = mock.signedEvent('customer.subscription.updated', { ...mock.subscriptions.get(ref)!, cancel_at_period_end: true }, { created: t + 20 });
  const stale = mock.signedEvent('customer.subscription.updated', { ...mock.subscriptions.get(ref)!, cancel_at_period_end: false }, { created: t + 10 });
  expect((await deliver(app.url, shop.communityId, cancelling)).status).toBe(200);
  expect((await deliver(app.url, shop.communityId, stale)).status).toBe(200);
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body.status).toBe('cancelling');
  const deleted = mock.signedEvent('customer.subscription.deleted', { ...mock.subscriptions.get(ref)!, status: 'canceled', ended_at: t + 30 }, { created: t + 30 });
  await deliver(app.url, shop.communityId, deleted);
  expect((await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key })).body.status).toBe('cancelled');
});

test('a subscription event before checkout.session.completed creates the subscription, and the completion adds nothing', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const ref = `sub_early_${Date.now()}`;
  const obj = mock.subscription({ id: ref, customer: 'cus_early', price: 'price_silver_m', status: 'trialing', trialEnd: now() + 3 * 86400,
    metadata: { checkout_id: link.body.checkout_id } });
  await deliver(app.url, shop.communityId, mock.signedEvent('customer.subscription.created', obj));
  await deliver(app.url, shop.communityId, mock.signedEvent('checkout.session.completed', { id: 'cs_early', object: 'checkout.session',
    mode: 'subscription', payment_status: 'paid', metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer: 'cus_early' }));
  const subs = await call(app.url, 'GET', `/v1/subscriptions?member_id=${link.body.member_id}`, { key: shop.key });
  expect(subs.body.data).toHaveLength(1);
  expect(subs.body.data[0].status).toBe('trialing');
});

test('cancel calls Stripe once (cancel_at_period_end); reactivate undoes it', async () => {
  const { subscriptionId, ref } = await stripeSubscribe();
  const cancel = () => call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key });
  expect((await cancel()).status).toBe(202);
  expect((await cancel()).status).toBe(202);
  const calls = mock.requestsTo('POST', `/v1/subscriptions/${ref}`);
  expect(calls.map((c) => c.form)).toEqual([{ cancel_at_period_end: 'true' }]);
  const re = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/reactivate`, { key: shop.key });
  expect(re.status).toBe(200);
  expect(mock.requestsTo('POST', `/v1/subscriptions/${ref}`).at(-1)!.form).toEqual({ cancel_at_period_end: 'false' });
});

test('switches: an upgrade updates the item, invoicing the proration at once (pending if unpaid); a downgrade goes through a subscription schedule', async () => {
  const { subscriptionId, ref } = await stripeSubscribe();
  const up = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['gold-monthly'] } });
  expect(up.status).toBe(200);
  expect(mock.requestsTo('POST', `/v1/subscriptions/${ref}`).at(-1)!.form).toEqual({
    'items[0][id]': `si_${ref}`, 'items[0][price]': 'price_gold_m', proration_behavior: 'always_invoice',
    payment_behavior: 'pending_if_incomplete' });
  const down = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['silver-monthly'] } });
  expect(down.status).toBe(200);
  expect(down.body.scheduled_plan_id).toBe(shop.ids.plans['silver-monthly']);
  const created = mock.requestsTo('POST', '/v1/subscription_schedules').find((q) => q.form.from_subscription === ref)!;
  expect(created).toBeTruthy();
  const update = mock.requestsTo('POST', '/v1/subscription_schedules/').at(-1)!;
  expect(update.form).toMatchObject({ end_behavior: 'release', 'phases[0][items][0][price]': 'price_gold_m', 'phases[1][items][0][price]': 'price_silver_m' });
  const undo = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel-scheduled-switch`, { key: shop.key });
  expect(undo.status).toBe(200);
  expect(mock.requestsTo('POST', '/v1/subscription_schedules/').at(-1)!.path).toMatch(/\/release$/);
});

test('a change Stripe refuses answers 409 conflict and leaves the subscription unchanged', async () => {
  const { subscriptionId, ref } = await stripeSubscribe();
  mock.subscriptions.delete(ref);
  const r = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key });
  expect(r.status).toBe(409);
  expect(r.body.code).toBe('conflict');
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body.status).toBe('active');
});

test('the portal is a Stripe Billing Portal session for the member\'s customer', async () => {
  const { link, customer } = await stripeSubscribe();
  const r = await call(app.url, 'POST', `/v1/members/${link.member_id}/portal-sessions`, { key: shop.key, body: { return_url: 'https://shop.example/me' } });
  expect(r.status).toBe(200);
  expect(r.body.url).toMatch(/^https:\/\/billing\.stripe\.test\/p\/session\//);
  expect(mock.requestsTo('POST', '/v1/billing_portal/sessions').at(-1)!.form).toEqual({ customer, return_url: 'https://shop.example/me' });
});

test('Stripe unreachable answers 503 and records no checkout', async () => {
  // A port that takes connections and drops each at once, held for the whole test: a
  // closed mock's port could be taken meanwhile by another file's server, whose answer
  // (a 404 page) is no outage (a 500 here once, in CI).
  const dropper = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => dropper.listen(0, '127.0.0.1', resolve));
  const port = (dropper.address() as net.AddressInfo).port;
  const down = await startApp({}, { ...mock.env, STRIPE_API_PORT: String(port) });
  try {
    const s = await createShop(down, { type: 'stripe' });
    const subject = externalSubject();
    const r = await call(down.url, 'POST', '/v1/checkout-links', { key: s.key, body: { tier_id: s.ids.tiers.silver, subject } });
    expect(r.status).toBe(503);
    expect(r.body.code).toBe('service_unavailable');
    const { rows } = await down.owner.query('select count(*)::int as n from billing.checkout_sessions where community_id = $1', [s.communityId]);
    expect(rows[0].n).toBe(0);
  } finally {
    await down.close();
    await new Promise((resolve) => dropper.close(resolve));
  }
});

test('checkout.session.expired expires the checkout and releases its discount hold', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(), discount_code: 'WELCOME10' });
  await deliver(app.url, shop.communityId, mock.signedEvent('checkout.session.expired', { id: 'cs_exp', object: 'checkout.session',
    status: 'expired', client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id } }));
  const { rows } = await app.owner.query(`select cs.status, r.status as hold from billing.checkout_sessions cs
    join billing.discount_redemptions r on r.checkout_id = cs.id where cs.id = $1`, [link.body.checkout_id]);
  expect(rows[0]).toEqual({ status: 'expired', hold: 'released' });
});

test('a one-time payment completes a purchase; a full refund (charge.refunded) ends its access', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject() });
  await deliver(app.url, shop.communityId, mock.signedEvent('checkout.session.completed', { id: 'cs_pay', object: 'checkout.session', mode: 'payment',
    status: 'complete', payment_status: 'paid', metadata: { checkout_id: link.body.checkout_id }, payment_intent: 'pi_guide_1', customer: 'cus_g' }));
  const granted = await call(app.url, 'GET', `/v1/members/${link.body.member_id}/entitlements`, { key: shop.key });
  expect(granted.body.data.map((e: { key: string }) => e.key)).toEqual(['vip-chat']);
  await deliver(app.url, shop.communityId, mock.signedEvent('charge.refunded', { id: 'ch_1', object: 'charge', payment_intent: 'pi_guide_1', refunded: true }));
  const { rows } = await app.owner.query('select status from billing.purchases where provider_ref = $1', ['pi_guide_1']);
  expect(rows[0].status).toBe('refunded');
  const revoked = await call(app.url, 'GET', `/v1/members/${link.body.member_id}/entitlements`, { key: shop.key });
  expect(revoked.body.data).toEqual([]);
});

test('a scheduled downgrade is done when Stripe reports the new price', async () => {
  const { subscriptionId, ref } = await stripeSubscribe('gold', 'gold-monthly');
  const down = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['silver-monthly'] } });
  expect(down.body.scheduled_plan_id).toBe(shop.ids.plans['silver-monthly']);
  const obj = mock.subscriptions.get(ref)!;
  const items = { object: 'list', data: [{ ...(obj.items as { data: Record<string, unknown>[] }).data[0], price: { id: 'price_silver_m', object: 'price' } }] };
  await deliver(app.url, shop.communityId, mock.signedEvent('customer.subscription.updated', { ...obj, items }, { created: now() + 40 * 86400 }));
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body).toMatchObject({ plan_id: shop.ids.plans['silver-monthly'], scheduled_plan_id: null, scheduled_at: null });
});

test('a link\'s customer_email prefills Stripe Checkout; the session\'s customer email becomes the member\'s (issue 30)', async () => {
  const before = mock.requests.length;
  const given = `Given.${Date.now()}@Example.test`;
  const prefilled = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject(), customer_email: given });
  expect(prefilled.status).toBe(200);
  expect(mock.requests.slice(before).find((q) => q.path === '/v1/checkout/sessions')!.form.customer_email).toBe(given);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const ref = `sub_stripe_mail_${Date.now()}`;
  mock.subscription({ id: ref, customer: 'cus_mail', price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id } });
  const email = `Stripe.Buyer.${Date.now()}@Example.test`;
  const completed = mock.signedEvent('checkout.session.completed', {
    id: `cs_test_mail_${Date.now()}`, object: 'checkout.session', mode: 'subscription', status: 'complete', payment_status: 'paid',
    client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer: 'cus_mail',
    customer_details: { email, name: null, address: null, phone: null, tax_exempt: 'none', tax_ids: [] },
  });
  expect((await deliver(app.url, shop.communityId, completed)).status).toBe(200);
  const member = await call(app.url, 'GET', `/v1/members/${link.body.member_id}`, { key: shop.key });
  expect(member.body.email).toBe(email);
});
