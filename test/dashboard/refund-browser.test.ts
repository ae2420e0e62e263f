// A refund of part of an invoice from the dashboard (issue 16): the amount field is
// prefilled with what is left to refund; a partial refund leaves a Refund for the rest;
// bad amounts are refused by the operation itself; a viewer cannot refund; a disputed
// invoice has no Refund (issue 26).
import type { Browser } from 'playwright-core';
import { sandboxDispute } from '../../src/domain/checkout/checkout-completion';
import { createShop, Shop, subscribe } from '../support/shop';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { startApp, TestApp } from '../support/app';

let app: TestApp;
let browser: Browser;
let shop: Shop;
let memberId: string;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createShop(app);
  ({ memberId } = await subscribe(app, shop, 'gold', 'gold-monthly'));
});
afterAll(async () => { await browser?.close(); await app?.close(); });

const invoice = async () => (await app.owner.query<{ id: string; amount_refunded_cents: number }>(
  'select id, amount_refunded_cents from billing.invoices where community_id = $1 and member_id = $2', [shop.communityId, memberId])).rows;

test('a viewer sees no Refund and a forged one is refused', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/members/${memberId}`);
  await expect(page.locator('h2:has-text("Invoices") + table').textContent()).resolves.toMatch(/15\.00 USD.*paid/s);
  expect(await page.getByRole('button', { name: 'Refund' }).count()).toBe(0);
  const [{ id }] = await invoice();
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const res = await page.request.post(`${app.url}/dashboard/invoices/${id}/refund`, { form: { csrf, amount: '1.00' } });
  expect(res.status()).toBe(403);
  expect(await res.text()).toContain('Your role (viewer) cannot do this.');
  expect((await invoice())[0].amount_refunded_cents).toBe(0);
  await context.close();
});

test('an owner refunds part, then the rest; bad amounts are refused by the operation', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'owner');
  await page.goto(`${app.url}/dashboard/members/${memberId}`);
  const amount = page.getByLabel('Amount (USD)');
  expect(await amount.inputValue()).toBe('15.00');
  expect(await seriousViolations(page)).toEqual([]);

  // Not a number, and more than is left: the operation's own answers.
  const [{ id }] = await invoice();
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const notANumber = await page.request.post(`${app.url}/dashboard/invoices/${id}/refund`, { form: { csrf, amount: 'ten' } });
  expect(notANumber.status()).toBe(422);
  expect(await notANumber.text()).toContain('amount_cents');
  await amount.fill('15.01');
  await page.getByRole('button', { name: 'Refund' }).click();
  await page.getByRole('alert').waitFor();
  expect(await page.getByRole('alert').textContent()).toMatch(/\([a-z_]+, (409|422)\)/);
  expect((await invoice())[0].amount_refunded_cents).toBe(0);

  await page.goto(`${app.url}/dashboard/members/${memberId}`);
  await page.getByLabel('Amount (USD)').fill('5.25');
  await page.getByRole('button', { name: 'Refund' }).click();
  await page.getByText('The refund is recorded.').waitFor();
  expect((await invoice())[0].amount_refunded_cents).toBe(525);
  await expect(page.locator('h2:has-text("Invoices") + table').textContent()).resolves.toMatch(/paid \(refunded 5\.25 USD\)/);
  expect(await page.getByLabel('Amount (USD)').inputValue()).toBe('9.75');

  await page.getByRole('button', { name: 'Refund' }).click();
  await page.getByText('The refund is recorded.').waitFor();
  expect((await invoice())[0].amount_refunded_cents).toBe(1500);
  await expect(page.locator('h2:has-text("Invoices") + table').textContent()).resolves.toMatch(/refunded 15\.00 USD/);
  expect(await page.getByRole('button', { name: 'Refund' }).count()).toBe(0);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('a refund is typed in the invoice currency\'s own places: 200 of a 500 JPY invoice is 200 yen', async () => {
  // Yen have no minor unit: 500 JPY is amount_cents 500, shown "500 JPY" and typed "200".
  const { rows: [plan] } = await app.owner.query<{ id: string }>(
    `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
     values ($1, $2, 'gold-yen', 'Gold (yen)', 500, 'jpy', 'month') returning id`, [shop.communityId, shop.ids.tiers.gold]);
  shop.ids.plans['gold-yen'] = plan.id;
  const yen = await subscribe(app, shop, 'gold', 'gold-yen');
  const refunded = async () => (await app.owner.query<{ amount_refunded_cents: number }>(
    'select amount_refunded_cents from billing.invoices where community_id = $1 and member_id = $2', [shop.communityId, yen.memberId])).rows[0].amount_refunded_cents;
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'owner');
  await page.goto(`${app.url}/dashboard/members/${yen.memberId}`);
  await expect(page.locator('h2:has-text("Invoices") + table').textContent()).resolves.toMatch(/500 JPY.*paid/s);
  const amount = page.getByLabel('Amount (JPY)');
  expect(await amount.inputValue()).toBe('500');
  await amount.fill('200');
  await page.getByRole('button', { name: 'Refund' }).click();
  await page.getByText('The refund is recorded.').waitFor();
  expect(await refunded()).toBe(200);
  expect(await page.getByLabel('Amount (JPY)').inputValue()).toBe('300');
  // Yen with decimals are no amount: the operation refuses the text as typed.
  const [{ id }] = (await app.owner.query<{ id: string }>('select id from billing.invoices where community_id = $1 and member_id = $2', [shop.communityId, yen.memberId])).rows;
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const cents = await page.request.post(`${app.url}/dashboard/invoices/${id}/refund`, { form: { csrf, amount: '1.50' } });
  expect(cents.status()).toBe(422);
  expect(await refunded()).toBe(200);
  await context.close();
});

test('a disputed invoice shows its dispute and no Refund; a forged refund is refused with 409', async () => {
  const disputed = await subscribe(app, shop, 'gold', 'gold-monthly');
  const [{ id }] = (await app.owner.query<{ id: string }>('select id from billing.invoices where community_id = $1 and member_id = $2', [shop.communityId, disputed.memberId])).rows;
  await sandboxDispute(app.owner, id);
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'owner');
  await page.goto(`${app.url}/dashboard/members/${disputed.memberId}`);
  await expect(page.locator('h2:has-text("Invoices") + table').textContent()).resolves.toMatch(/15\.00 USD.*paid, disputed: needs response/s);
  expect(await page.getByRole('button', { name: 'Refund' }).count()).toBe(0);
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const res = await page.request.post(`${app.url}/dashboard/invoices/${id}/refund`, { form: { csrf, amount: '1.00' } });
  expect(res.status()).toBe(409);
  expect((await app.owner.query('select amount_refunded_cents from billing.invoices where id = $1', [id])).rows[0].amount_refunded_cents).toBe(0);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});
