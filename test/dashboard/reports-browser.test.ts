// The Reports page (issue 31 item 5): a chart and a table for each report, the tables'
// figures the API's, a CSV download for each, reachable from the menu with a keyboard,
// and no serious axe-core violation.
import type { Browser } from 'playwright-core';
import { call, startApp, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { createShop, Shop, subscribe } from '../support/shop';

let app: TestApp;
let browser: Browser;
let shop: Shop;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createShop(app);
  await subscribe(app, shop, 'gold', 'gold-monthly');
  await subscribe(app, shop, 'silver', 'silver-monthly');
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('a viewer opens Reports from the menu by keyboard: each report a chart, a table of the API\'s figures and a CSV', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard`);
  const link = page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Reports' });
  await link.focus();
  await page.keyboard.press('Enter');
  await page.waitForURL(`${app.url}/dashboard/reports`);
  expect(await seriousViolations(page)).toEqual([]);

  const sections = ['Revenue by day, last 30 days', 'Revenue by month', 'Retention by monthly cohort', 'Member churn by month',
    'Average revenue per member and lifetime value', 'Trial conversion', 'Failed-payment recovery'];
  expect(await page.getByRole('heading', { level: 2 }).allTextContents()).toEqual(sections);
  for (const name of sections) {
    const region = page.getByRole('region', { name });
    expect([name, await region.getByRole('img').count()]).toEqual([name, 1]);
    expect([name, await region.getByRole('link', { name: /as CSV$/ }).count()]).toEqual([name, 1]);
  }

  // Today's revenue: the two checkouts, as GET /v1/analytics/revenue answers it.
  const today = (await call(app.url, 'GET', '/v1/analytics/revenue', { key: shop.key })).body.data.at(-1);
  const daily = page.getByRole('region', { name: 'Revenue by day, last 30 days' }).getByRole('row').nth(1);
  expect((await daily.getByRole('cell').allTextContents())).toEqual([today.period, 'USD', '23.00 USD', '0.00 USD', '23.00 USD', '2', '0']);
  const cohort = page.getByRole('region', { name: 'Retention by monthly cohort' }).getByRole('row').nth(1);
  expect((await cohort.getByRole('cell').allTextContents()).slice(1, 3)).toEqual(['2', '100.0% (2)']);

  // The CSV link downloads what GET /v1/analytics/revenue.csv answers.
  const csvLink = page.getByRole('region', { name: 'Revenue by month' }).getByRole('link', { name: /as CSV$/ });
  const [download] = await Promise.all([page.waitForEvent('download'), csvLink.click()]);
  expect(download.suggestedFilename()).toMatch(/^revenue-month-\d{4}-\d{2}-01-\d{4}-\d{2}-01\.csv$/);
  const api = await call(app.url, 'GET', '/v1/analytics/revenue.csv?granularity=month', { key: shop.key });
  const stream = await download.createReadStream();
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  expect(Buffer.concat(chunks).toString('utf8')).toBe(api.text);
  await context.close();
});
