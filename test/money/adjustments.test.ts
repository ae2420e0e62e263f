// Refunds, disputes, grants (comps), pause and resume, immediate cancel (issue 12):
// through HTTP and the CLI on the sandbox, and on Stripe through the real SDK against
// the local mock with signed events.
import { cli } from '../support/cli';
import { createKey } from '../../src/domain/communities/community-admin';
import { call, startApp, TestApp, TEST_DB } from '../support/app';
import { deliver, startStripeMock, StripeMock, unflatten } from '../support/stripe-mock';
import { advance, checkout, createShop, events, externalSubject, pay, Shop, subscribe } from '../support/shop';

let app: TestApp;
let mock: StripeMock;
beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({}, mock.env);
  process.env.DATABASE_URL = TEST_DB();
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

const api = (shop: Shop, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  call(app.url, method, path, { key: shop.key, body, headers });

async function entitled(shop: Shop, memberId: string): Promise<string[]> {
  const r = await api(shop, 'GET', `/v1/members/${memberId}/entitlements`);
  return r.body.data.map((e: { key: string }) => e.key).sort();
}

async function invoicesOf(shop: Shop, subscriptionId: string) {
  return (await api(shop, 'GET', `/v1/invoices?subscription_id=${subscriptionId}`)).body.data as { id: string; status: string; total_cents: number; amount_refunded_cents: number }[];
}


async function lastRevokeReason(shop: Shop): Promise<string> {
  const revoked = await events(app.owner, shop.communityId, 'member.entitlement.revoked');
  return String(revoked.at(-1)?.data.reason);
}

describe('refunds', () => {
  test('a partial refund, then the rest; never more than was paid; idempotent with a key', async () => {
    const shop = await createShop(app);
    const { subscriptionId, memberId } = await subscribe(app, shop, 'gold', 'gold-monthly');
    const [inv] = await invoicesOf(shop, subscriptionId);
    const part = await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, { amount_cents: 500 }, { 'idempotency-key': 'r-1' });
    expect(part.status).toBe(200);
    expect(part.body).toMatchObject({ id: expect.stringMatching(/^re_/), amount_cents: 500, revoke_access: false, invoice: { amount_refunded_cents: 500, status: 'paid' } });
    const again = await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, { amount_cents: 500 }, { 'idempotency-key': 'r-1' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.id).toBe(part.body.id);
    const over = await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, { amount_cents: 1001 });
    expect(over.status).toBe(422);
    expect(over.body.code).toBe('invalid_request');
    const rest = await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, {});
    expect(rest.body).toMatchObject({ amount_cents: 1000, invoice: { amount_refunded_cents: 1500 } });
    expect((await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, {})).status).toBe(409);
    // Without revoke_access the member keeps access.
    expect(await entitled(shop, memberId)).toEqual(['member-chat', 'vip-chat']);
    expect((await events(app.owner, shop.communityId, 'invoice.refunded')).map((e) => (e.data.refund as { amount_cents: number }).amount_cents)).toEqual([500, 1000]);
    await expect(app.owner.query(`update billing.invoices set amount_refunded_cents = 1600 where id = $1`, [inv.id])).rejects.toThrow(/invoices_refund_at_most_paid/);
  });

  test('revoke_access ends the subscription at once and revokes with reason refunded; a purchase too', async () => {
    const shop = await createShop(app);
    const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
    const [inv] = await invoicesOf(shop, subscriptionId);
    const r = await api(shop, 'POST', `/v1/invoices/${inv.id}/refunds`, { revoke_access: true });
    expect(r.status).toBe(200);
    expect((await api(shop, 'GET', `/v1/subscriptions/${subscriptionId}`)).body.status).toBe('cancelled');
    expect(await entitled(shop, memberId)).toEqual([]);
    expect(await lastRevokeReason(shop)).toBe('refunded');
    const link = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject() });
    await pay(link.body.url);
    const invs = (await api(shop, 'GET', `/v1/invoices?member_id=${link.body.member_id}`)).body.data;
    await api(shop, 'POST', `/v1/invoices/${invs[0].id}/refunds`, { revoke_access: true });
    expect((await api(shop, 'GET', `/v1/purchases/${invs[0].purchase_id}`)).body.status).toBe('refunded');
    expect(await entitled(shop, link.body.member_id)).toEqual([]);
  });

  test('refunds need invoices:write', async () => {
    const shop = await createShop(app);
    const { subscriptionId } = await subscribe(app, shop, 'silver');
    const [inv] = await invoicesOf(shop, subscriptionId);
    const readOnly = await createKey(app.owner, shop.communityId, ['invoices:read']);
    const r = await call(app.url, 'POST', `/v1/invoices/${inv.id}/refunds`, { key: readOnly.key, body: {} });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('missing_scope');
  });
});

describe('disputes', () => {
  test('billing sandbox dispute revokes the covered access at once (reason disputed)', async () => {
    const shop = await createShop(app);
    const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
    const [inv] = await invoicesOf(shop, subscriptionId);
    const r = await cli('sandbox', 'dispute', '--invoice', inv.id, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ invoice_id: inv.id, dispute_id: expect.stringMatching(/^dp_/), status: 'needs_response' });
    expect((await api(shop, 'GET', `/v1/subscriptions/${subscriptionId}`)).body.status).toBe('cancelled');
    expect(await entitled(shop, memberId)).toEqual([]);
    expect(await lastRevokeReason(shop)).toBe('disputed');
    expect(await events(app.owner, shop.communityId, 'invoice.disputed')).toHaveLength(1);
  });
});

describe('grants (comps)', () => {
  test('a grant is a ledger source: granted, revoked, expiring by the clock; listed per member', async () => {
    const shop = await createShop(app);
    const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
    const memberId = link.body.member_id;
    const g = await api(shop, 'POST', `/v1/members/${memberId}/grants`, { tier_id: shop.ids.tiers.gold, note: 'community helper' });
    expect(g.status).toBe(200);
    expect(g.body).toMatchObject({ id: expect.stringMatching(/^grt_/), status: 'active', tier_id: shop.ids.tiers.gold, expires_at: null });
    expect(await entitled(shop, memberId)).toEqual(['member-chat', 'vip-chat']);
    const ents = await api(shop, 'GET', `/v1/members/${memberId}/entitlements`);
    expect(ents.body.data[0].sources).toEqual([expect.objectContaining({ type: 'grant', id: g.body.id, plan_id: null })]);
    const granted = await events(app.owner, shop.communityId, 'member.entitlement.granted');
    expect(granted.map((e) => e.data.reason)).toEqual(['grant_created', 'grant_created']);
    const del = await api(shop, 'DELETE', `/v1/members/${memberId}/grants/${g.body.id}`);
    expect(del.body.status).toBe('revoked');
    expect(await entitled(shop, memberId)).toEqual([]);
    expect(await lastRevokeReason(shop)).toBe('grant_revoked');
    // One that expires by the community's clock.
    const expires = new Date(Date.parse((await app.owner.query('select billing.community_now($1) as t', [shop.communityId])).rows[0].t) + 3 * 86400e3).toISOString();
    const timed = await api(shop, 'POST', `/v1/members/${memberId}/grants`, { tier_id: shop.ids.tiers.silver, expires_at: expires });
    expect(timed.status).toBe(200);
    expect(await entitled(shop, memberId)).toEqual(['member-chat']);
    await advance(app, shop, 4);
    expect(await entitled(shop, memberId)).toEqual([]);
    const list = await api(shop, 'GET', `/v1/members/${memberId}/grants`);
    expect(list.body.data.map((x: { status: string }) => x.status)).toEqual(['expired', 'revoked']);
    expect((await api(shop, 'POST', `/v1/members/${memberId}/grants`, { tier_id: 'tier_nope' })).status).toBe(422);
    expect((await api(shop, 'POST', '/v1/members/mem_00000000000000000000000000/grants', { tier_id: shop.ids.tiers.gold })).status).toBe(404);
  });
});

describe('pause and resume', () => {
  test('pause keeps access until the paid period ends and writes no invoices; resume by the clock restarts the period with an invoice', async () => {
    const shop = await createShop(app);
    const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
    const now = Date.parse((await app.owner.query('select billing.community_now($1) as t', [shop.communityId])).rows[0].t);
    const resumesAt = new Date(now + 45 * 86400e3).toISOString();
    const p = await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/pause`, { resumes_at: resumesAt });
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ status: 'paused', paused_until: resumesAt });
    // The month already paid is kept (issue 26): access until its end, then none.
    expect(await entitled(shop, memberId)).toEqual(['member-chat']);
    await advance(app, shop, 40); // past the old period end: no invoice while paused
    expect(await entitled(shop, memberId)).toEqual([]);
    expect(await lastRevokeReason(shop)).toBe('access_expired');
    expect(await invoicesOf(shop, subscriptionId)).toHaveLength(1);
    await advance(app, shop, 6);
    const sub = (await api(shop, 'GET', `/v1/subscriptions/${subscriptionId}`)).body;
    expect(sub).toMatchObject({ status: 'active', paused_until: null });
    expect(Date.parse(sub.current_period_end)).toBeGreaterThan(Date.parse(resumesAt) + 27 * 86400e3);
    const invs = await invoicesOf(shop, subscriptionId);
    expect(invs).toHaveLength(2);
    expect(invs[0]).toMatchObject({ status: 'paid', total_cents: 800 });
    expect(await entitled(shop, memberId)).toEqual(['member-chat']);
  });

  test('resume on request; pause from cancelled is 409; cancel {"at": "now"} ends it at once', async () => {
    const shop = await createShop(app);
    const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
    await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/pause`, {});
    expect((await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/resume`)).body.status).toBe('active');
    expect((await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/resume`)).status).toBe(409);
    expect(await entitled(shop, memberId)).toEqual(['member-chat']);
    const now = await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { at: 'now' });
    expect(now.status).toBe(202);
    expect(now.body).toEqual({ status: 'cancelled' });
    expect(await entitled(shop, memberId)).toEqual([]);
    expect((await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/pause`, {})).status).toBe(409);
    expect((await api(shop, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { at: 'later' })).status).toBe(422);
  });
});

describe('on Stripe', () => {
  let shop: Shop;
  beforeAll(async () => { shop = await createShop(app, { type: 'stripe' }); });

  async function stripeSubscription() {
    const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
    const ref = `sub_adj_${Date.now()}_${Math.random().toString(36).slice(2, 6)}`;
    mock.subscription({ id: ref, price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id } });
    const done = mock.signedEvent('checkout.session.completed', { id: `cs_${ref}`, object: 'checkout.session', mode: 'subscription', status: 'complete',
      payment_status: 'paid', client_reference_id: link.body.checkout_id, metadata: { checkout_id: link.body.checkout_id }, subscription: ref, customer: 'cus_adj' });
    expect((await deliver(app.url, shop.communityId, done)).status).toBe(200);
    const inv = { id: `in_${ref}`, object: 'invoice', status: 'paid', currency: 'usd', subtotal: 800, total: 800, amount_paid: 800, attempt_count: 1,
      next_payment_attempt: null, billing_reason: 'subscription_create', created: Math.floor(Date.now() / 1000), payment_intent: `pi_${ref}`,
      period_start: Math.floor(Date.now() / 1000), period_end: Math.floor(Date.now() / 1000) + 30 * 86400, status_transitions: { paid_at: Math.floor(Date.now() / 1000) },
      parent: { subscription_details: { subscription: ref } }, lines: { data: [{ amount: 800, description: 'Silver', period: { start: 1, end: 2 } }] } };
    expect((await deliver(app.url, shop.communityId, mock.signedEvent('invoice.paid', inv))).status).toBe(200);
    const { rows } = await app.owner.query<{ id: string; member_id: string; inv: string }>(
      `select s.id, s.member_id, i.id as inv from billing.subscriptions s join billing.invoices i on i.subscription_id = s.id where s.provider_ref = $1`, [ref]);
    return { ref, subscriptionId: rows[0].id, memberId: rows[0].member_id, invoiceId: rows[0].inv, paymentIntent: `pi_${ref}` };
  }

  test('a refund through the API calls Stripe refunds.create; the charge.refunded that follows is not counted twice', async () => {
    const s = await stripeSubscription();
    const r = await api(shop, 'POST', `/v1/invoices/${s.invoiceId}/refunds`, { amount_cents: 300 });
    expect(r.status).toBe(200);
    const created = mock.requestsTo('POST', '/v1/refunds').at(-1)!;
    expect(unflatten(created.form)).toMatchObject({ payment_intent: s.paymentIntent, amount: '300' });
    const refundId = mock.refunds.at(-1)!.id as string;
    const charge = { id: `ch_${s.ref}`, object: 'charge', payment_intent: s.paymentIntent, refunded: false, amount_refunded: 300,
      refunds: { data: [{ id: refundId, amount: 300, status: 'succeeded' }] } };
    expect((await deliver(app.url, shop.communityId, mock.signedEvent('charge.refunded', charge))).status).toBe(200);
    expect((await api(shop, 'GET', `/v1/invoices/${s.invoiceId}`)).body.amount_refunded_cents).toBe(300);
    // A refund made in Stripe's dashboard shows up the same way.
    const dash = { ...charge, amount_refunded: 500, refunds: { data: [{ id: refundId, amount: 300, status: 'succeeded' }, { id: 're_dashboard_1', amount: 200, status: 'succeeded' }] } };
    expect((await deliver(app.url, shop.communityId, mock.signedEvent('charge.refunded', dash))).status).toBe(200);
    expect((await deliver(app.url, shop.communityId, mock.signedEvent('refund.updated', { id: 're_dashboard_1', object: 'refund', amount: 200, status: 'succeeded', payment_intent: s.paymentIntent }))).status).toBe(200);
    expect((await api(shop, 'GET', `/v1/invoices/${s.invoiceId}`)).body.amount_refunded_cents).toBe(500);
  });

  test('charge.dispute.created revokes at once; repeated and later dispute events are harmless', async () => {
    const s = await stripeSubscription();
    expect(await entitled(shop, s.memberId)).toEqual(['member-chat']);
    const dispute = { id: `du_${s.ref}`, object: 'dispute', amount: 800, status: 'needs_response', reason: 'fraudulent', payment_intent: s.paymentIntent, charge: `ch_${s.ref}` };
    for (let i = 0; i < 2; i++) expect((await deliver(app.url, shop.communityId, mock.signedEvent('charge.dispute.created', dispute))).status).toBe(200);
    expect(await entitled(shop, s.memberId)).toEqual([]);
    expect(await lastRevokeReason(shop)).toBe('disputed');
    await deliver(app.url, shop.communityId, mock.signedEvent('charge.dispute.closed', { ...dispute, status: 'won' }));
    const { rows } = await app.owner.query(`select status from billing.disputes where provider_ref = $1`, [dispute.id]);
    expect(rows).toEqual([{ status: 'won' }]);
    expect(await entitled(shop, s.memberId)).toEqual([]); // a won dispute restores nothing by itself
  });

  test('pause sends pause_collection; Stripe reporting it keeps the subscription paused; cancel now calls subscriptions.cancel', async () => {
    const s = await stripeSubscription();
    const p = await api(shop, 'POST', `/v1/subscriptions/${s.subscriptionId}/pause`, {});
    expect(p.status).toBe(200);
    expect(unflatten(mock.requestsTo('POST', `/v1/subscriptions/${s.ref}`).at(-1)!.form)).toMatchObject({ pause_collection: { behavior: 'void' } });
    const reported = { ...mock.subscriptions.get(s.ref)!, pause_collection: { behavior: 'void', resumes_at: null } };
    await deliver(app.url, shop.communityId, mock.signedEvent('customer.subscription.updated', reported));
    expect((await api(shop, 'GET', `/v1/subscriptions/${s.subscriptionId}`)).body.status).toBe('paused');
    expect(await entitled(shop, s.memberId)).toEqual(['member-chat']); // the period paid is kept (issue 26)
    await api(shop, 'POST', `/v1/subscriptions/${s.subscriptionId}/resume`);
    expect(mock.requestsTo('POST', `/v1/subscriptions/${s.ref}`).at(-1)!.form).toEqual({ pause_collection: '' });
    const c = await api(shop, 'POST', `/v1/subscriptions/${s.subscriptionId}/cancel`, { at: 'now' });
    expect(c.status).toBe(202);
    expect(mock.requestsTo('DELETE', `/v1/subscriptions/${s.ref}`)).toHaveLength(1);
  });
});
