// A trial is given once (issue 26, item 4; docs/decisions/one-trial-per-tier.md): a
// member whose trial of a tier ended, paid or not, gets no trial of that tier again:
// the checkout link says trial_days 0, the checkout page offers no trial, paying charges
// the full price at once, and switch options show no trial. Another tier's trial, and
// another member's, are untouched.
import { sandboxSetCard } from '../../src/domain/checkout/checkout-completion';
import { call, startApp, TestApp } from '../support/app';
import { startStripeMock, StripeMock, unflatten } from '../support/stripe-mock';
import { advance, checkout, createShop, externalSubject, pay, Shop, subscribe } from '../support/shop';

let app: TestApp;
let mock: StripeMock;
let shop: Shop;
beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({}, mock.env);
  shop = await createShop(app);
  // A monthly plan with a trial on a second tier.
  const { rows: [plan] } = await app.owner.query<{ id: string }>(
    `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval, trial_days)
     values ($1, $2, 'silver-trial', 'Silver plus', 800, 'usd', 'month', 3) returning id`, [shop.communityId, shop.ids.tiers.silver]);
  shop.ids.plans['silver-trial'] = plan.id;
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

const api = (method: string, path: string, body?: unknown) => call(app.url, method, path, { key: shop.key, body });
const sub = async (id: string) => (await api('GET', `/v1/subscriptions/${id}`)).body;
const invoices = async (subscriptionId: string) =>
  ((await api('GET', `/v1/invoices?subscription_id=${subscriptionId}`)).body.data as { total_cents: number; status: string }[]).map((i) => [i.total_cents, i.status]);

test('a member whose trial ended unpaid gets no second trial of that tier, on the link, the page or the charge', async () => {
  const buyer = externalSubject('trial');
  const first = await subscribe(app, shop, 'gold', 'gold-annual', buyer);
  expect((await sub(first.subscriptionId)).status).toBe('trialing');
  // The card declines at the trial's end; the retries fail too; the subscription ends.
  await sandboxSetCard(app.owner, first.subscriptionId, true);
  await advance(app, shop, 8);
  expect((await sub(first.subscriptionId)).status).toBe('past_due');
  await advance(app, shop, 10);
  expect((await sub(first.subscriptionId)).status).toBe('cancelled');

  const again = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: buyer });
  expect(again.status).toBe(200);
  expect(again.body.trial_days).toBe(0);
  const paid = await pay(again.body.url);
  expect(paid.page).not.toMatch(/trial/i);
  expect(paid.page).toContain('Pay 150.00 USD');
  const { rows: [{ id }] } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [again.body.checkout_id]);
  expect((await sub(id)).status).toBe('active');
  expect(await invoices(id)).toEqual([[15000, 'paid']]);

  // Another member still gets the trial, and the link says so.
  const other = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject('trial') });
  expect(other.body.trial_days).toBe(7);
  expect((await pay(other.body.url)).page).toContain('Start the 7-day trial');
});

test('a trial cancelled at once still counts; another tier\'s trial is still given; switch options show no used trial', async () => {
  const buyer = externalSubject('trial');
  const first = await subscribe(app, shop, 'silver', 'silver-trial', buyer);
  expect((await sub(first.subscriptionId)).status).toBe('trialing');
  expect((await api('POST', `/v1/subscriptions/${first.subscriptionId}/cancel`, { at: 'now' })).status).toBe(202);
  // Gold's trial was never used by this member: still given (and silver's is not).
  const gold = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: buyer });
  expect(gold.body.trial_days).toBe(7);
  const silver = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, plan_id: shop.ids.plans['silver-trial'], subject: buyer });
  expect(silver.body.trial_days).toBe(0);
  await pay(silver.body.url);
  const { rows: [{ id }] } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [silver.body.checkout_id]);
  expect((await sub(id)).status).toBe('active');
  expect(await invoices(id)).toEqual([[800, 'paid']]);

  // Switch options name each plan's trial as this member would get it.
  const options = (await api('GET', `/v1/subscriptions/${id}/switch-options`)).body;
  const goldAnnual = options.upgrades.find((o: { plan_id: string }) => o.plan_id === shop.ids.plans['gold-annual']);
  expect(goldAnnual.trial_days).toBe(7);
  const silverMonthly = options.same_tier.find((o: { plan_id: string }) => o.plan_id === shop.ids.plans['silver-monthly']);
  expect(silverMonthly.trial_days).toBe(0);
  const { rows: [plan] } = await app.owner.query<{ id: string }>(`update billing.plans set trial_days = 14 where id = $1 returning id`, [shop.ids.plans['silver-monthly']]);
  try {
    const again = (await api('GET', `/v1/subscriptions/${id}/switch-options`)).body;
    expect(again.same_tier.find((o: { plan_id: string }) => o.plan_id === plan.id).trial_days).toBe(0);
  } finally {
    await app.owner.query('update billing.plans set trial_days = 0 where id = $1', [plan.id]);
  }
});

test('two checkouts of one buyer, paid one after the other, give one trial', async () => {
  const buyer = externalSubject('trial');
  const a = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, plan_id: shop.ids.plans['silver-trial'], subject: buyer });
  const b = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, plan_id: shop.ids.plans['silver-trial'], subject: buyer });
  expect([a.body.trial_days, b.body.trial_days]).toEqual([3, 3]);
  expect((await pay(a.body.url)).status).toBe(303);
  const { rows: [{ id: first }] } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [a.body.checkout_id]);
  expect((await api('POST', `/v1/subscriptions/${first}/cancel`, { at: 'now' })).status).toBe(202);
  // The second page, opened now, offers no trial; paying it charges the price.
  const paid = await pay(b.body.url);
  expect(paid.page).not.toMatch(/trial/i);
  expect(paid.page).toContain('Pay 8.00 USD');
  const { rows: [{ id: second }] } = await app.owner.query<{ id: string }>('select subscription_id as id from billing.checkout_sessions where id = $1', [b.body.checkout_id]);
  expect(await invoices(second)).toEqual([[800, 'paid']]);
});

test('on Stripe, a repeat buyer\'s checkout session asks for no trial', async () => {
  const stripeShop = await createShop(app, { type: 'stripe' });
  const buyer = externalSubject('trial');
  const link = (s: Record<string, unknown>) => call(app.url, 'POST', '/v1/checkout-links', { key: stripeShop.key,
    body: { tier_id: stripeShop.ids.tiers.gold, plan_id: stripeShop.ids.plans['gold-annual'], subject: s } });
  const firstLink = await link(buyer);
  expect(firstLink.body.trial_days).toBe(7);
  const sent = () => unflatten(mock.requestsTo('POST', '/v1/checkout/sessions').at(-1)!.form) as { subscription_data?: { trial_period_days?: string } };
  expect(sent().subscription_data?.trial_period_days).toBe('7');
  // The member had a trial of gold (its subscription, ended since).
  await app.owner.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, trial_end, trial_tier_id, provider, cancelled_at)
    values ($1, $2, $3, 'cancelled', now(), $4, 'stripe', now())`, [stripeShop.communityId, firstLink.body.member_id, stripeShop.ids.plans['gold-annual'], stripeShop.ids.tiers.gold]);
  const repeat = await link(buyer);
  expect(repeat.status).toBe(200);
  expect(repeat.body.trial_days).toBe(0);
  expect(sent().subscription_data?.trial_period_days).toBeUndefined();
});
