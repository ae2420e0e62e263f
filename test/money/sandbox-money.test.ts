// Money on the sandbox provider: every charge is an invoice (checkout, trial start,
// renewal, purchase), renewals keep the billing anchor, declines lead to past_due and
// dunning retries, the last failed retry ends access with reason payment_failed, and
// discounts apply on every invoice their duration covers. The sums and "paid once"
// are database constraints.
import { call, startApp, TestApp } from '../support/app';
import { advance, checkout, createShop, events, externalSubject, pay, Shop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

interface Line { type: string; description: string; amount_cents: number; period_start: string | null; period_end: string | null }
interface Invoice {
  id: string; status: string; billing_reason: string; subscription_id: string | null; purchase_id: string | null;
  currency: string; subtotal_cents: number; discount_cents: number; total_cents: number; amount_paid_cents: number;
  lines: Line[]; attempt_count: number; next_attempt_at: string | null; paid_at: string | null; period_start: string | null;
  period_end: string | null; created_at: string;
}

async function invoices(shop: Shop, subscriptionId: string): Promise<Invoice[]> {
  const { rows } = await app.owner.query<{ j: Invoice }>(
    `select billing.invoice_json(i) as j from billing.invoices i where community_id = $1 and subscription_id = $2 order by id`,
    [shop.communityId, subscriptionId]);
  return rows.map((r) => r.j);
}

async function subscription(shop: Shop, id: string) {
  const r = await call(app.url, 'GET', `/v1/subscriptions/${id}`, { key: shop.key });
  expect(r.status).toBe(200);
  return r.body as { status: string; current_period_end: string; plan_id: string };
}

async function entitled(shop: Shop, memberId: string): Promise<string[]> {
  const r = await call(app.url, 'GET', `/v1/members/${memberId}/entitlements`, { key: shop.key });
  return r.body.data.map((e: { key: string }) => e.key).sort();
}

async function setClock(shop: Shop, iso: string) {
  await app.owner.query(`update billing.communities set clock_offset = $2::timestamptz - now() where id = $1`, [shop.communityId, iso]);
}

function decline(shop: Shop, subscriptionId: string, declines = true) {
  return asTenant(app.owner, shop.communityId, (c) => c.query('select billing.sandbox_set_card($1, $2)', [subscriptionId, declines]), { commit: true });
}

test('a paid checkout writes one paid invoice whose lines add up, and a renewal charges the next period', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  let inv = await invoices(shop, subscriptionId);
  expect(inv).toHaveLength(1);
  expect(inv[0]).toMatchObject({ status: 'paid', billing_reason: 'subscription_create', currency: 'usd', subtotal_cents: 1500,
    discount_cents: 0, total_cents: 1500, amount_paid_cents: 1500, attempt_count: 1, next_attempt_at: null });
  expect(inv[0].lines).toEqual([expect.objectContaining({ type: 'plan', amount_cents: 1500, description: 'Gold (Gold monthly), 1 month' })]);
  const types = (await events(app.owner, shop.communityId)).map((e) => e.type).filter((t) => t.startsWith('invoice.'));
  expect(types).toEqual(['invoice.created', 'invoice.paid']);

  const before = await subscription(shop, subscriptionId);
  await advance(app, shop, 31);
  inv = await invoices(shop, subscriptionId);
  expect(inv.map((i) => [i.billing_reason, i.status, i.total_cents])).toEqual([
    ['subscription_create', 'paid', 1500], ['subscription_cycle', 'paid', 1500]]);
  expect(inv[1].period_start).toBe(before.current_period_end);
  expect(inv[1].paid_at).toBe(before.current_period_end);
  const after = await subscription(shop, subscriptionId);
  expect(after.status).toBe('active');
  expect(after.current_period_end).toBe(inv[1].period_end);
});

test('periods keep the billing anchor: 31 Jan -> 28 Feb -> 31 Mar', async () => {
  const shop = await createShop(app);
  await setClock(shop, '2027-01-31T12:00:00.000Z');
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  // The clock keeps running while the test runs: compare to the minute.
  const minute = (iso: string | null) => iso?.slice(0, 16);
  expect(minute((await subscription(shop, subscriptionId)).current_period_end)).toBe('2027-02-28T12:00');
  await setClock(shop, '2027-03-01T00:00:00.000Z');
  await advance(app, shop, 1);
  expect(minute((await subscription(shop, subscriptionId)).current_period_end)).toBe('2027-03-31T12:00');
  await advance(app, shop, 31);
  expect(minute((await subscription(shop, subscriptionId)).current_period_end)).toBe('2027-04-30T12:00');
  const inv = await invoices(shop, subscriptionId);
  expect(inv.map((i) => [minute(i.period_start), minute(i.period_end)])).toEqual([
    ['2027-01-31T12:00', '2027-02-28T12:00'],
    ['2027-02-28T12:00', '2027-03-31T12:00'],
    ['2027-03-31T12:00', '2027-04-30T12:00']]);
});

test('a declined renewal is past_due with access kept while retries remain; the last failed retry ends it (payment_failed)', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  await decline(shop, subscriptionId);
  const due = (await subscription(shop, subscriptionId)).current_period_end;
  await advance(app, shop, 30.5);
  expect((await subscription(shop, subscriptionId)).status).toBe('past_due');
  let inv = (await invoices(shop, subscriptionId))[1];
  expect(inv).toMatchObject({ status: 'open', attempt_count: 1, amount_paid_cents: 0, paid_at: null });
  expect(inv.next_attempt_at).toBe(new Date(Date.parse(due) + 86400e3).toISOString()); // retry_days [1, 3, 5]
  expect(await entitled(shop, memberId)).toEqual(['member-chat', 'vip-chat']);

  await advance(app, shop, 3); // retries on day 1 and day 3 fail
  inv = (await invoices(shop, subscriptionId))[1];
  expect(inv).toMatchObject({ status: 'open', attempt_count: 3 });
  expect(inv.next_attempt_at).toBe(new Date(Date.parse(due) + 5 * 86400e3).toISOString());
  expect(await entitled(shop, memberId)).toEqual(['member-chat', 'vip-chat']);

  const { rows: [{ max }] } = await app.owner.query(`select max(id) from billing.events where community_id = $1`, [shop.communityId]);
  await advance(app, shop, 3); // the last retry (day 5) fails
  inv = (await invoices(shop, subscriptionId))[1];
  expect(inv).toMatchObject({ status: 'uncollectible', attempt_count: 4, next_attempt_at: null });
  expect((await subscription(shop, subscriptionId)).status).toBe('cancelled');
  expect(await entitled(shop, memberId)).toEqual([]);
  const { rows: after } = await app.owner.query<{ type: string; data: { reason?: string } }>(
    `select type, data from billing.events where community_id = $1 and id > $2 order by id`, [shop.communityId, max]);
  expect(after.map((e) => e.type)).toEqual(['subscription.cancelled', 'member.entitlement.revoked', 'member.entitlement.revoked',
    'invoice.payment_failed']);
  expect(after.filter((e) => e.type === 'member.entitlement.revoked').map((e) => e.data.reason)).toEqual(['payment_failed', 'payment_failed']);
  const { rows: attempts } = await app.owner.query(`select status from billing.payment_attempts where invoice_id = $1 order by id`, [inv.id]);
  expect(attempts.map((a) => a.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
});

test('a retry that succeeds returns the subscription to active, with no access gap', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  await decline(shop, subscriptionId);
  await advance(app, shop, 30.5);
  expect((await subscription(shop, subscriptionId)).status).toBe('past_due');
  await decline(shop, subscriptionId, false);
  const { rows: [{ max }] } = await app.owner.query(`select max(id) from billing.events where community_id = $1`, [shop.communityId]);
  await advance(app, shop, 1);
  expect((await subscription(shop, subscriptionId)).status).toBe('active');
  const inv = (await invoices(shop, subscriptionId))[1];
  expect(inv).toMatchObject({ status: 'paid', attempt_count: 2, amount_paid_cents: 800, next_attempt_at: null });
  expect(await entitled(shop, memberId)).toEqual(['member-chat']);
  const { rows } = await app.owner.query(`select type from billing.events where community_id = $1 and id > $2 and type like 'member.entitlement.%'`,
    [shop.communityId, max]);
  expect(rows.map((r) => r.type)).not.toContain('member.entitlement.revoked');
});

test('a trial starts with a zero-amount paid invoice; the first charge comes at the trial end', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-annual'); // 7-day trial
  let inv = await invoices(shop, subscriptionId);
  expect(inv).toHaveLength(1);
  expect(inv[0]).toMatchObject({ status: 'paid', total_cents: 0, lines: [expect.objectContaining({ type: 'plan', amount_cents: 0,
    description: 'Trial period for Gold (Gold annual)' })] });
  await advance(app, shop, 8);
  inv = await invoices(shop, subscriptionId);
  expect(inv.map((i) => [i.billing_reason, i.status, i.total_cents])).toEqual([
    ['subscription_create', 'paid', 0], ['subscription_cycle', 'paid', 15000]]);
  expect((await subscription(shop, subscriptionId)).status).toBe('active');
});

test('discounts apply on every invoice they cover: once, repeating for duration_months, forever; MRR is net of them', async () => {
  const shop = await createShop(app, { type: 'sandbox' }, { discounts: [
    { code: 'ONCE50', name: 'Once', value_type: 'percent', percent_off: 50, duration: 'once' },
    { code: 'THREE', name: 'Three months', value_type: 'amount', amount_off_cents: 300, currency: 'usd', duration: 'repeating', duration_months: 3 },
    { code: 'ALWAYS', name: 'Forever', value_type: 'percent', percent_off: 100, duration: 'forever' },
  ] });
  const subs: Record<string, string> = {};
  for (const code of ['ONCE50', 'THREE', 'ALWAYS']) {
    const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject(), discount_code: code });
    expect(link.status).toBe(200);
    expect((await pay(link.body.url)).status).toBe(303);
    const { rows } = await app.owner.query('select subscription_id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
    subs[code] = rows[0].subscription_id;
  }
  const summary = await call(app.url, 'GET', '/v1/analytics/summary', { key: shop.key });
  // Next invoices: ONCE50 800 (used), THREE 500 (2 more months), ALWAYS 0.
  expect(summary.body.mrr_cents).toBe(800 + 500 + 0);
  for (let month = 0; month < 4; month++) await advance(app, shop, 31);
  const totals = async (code: string) => (await invoices(shop, subs[code])).map((i) => i.total_cents);
  expect(await totals('ONCE50')).toEqual([400, 800, 800, 800, 800]);
  expect(await totals('THREE')).toEqual([500, 500, 500, 800, 800]);
  expect(await totals('ALWAYS')).toEqual([0, 0, 0, 0, 0]);
  for (const code of Object.keys(subs)) {
    for (const i of await invoices(shop, subs[code])) {
      expect(i.lines.reduce((s, l) => s + l.amount_cents, 0)).toBe(i.total_cents);
      expect(i.status).toBe('paid');
    }
  }
  const later = await call(app.url, 'GET', '/v1/analytics/summary', { key: shop.key });
  expect(later.body.mrr_cents).toBe(800 + 800 + 0);
});

test('a one-time purchase writes a paid purchase invoice', async () => {
  const shop = await createShop(app);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject() });
  expect((await pay(link.body.url)).status).toBe(303);
  const { rows } = await app.owner.query<{ j: Invoice }>(
    `select billing.invoice_json(i) as j from billing.invoices i join billing.purchases p on p.community_id = i.community_id and p.id = i.purchase_id
     where p.checkout_id = $1`, [link.body.checkout_id]);
  expect(rows).toHaveLength(1);
  expect(rows[0].j).toMatchObject({ status: 'paid', billing_reason: 'purchase', total_cents: 900, amount_paid_cents: 900, subscription_id: null });
});

test('recent signups count by the community clock', async () => {
  const shop = await createShop(app);
  await setClock(shop, '2030-06-01T00:00:00.000Z');
  await subscribe(app, shop, 'silver');
  const r = await call(app.url, 'GET', '/v1/analytics/summary', { key: shop.key });
  expect(r.body.recent_signups).toBe(1);
  await advance(app, shop, 31);
  expect((await call(app.url, 'GET', '/v1/analytics/summary', { key: shop.key })).body.recent_signups).toBe(0);
});

describe('the database holds the money rules', () => {
  let shop: Shop;
  let paid: Invoice;
  beforeAll(async () => {
    shop = await createShop(app);
    const { subscriptionId } = await subscribe(app, shop, 'silver');
    paid = (await invoices(shop, subscriptionId))[0];
  });

  test('an invoice whose lines do not add up to its total is refused', async () => {
    await expect(app.owner.query(
      `insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
         subtotal_cents, discount_cents, total_cents, provider, created_at)
       select community_id, member_id, subscription_id, 'open', 'subscription_cycle', 'usd',
         '[{"type": "plan", "description": "x", "amount_cents": 800}]', 900, 0, 900, 'sandbox', now()
       from billing.invoices where id = $1`, [paid.id])).rejects.toThrow(/invoices_subtotal_is_lines/);
  });

  test('an invoice is paid once: a second successful attempt is refused', async () => {
    await expect(app.owner.query(
      `insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, provider, attempted_at)
       values ($1, $2, 'succeeded', 800, 'sandbox', now())`, [shop.communityId, paid.id])).rejects.toThrow(/payment_attempts_one_success/);
  });

  test('a finalized invoice keeps its lines, and a paid one never reopens', async () => {
    await expect(app.owner.query(`update billing.invoices set lines = '[]', subtotal_cents = 0, total_cents = 0, amount_paid_cents = 0 where id = $1`, [paid.id]))
      .rejects.toThrow(/finalized/);
    await expect(app.owner.query(`update billing.invoices set status = 'open', paid_at = null, amount_paid_cents = 0 where id = $1`, [paid.id]))
      .rejects.toThrow(/cannot become open/);
  });

  test('the API role reads invoices but cannot write them', async () => {
    await expect(app.api.query(`update billing.invoices set status = 'void' where id = $1`, [paid.id])).rejects.toThrow(/permission denied/);
  });
});

test('cancelling a past_due subscription keeps retrying its renewal: no free access to the period end', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  await decline(shop, subscriptionId);
  await advance(app, shop, 30.5);
  expect((await subscription(shop, subscriptionId)).status).toBe('past_due');
  expect((await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key })).status).toBe(202);
  // Reactivating brings back what it was: past_due, still being retried.
  expect((await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/reactivate`, { key: shop.key })).body.status).toBe('past_due');
  expect((await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key })).status).toBe(202);
  expect(await entitled(shop, memberId)).toEqual(['member-chat']); // retries remain
  await advance(app, shop, 6); // days 1, 3 and 5 fail
  expect((await subscription(shop, subscriptionId)).status).toBe('cancelled');
  expect(await entitled(shop, memberId)).toEqual([]);
  const inv = (await invoices(shop, subscriptionId))[1];
  expect(inv).toMatchObject({ status: 'uncollectible', attempt_count: 4 });
});
