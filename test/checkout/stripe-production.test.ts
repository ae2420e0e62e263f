// Stripe for production (item 6): one Stripe customer per member and community, a
// cancel page for abandoned checkouts, each community's own Stripe account (keys
// encrypted at rest, never printed), and cancelling a subscription that has a
// scheduled downgrade (the schedule is released first).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { applyCatalog, CatalogError } from '../../src/domain/catalog/catalog-file';
import { call, startApp, TestApp } from '../support/app';
import { deliver, SECRET_KEY, startStripeMock, StripeMock, unflatten, WEBHOOK_SECRET } from '../support/stripe-mock';
import { runCli } from '../support/cli-process';
import { catalog, checkout, createShop, externalSubject, Shop } from '../support/shop';
import { asTenant } from '../support/tenant';

const ENCRYPTION_KEY = '5a'.repeat(32);
const KEY_A = 'sk_test_communityA_0123456789';
const KEY_B = 'sk_test_communityB_9876543210';
const HOOK_A = 'whsec_communityA_abcdefghij';
const HOOK_B = 'whsec_communityB_klmnopqrst';

let mock: StripeMock;
let app: TestApp;
let shop: Shop; // the deployment's Stripe account
let shopA: Shop;
let shopB: Shop;

beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY }, mock.env);
  shop = await createShop(app, { type: 'stripe' });
  shopA = await createShop(app, { type: 'stripe' });
  await applyCatalog(app.owner, shopA.communityId, catalog({ type: 'stripe', secret_key: KEY_A, webhook_secret: HOOK_A } as { type: string }),
    { encryptionKey: ENCRYPTION_KEY });
  shopB = await createShop(app, { type: 'stripe' });
  await applyCatalog(app.owner, shopB.communityId, catalog({ type: 'stripe', secret_key: KEY_B, webhook_secret: HOOK_B } as { type: string }),
    { encryptionKey: ENCRYPTION_KEY });
});
afterAll(async () => {
  await app.close();
  await mock.close();
});

type Form = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const lastSession = (): { form: Form; apiKey: string | null } => {
  const req = mock.requestsTo('POST', '/v1/checkout/sessions').at(-1)!;
  return { form: unflatten(req.form) as Form, apiKey: req.apiKey };
};

async function complete(s: Shop, checkoutId: string, customer: string, extra: Record<string, unknown>, secret?: string) {
  const event = mock.signedEvent('checkout.session.completed', {
    id: `cs_test_${checkoutId}`, object: 'checkout.session', status: 'complete', payment_status: 'paid',
    client_reference_id: checkoutId, metadata: { checkout_id: checkoutId }, customer, ...extra,
  }, { secret });
  return deliver(app.url, s.communityId, event);
}

// ---- one customer per member ------------------------------------------------------------

test('a second checkout of the same member is given the Stripe customer of the first', async () => {
  const subject = externalSubject('customer');
  const first = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject });
  expect(first.status).toBe(200);
  const one = lastSession().form;
  expect(one.customer).toBeUndefined();
  expect(one.customer_creation).toBe('always');
  expect((await complete(shop, first.body.checkout_id, 'cus_first', { mode: 'payment', payment_intent: `pi_${first.body.checkout_id}` })).status).toBe(200);

  const second = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject });
  expect(second.status).toBe(200);
  const two = lastSession().form;
  expect(two.mode).toBe('subscription');
  expect(two.customer).toBe('cus_first');
  expect(two.customer_creation).toBeUndefined();

  // A completion naming another customer (late, duplicate or concurrent) keeps the first.
  const ref = `sub_cust_${Date.now()}`;
  mock.subscription({ id: ref, customer: 'cus_other', price: 'price_silver_m', metadata: { checkout_id: second.body.checkout_id } });
  await complete(shop, second.body.checkout_id, 'cus_other', { mode: 'subscription', subscription: ref });
  await complete(shop, second.body.checkout_id, 'cus_other', { mode: 'subscription', subscription: ref });
  const { rows } = await app.owner.query('select customer_ref from billing.member_provider_customers where community_id = $1 and member_id = $2',
    [shop.communityId, first.body.member_id]);
  expect(rows).toEqual([{ customer_ref: 'cus_first' }]);

  // The portal opens for the member's customer.
  const portal = await call(app.url, 'POST', `/v1/members/${first.body.member_id}/portal-sessions`, { key: shop.key, body: {} });
  expect(portal.status).toBe(200);
  expect(mock.requestsTo('POST', '/v1/billing_portal/sessions').at(-1)!.form.customer).toBe('cus_first');
});

test('the API role reads customers of its own community only and cannot write them', async () => {
  await asTenant(app.api, shopB.communityId, async (c) => {
    const { rows } = await c.query('select * from billing.member_provider_customers');
    expect(rows.every((r) => r.community_id === shopB.communityId)).toBe(true);
    await expect(c.query(`insert into billing.member_provider_customers (community_id, member_id, provider, customer_ref)
      values ($1, 'mem_x', 'stripe', 'cus_x')`, [shopB.communityId])).rejects.toThrow(/permission denied/);
  });
});

// ---- cancel_url ---------------------------------------------------------------------------

test('abandoning Stripe Checkout lands on a cancel page, not the thank-you page', async () => {
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(),
    return_url: 'https://shop.example/thanks' });
  expect(r.status).toBe(200);
  const { form } = lastSession();
  expect(form.cancel_url).not.toBe(form.success_url);
  expect(new URL(form.success_url).origin + new URL(form.success_url).pathname).toBe('https://shop.example/thanks');
  const cancel = new URL(form.cancel_url);
  expect(cancel.pathname).toBe('/sandbox/cancelled');
  expect(cancel.searchParams.get('checkout_id')).toBe(r.body.checkout_id);
  const page = await fetch(`${app.url}${cancel.pathname}${cancel.search}`);
  const html = await page.text();
  expect(page.status).toBe(200);
  expect(html).toContain('Checkout cancelled');
  expect(html).toContain('nothing was charged');
  expect(html).not.toContain('Thank you');
  expect(html).toContain(`https://shop.example/thanks?checkout_id=${r.body.checkout_id}&amp;cancelled=1`);
  const { rows } = await app.owner.query('select status from billing.checkout_sessions where id = $1', [r.body.checkout_id]);
  expect(rows[0].status).toBe('open');
});

// ---- each community's own Stripe account ------------------------------------------------

test('each community talks to Stripe with its own secret key, others with the deployment\'s', async () => {
  await checkout(app, shopA, { tier_id: shopA.ids.tiers.silver, subject: externalSubject() });
  expect(lastSession().apiKey).toBe(KEY_A);
  await checkout(app, shopB, { tier_id: shopB.ids.tiers.silver, subject: externalSubject() });
  expect(lastSession().apiKey).toBe(KEY_B);
  await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  expect(lastSession().apiKey).toBe(SECRET_KEY);

  // Lifecycle calls too: cancel in B uses B's key.
  const link = await checkout(app, shopB, { tier_id: shopB.ids.tiers.silver, subject: externalSubject() });
  const ref = `sub_b_${Date.now()}`;
  mock.subscription({ id: ref, customer: 'cus_b', price: 'price_silver_m', metadata: { checkout_id: link.body.checkout_id } });
  expect((await complete(shopB, link.body.checkout_id, 'cus_b', { mode: 'subscription', subscription: ref }, HOOK_B)).status).toBe(200);
  const { rows } = await app.owner.query('select id from billing.subscriptions where provider_ref = $1', [ref]);
  expect((await call(app.url, 'POST', `/v1/subscriptions/${rows[0].id}/cancel`, { key: shopB.key })).status).toBe(202);
  const calls = mock.requests.filter((q) => q.path.startsWith(`/v1/subscriptions/${ref}`));
  expect(calls.length).toBeGreaterThan(0);
  expect(new Set(calls.map((q) => q.apiKey))).toEqual(new Set([KEY_B]));
});

test('a webhook is verified with its community\'s own secret: another community\'s (or the deployment\'s) is refused', async () => {
  const link = await checkout(app, shopA, { tier_id: shopA.ids.tiers.guide, subject: externalSubject() });
  const payload = { id: 'cs_a', object: 'checkout.session', mode: 'payment', status: 'complete', payment_status: 'paid',
    metadata: { checkout_id: link.body.checkout_id }, payment_intent: 'pi_a_1', customer: 'cus_a' };
  for (const secret of [HOOK_B, WEBHOOK_SECRET]) {
    const event = mock.signedEvent('checkout.session.completed', payload, { secret });
    expect((await deliver(app.url, shopA.communityId, event)).status).toBe(400);
    const { rows } = await app.owner.query('select count(*)::int as n from billing.provider_events where event_id = $1', [event.id]);
    expect(rows[0].n).toBe(0);
  }
  const good = mock.signedEvent('checkout.session.completed', payload, { secret: HOOK_A });
  expect((await deliver(app.url, shopA.communityId, good)).status).toBe(200);
  const { rows } = await app.owner.query('select status from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  expect(rows[0].status).toBe('completed');
  // The deployment's secret still verifies a community without its own.
  const other = mock.signedEvent('customer.created', { id: 'cus_z', object: 'customer' });
  expect((await deliver(app.url, shop.communityId, other)).status).toBe(200);
});

test('Stripe secrets are stored encrypted, owner only, never in payment_config, and re-applying changes nothing', async () => {
  const { rows: [community] } = await app.owner.query('select payment_config from billing.communities where id = $1', [shopA.communityId]);
  expect(JSON.stringify(community.payment_config)).not.toMatch(/sk_test|whsec_/);
  const { rows } = await app.owner.query('select name, ciphertext from billing_private.payment_secrets where community_id = $1 order by name', [shopA.communityId]);
  expect(rows.map((r) => r.name)).toEqual(['secret_key', 'webhook_secret']);
  for (const r of rows) {
    expect(r.ciphertext).toMatch(/^v1:/);
    expect(r.ciphertext).not.toContain('communityA');
  }
  await applyCatalog(app.owner, shopA.communityId, catalog({ type: 'stripe', secret_key: KEY_A, webhook_secret: HOOK_A } as { type: string }),
    { encryptionKey: ENCRYPTION_KEY });
  const again = await app.owner.query('select name, ciphertext from billing_private.payment_secrets where community_id = $1 order by name', [shopA.communityId]);
  expect(again.rows).toEqual(rows);
  // The API role cannot read the table; a clear secret cannot be put into payment_config.
  await expect(app.api.query('select * from billing_private.payment_secrets')).rejects.toThrow(/permission denied/);
  await expect(app.owner.query(`update billing.communities set payment_config = '{"secret_key": "sk_test_x"}' where id = $1`, [shopA.communityId]))
    .rejects.toThrow(/communities_payment_config_no_secrets/);
  // Secrets need the encryption key.
  await expect(applyCatalog(app.owner, shopA.communityId, catalog({ type: 'stripe', secret_key: KEY_B } as { type: string })))
    .rejects.toThrow(CatalogError);
});

test('billing catalog apply stores the secrets without printing them back', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stripe-keys-'));
  try {
    const tenant = await createShop(app, null);
    const file = path.join(dir, 'catalog.json');
    const secretKey = 'sk_live_cliSecretValue_42424242';
    const hook = 'whsec_cliHookValue_4242424242';
    fs.writeFileSync(file, JSON.stringify({ payment_provider: { type: 'stripe', secret_key: secretKey, webhook_secret: hook } }));
    for (const json of [true, false]) {
      const r = await runCli(['catalog', 'apply', file, '--community', tenant.communityId, ...(json ? ['--json'] : [])],
        { WEBHOOK_ENCRYPTION_KEY: ENCRYPTION_KEY });
      expect(r.code).toBe(0);
      expect(r.stdout + r.stderr).not.toMatch(/cliSecretValue|cliHookValue/);
    }
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ payment_provider: { type: 'stripe', secret_key: 'pk_test_notASecret_123456789' } }));
    const refused = await runCli(['catalog', 'apply', bad, '--community', tenant.communityId], { WEBHOOK_ENCRYPTION_KEY: ENCRYPTION_KEY });
    expect(refused.code).not.toBe(0);
    expect(refused.stdout + refused.stderr).not.toContain('notASecret');
    const { rows } = await app.owner.query('select count(*)::int as n from billing_private.payment_secrets where community_id = $1', [tenant.communityId]);
    expect(rows[0].n).toBe(2);
    await checkout(app, tenant, { tier_id: tenant.ids.tiers.silver, subject: externalSubject() });
    expect(lastSession().apiKey).toBe(secretKey);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// ---- cancel with a scheduled downgrade ---------------------------------------------------

test('cancelling a subscription with a scheduled downgrade releases the Stripe schedule first', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() });
  const ref = `sub_sched_cancel_${Date.now()}`;
  mock.subscription({ id: ref, customer: 'cus_sc', price: 'price_gold_m', metadata: { checkout_id: link.body.checkout_id } });
  await complete(shop, link.body.checkout_id, 'cus_sc', { mode: 'subscription', subscription: ref });
  const { rows } = await app.owner.query('select id from billing.subscriptions where provider_ref = $1', [ref]);
  const id = rows[0].id;
  const down = await call(app.url, 'POST', `/v1/subscriptions/${id}/switch`, { key: shop.key, body: { plan_id: shop.ids.plans['silver-monthly'] } });
  expect(down.body.scheduled_plan_id).toBe(shop.ids.plans['silver-monthly']);
  const schedule = String(mock.subscriptions.get(ref)!.schedule);
  expect(schedule).toMatch(/^sub_sched_/);

  const before = mock.requests.length;
  const cancel = await call(app.url, 'POST', `/v1/subscriptions/${id}/cancel`, { key: shop.key });
  expect(cancel.status).toBe(202);
  const after = await call(app.url, 'GET', `/v1/subscriptions/${id}`, { key: shop.key });
  expect(after.body).toMatchObject({ status: 'cancelling', scheduled_plan_id: null });
  const posts = mock.requests.slice(before).filter((q) => q.method === 'POST').map((q) => q.path);
  expect(posts).toEqual([`/v1/subscription_schedules/${schedule}/release`, `/v1/subscriptions/${ref}`]);
  expect(mock.subscriptions.get(ref)).toMatchObject({ cancel_at_period_end: true, schedule: null });
});
