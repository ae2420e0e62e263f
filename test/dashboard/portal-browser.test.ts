// The member portal in a real browser (issue 16): the member sees plan, price, next
// invoice and status; switches plan after seeing the proration; cancels at period end
// and reactivates; changes the simulated card. The database keeps a portal session to
// its own member (82-member-portal.sql).
import type { Browser } from 'playwright-core';
import { call, startApp, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { createShop, Shop, subscribe } from '../support/shop';
import { openMemberPortal } from '../../src/domain/members/member-portal';
import { dashboardOperation } from '../../src/operations';
import { createExecutor } from '../support/dashboard';

let app: TestApp;
let browser: Browser;
let shop: Shop;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createShop(app);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

async function portalUrl(memberId: string): Promise<string> {
  const r = await call(app.url, 'POST', `/v1/members/${memberId}/portal-sessions`, { key: shop.key, body: { return_url: 'https://shop.example/account' } });
  expect(r.status).toBe(200);
  return r.body.url;
}

test('a member switches plan seeing the proration first, then cancels and reactivates from the portal', async () => {
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  const { context, page } = await newPage(browser);
  await page.goto(await portalUrl(memberId));
  await page.getByRole('heading', { name: 'Silver: Silver monthly' }).waitFor();
  await expect(page.locator('main').textContent()).resolves.toMatch(/8\.00 USD per month.*active.*Next invoice8\.00 USD on \d{4}-\d{2}-\d{2}/s);
  expect(await seriousViolations(page)).toEqual([]);

  await page.getByRole('link', { name: 'Change plan' }).click();
  const gold = page.locator('tr', { hasText: 'Gold monthly' });
  // Upgrading on the first day: 15.00 for the rest of the period less 8.00 unused.
  await expect(gold.textContent()).resolves.toMatch(/Due now: 7\.00 USD \(15\.00 USD for the rest of the period, less 8\.00 USD unused/);
  expect(await seriousViolations(page)).toEqual([]);
  await gold.getByRole('button', { name: 'Switch to Gold monthly' }).click();
  await page.getByText('Your plan is changed.').waitFor();
  await page.getByRole('heading', { name: 'Gold: Gold monthly' }).waitFor();

  await page.getByRole('button', { name: 'Cancel at period end' }).click();
  await page.getByText('Your subscription will end at the close').waitFor();
  expect(await page.getByTestId('status').textContent()).toBe('cancelling');
  await expect(page.locator('main').textContent()).resolves.toContain('No further invoice');
  await page.getByRole('button', { name: 'Keep my subscription' }).click();
  await page.getByText('Your subscription renews again.').waitFor();

  await page.getByLabel('Test card that declines').check();
  await page.getByRole('button', { name: 'Save payment method' }).click();
  await page.getByText('Your payment method is updated.').waitFor();
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body).toMatchObject({ status: 'active', plan_id: shop.ids.plans['gold-monthly'] });
  const { rows } = await app.owner.query('select declines from billing.sandbox_cards where subscription_id = $1', [subscriptionId]);
  expect(rows[0].declines).toBe(true);
  await context.close();
});

test("a portal session cannot see or change another member's subscription", async () => {
  const mine = await subscribe(app, shop, 'silver');
  const theirs = await subscribe(app, shop, 'silver');
  const url = new URL(await portalUrl(mine.memberId));
  const opened = await openMemberPortal(app.api, url.pathname.split('/').pop()!, url.searchParams.get('t')!);
  if (opened?.status !== 'open') throw new Error('portal did not open');
  const executor = createExecutor(app);
  const caller = { key: null, session: opened.token, ip: '127.0.0.1' };
  const list = await executor.run(dashboardOperation('list_subscriptions'), caller, {});
  expect((list.body as { data: { id: string }[] }).data.map((s) => s.id)).toEqual([mine.subscriptionId]);
  const cancel = await executor.run(dashboardOperation('cancel_subscription'), caller, { params: { id: theirs.subscriptionId }, body: {} });
  expect(cancel.status).toBe(404);
  const card = await executor.run(dashboardOperation('set_sandbox_card'), caller, { params: { id: theirs.subscriptionId }, body: { card: 'declines' } });
  expect(card.status).toBe(404);
  const keys = await executor.run(dashboardOperation('list_api_keys'), caller, {});
  expect(keys.status).toBe(403);
  const members = await executor.run(dashboardOperation('list_members'), caller, {});
  expect(members.status).toBe(403);
});
