// The dashboard's mail page in a real browser (issue 30 item 2): a checkout with an
// email leaves a receipt the operator opens (its text, and its HTML served alone under
// a sandboxing CSP), previews a template and turns it off; the member page shows and
// sets the email, and the members search finds a member by it.
import type { Browser } from 'playwright-core';
import { checkout, createShop, externalSubject, pay, Shop } from '../support/shop';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { startApp, TestApp } from '../support/app';
import { WORKER_CONFIG } from '../support/webhooks';

let app: TestApp;
let browser: Browser;
let shop: Shop;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(WORKER_CONFIG), launchBrowser()]);
  shop = await createShop(app);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('an operator reads a receipt on the mail page, previews a template and turns it off', async () => {
  const email = `reader.${Date.now()}@example.test`;
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(), customer_email: email });
  await pay(link.body.url);
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/mail`);
  const row = page.locator('tr', { hasText: 'Receipt from' });
  await expect(row.textContent()).resolves.toContain(email);
  expect(await seriousViolations(page)).toEqual([]);
  await row.getByRole('link', { name: /^Receipt from/ }).click();
  await expect(page.locator('pre').textContent()).resolves.toMatch(/Amount paid: 15\.00 USD[\s\S]*\/mail\/portal\//);
  const htmlPart = await context.request.get(`${page.url()}?part=html`);
  expect(htmlPart.headers()['content-security-policy']).toMatch(/^sandbox; default-src 'none'/);
  expect(await htmlPart.text()).toContain('15.00 USD');

  await page.goto(`${app.url}/dashboard/mail/templates/payment_failed/preview`);
  await expect(page.locator('pre').textContent()).resolves.toMatch(/We could not collect 15\.00 USD/);
  await page.goto(`${app.url}/dashboard/mail`);
  await page.locator('tr', { hasText: 'Receipt (invoice paid)' }).getByRole('button', { name: 'Turn off' }).click();
  await expect(page.locator('tr', { hasText: 'Receipt (invoice paid)' }).textContent()).resolves.toMatch(/off/);
  const { rows } = await app.owner.query('select mail_templates_off from billing.communities where id = $1', [shop.communityId]);
  expect(rows[0].mail_templates_off).toEqual(['receipt']);
  await context.close();
});

test('the member page shows and sets the email; the members search finds it', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject() });
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/members/${link.body.member_id}`);
  const email = `Set.${Date.now()}@Example.test`;
  await page.getByLabel('Email (empty clears it)').fill(email);
  await page.getByRole('button', { name: 'Save email' }).click();
  await expect(page.locator('dl.facts').textContent()).resolves.toContain(email);
  expect(await seriousViolations(page)).toEqual([]);
  await page.goto(`${app.url}/dashboard/members`);
  await page.getByLabel(/Find a member/).fill(email.toLowerCase());
  await page.getByRole('button', { name: 'Find' }).click();
  await page.waitForURL(`**/dashboard/members/${link.body.member_id}`);
  await context.close();
});

test('a viewer sees what was sent but not the body, whose links and codes act for the member', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject(),
    customer_email: `viewer.${Date.now()}@example.test` });
  await pay(link.body.url);
  const { rows: [m] } = await app.owner.query<{ id: string }>(
    `select id from billing.mail_messages where community_id = $1 and member_id = $2 order by id limit 1`, [shop.communityId, link.body.member_id]);
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/mail/${m.id}`);
  await page.getByText('only roles that may change members see it').waitFor();
  expect(await page.content()).not.toContain('/mail/portal/');
  expect((await context.request.get(`${app.url}/dashboard/mail/${m.id}?part=html`)).status()).toBe(403);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});
