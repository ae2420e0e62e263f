// The unsubscribe page and the Mail page's side of it in a real browser (issue 30 item 2;
// docs/decisions/mail-unsubscribe.md): a member opens the link of a trial reminder,
// unsubscribes and subscribes again with the keyboard alone, axe finding nothing
// serious; the operator's Mail page shows the message made after as skipped, and marks
// the yearly renewal reminder required.
import crypto from 'node:crypto';
import pg from 'pg';
import type { Browser } from 'playwright-core';
import { fillLinks, unsubscribeLink } from '../../src/domain/mail/mail-links';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { startApp, TestApp, TEST_WORKER_DB } from '../support/app';
import { advance, checkout, createShop, externalSubject, pay, Shop } from '../support/shop';

const KEY = crypto.randomBytes(32).toString('base64');
let app: TestApp;
let browser: Browser;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp({ webhookEncryptionKey: KEY }), launchBrowser()]);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

/** A yearly member (a 7-day trial) with an email, five days in: the trial reminder is made. */
async function trialReminder(shop: Shop, before: (memberId: string) => Promise<unknown> = async () => {}) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-annual'], subject: externalSubject(),
    customer_email: `kbd.${crypto.randomBytes(4).toString('hex')}@example.test` });
  await pay(link.body.url);
  await before(link.body.member_id);
  await advance(app, shop, 5);
  await app.owner.query('select billing_private.mail_reminders($1)', [shop.communityId]);
  const { rows: [m] } = await app.owner.query<{ id: string; text_body: string }>(
    `select id, text_body from billing.mail_messages where community_id = $1 and member_id = $2 and template = 'trial_ending'`,
    [shop.communityId, link.body.member_id]);
  return { memberId: link.body.member_id as string, message: m };
}

const unsubscribed = async (shop: Shop, memberId: string) => (await app.owner.query(
  'select template from billing.mail_unsubscribes where community_id = $1 and member_id = $2', [shop.communityId, memberId])).rows.map((r) => r.template);

test('a member unsubscribes and subscribes again with the keyboard alone; axe finds nothing serious', async () => {
  const shop = await createShop(app);
  const { memberId, message } = await trialReminder(shop);
  const text = fillLinks(message.text_body, { baseUrl: app.url, key: KEY, communityId: shop.communityId, memberId, template: 'trial_ending' }, false);
  const url = /(http:\/\/\S+\/mail\/unsubscribe\/\S+)/.exec(text)![1];
  const { context, page } = await newPage(browser);
  await page.goto(url);
  await page.getByRole('heading', { level: 1, name: 'Email preferences' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);

  // Tab reaches the button, which shows its focus; Enter presses it.
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => {
    const el = document.activeElement as HTMLElement;
    return { text: el.textContent, outline: getComputedStyle(el).outlineStyle };
  });
  expect(focused).toEqual({ text: 'Unsubscribe from Trial ending in 3 days emails', outline: 'solid' });
  await Promise.all([page.waitForURL(/done=1/), page.keyboard.press('Enter')]);
  await expect(page.getByRole('status').textContent()).resolves.toMatch(/^You are unsubscribed from Trial ending in 3 days emails from Test community \d+\./);
  expect(await unsubscribed(shop, memberId)).toEqual(['trial_ending']);
  expect(await seriousViolations(page)).toEqual([]);

  await page.keyboard.press('Tab');
  expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Subscribe again');
  await page.keyboard.press('Enter');
  await page.getByText('You are subscribed to Trial ending in 3 days emails').waitFor();
  expect(await unsubscribed(shop, memberId)).toEqual([]);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('the Mail page shows a message its member unsubscribed from as skipped, and marks a reminder required', async () => {
  const shop = await createShop(app);
  const { message } = await trialReminder(shop, (memberId) =>
    fetch(unsubscribeLink(app.url, KEY, shop.communityId, memberId, 'trial_ending'), { method: 'POST', body: new URLSearchParams({ 'List-Unsubscribe': 'One-Click' }) }));
  // The worker's claim, as the worker's login runs it: the message is skipped, not sent.
  const worker = new pg.Client({ connectionString: TEST_WORKER_DB() });
  await worker.connect();
  await worker.query('select * from billing_private.mail_claim($1, $2)', [shop.communityId, [message.id]]).finally(() => worker.end());

  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/mail`);
  const row = page.locator('tr', { hasText: 'Your free trial at' });
  await expect(row.textContent()).resolves.toContain('skipped: the member unsubscribed');
  expect(await seriousViolations(page)).toEqual([]);

  const receipt = page.locator('tr', { hasText: 'Receipt (invoice paid)' });
  await expect(receipt.textContent()).resolves.toContain('transactional');
  expect(await receipt.getByRole('button', { name: 'Mark required' }).count()).toBe(0);
  const renewal = page.locator('tr', { hasText: 'Yearly renewal in 7 days' });
  await expect(renewal.textContent()).resolves.toContain('optional: members may unsubscribe');
  await renewal.getByRole('button', { name: 'Mark required' }).click();
  await expect(page.locator('tr', { hasText: 'Yearly renewal in 7 days' }).textContent()).resolves.toContain('required here (no unsubscribe)');
  const { rows } = await app.owner.query('select mail_templates_required from billing.communities where id = $1', [shop.communityId]);
  expect(rows[0].mail_templates_required).toEqual(['renewal_upcoming']);
  await page.locator('tr', { hasText: 'Yearly renewal in 7 days' }).getByRole('button', { name: 'Let members unsubscribe' }).click();
  await expect(page.locator('tr', { hasText: 'Yearly renewal in 7 days' }).textContent()).resolves.toContain('optional: members may unsubscribe');

  await page.goto(`${app.url}/dashboard/mail/${message.id}`);
  await expect(page.locator('dl.facts').textContent()).resolves.toMatch(/trial_ending \(optional: carries an unsubscribe link\)[\s\S]*skipped: the member unsubscribed/);
  await context.close();
});
