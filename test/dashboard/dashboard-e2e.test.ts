// End to end in a real browser (issue 16): a buyer pays on the sandbox checkout page and
// the operator sees it on the overview and the member page; an operator redelivers a
// webhook from the delivery log.
import type { Browser } from 'playwright-core';
import { checkout, createShop, externalSubject, Shop } from '../support/shop';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { call, startApp, TestApp } from '../support/app';
import { insertEvents, Receiver, startReceiver, waitFor, worker, WORKER_CONFIG } from '../support/webhooks';

let app: TestApp;
let browser: Browser;
let shop: Shop;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(WORKER_CONFIG), launchBrowser()]);
  shop = await createShop(app);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('a checkout paid on the sandbox page appears on the overview and the member page', async () => {
  const { context, page } = await newPage(browser);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() });
  await page.goto(link.body.url);
  await page.getByText('Test mode').waitFor();
  expect(await page.getByRole('heading', { level: 1 }).textContent()).toMatch(/^Test community \d+: Gold$/);
  expect(await seriousViolations(page)).toEqual([]);
  await page.getByRole('button', { name: /^Pay / }).click();
  await page.getByRole('heading', { name: 'Thank you' }).waitFor();

  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard`);
  expect(await page.getByTestId('active').textContent()).toBe('1');
  expect(await page.getByTestId('mrr').textContent()).toBe('15.00 USD');
  await page.goto(`${app.url}/dashboard/members/${link.body.member_id}`);
  const subscriptions = page.locator('h2:has-text("Subscriptions") + table');
  await expect(subscriptions.textContent()).resolves.toMatch(/Gold.*15\.00 USD \/ month.*active/s);
  await expect(page.locator('h2:has-text("Invoices") + table').textContent()).resolves.toMatch(/paid/);
  await expect(page.locator('h2:has-text("Entitlement history") + table').textContent()).resolves.toMatch(/granted.*vip-chat.*1.*active/s);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('a buyer enters a discount code on the checkout page and pays the discounted total', async () => {
  const { context, page } = await newPage(browser);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() });
  await page.goto(link.body.url);
  await page.getByLabel('Discount code').fill('NOPE');
  await page.getByRole('button', { name: 'Apply code' }).click();
  expect(await page.getByRole('alert').textContent()).toBe('Unknown discount code.');
  expect(await seriousViolations(page)).toEqual([]);
  await page.getByLabel('Discount code').fill('welcome10');
  await page.getByRole('button', { name: 'Apply code' }).click();
  await expect(page.locator('dl').textContent()).resolves.toMatch(/DiscountWELCOME10 \(−1\.50 USD\)Due today13\.50 USD.*then 15\.00 USD per month/s);
  await page.getByRole('button', { name: 'Pay 13.50 USD' }).click();
  await page.getByRole('heading', { name: 'Thank you' }).waitFor();
  const invoices = await call(app.url, 'GET', `/v1/invoices?member_id=${link.body.member_id}`, { key: shop.key });
  expect(invoices.body.data.map((i: { total_cents: number; status: string }) => [i.total_cents, i.status])).toEqual([[1350, 'paid']]);
  await context.close();
});

test('an operator adds an endpoint, sees its delivery log and redelivers', async () => {
  const receiver: Receiver = await startReceiver();
  const running = await worker();
  const { context, page } = await newPage(browser);
  try {
    await signInAs(page, app, shop.communityId, 'admin');
    await page.goto(`${app.url}/dashboard/webhooks`);
    await page.getByLabel('URL (https)').fill(receiver.url);
    await page.getByLabel(/Event types/).selectOption(['member.entitlement.granted', 'member.entitlement.revoked']);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    expect(await page.locator('#secret').textContent()).toMatch(/^whsec_/);
    await page.getByRole('link', { name: 'Go to the endpoint' }).click();
    await expect(page.locator('main > p').first().textContent()).resolves.toContain('events: member.entitlement.granted, member.entitlement.revoked');
    await insertEvents(app.owner, shop.communityId, [{ type: 'member.entitlement.granted', data: { member: { id: 'mem_x' } } }]);
    await waitFor('first delivery', () => receiver.received.length === 1);
    await waitFor('delivery logged', async () => {
      await page.reload();
      return (await page.locator('h2:has-text("Delivery log") + table').textContent())?.includes('succeeded');
    });
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Redeliver' }).click();
    await page.getByText('The delivery is queued again.').waitFor();
    await waitFor('second delivery', () => receiver.received.length === 2);
    expect(receiver.received[1].headers['webhook-id']).toBe(receiver.received[0].headers['webhook-id']);
  } finally {
    await context.close();
    await running.stop();
    await receiver.close();
  }
});
