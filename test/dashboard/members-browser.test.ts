// Members as people on the dashboard (issue 31 item 2), in a real browser: an operator
// finds a member by Discord username with the search box, opens it and writes its note
// and tags with the keyboard alone; a refused field shows its problem beside it; the
// list's filters narrow it; a viewer reads the note but cannot change it. Each page is
// checked with axe-core.
import type { Browser, Page } from 'playwright-core';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { Seed } from '../support/seed';

let app: TestApp;
let browser: Browser;
let shop: Tenant;
let ada: string, byron: string, gold: string;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createTenant(app.owner);
  const seed = new Seed(app.owner, shop.communityId);
  gold = await seed.tier({ name: 'Gold' });
  const plan = await seed.plan(gold, { name: 'Gold monthly' });
  ada = await seed.member({ discord: '700000000000000001', username: 'ada_lovelace' });
  byron = await seed.member({ discord: '700000000000000002', username: 'ada_byron' });
  await seed.member({ telegram: '800000001', username: 'grace_h' });
  await seed.subscription(ada, plan, { status: 'active' });
});
afterAll(async () => { await browser?.close(); await app?.close(); });

const focused = (page: Page) => page.evaluate(() => document.activeElement?.id ?? null);

test('an operator finds a member by Discord username and writes its note and tags with the keyboard', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/members`);
  expect(await page.locator('tbody tr').count()).toBe(3);
  expect(await seriousViolations(page)).toEqual([]);

  // The search box, by keyboard: type part of the username in any case, Enter.
  await page.getByLabel(/^Find a member/).focus();
  await page.keyboard.type('ADA_LOVE');
  await page.keyboard.press('Enter');
  await page.waitForURL('**/dashboard/members?**q=ADA_LOVE**');
  const rows = page.locator('tbody tr');
  expect(await rows.count()).toBe(1);
  await expect(rows.first().textContent()).resolves.toContain(ada);
  expect(await seriousViolations(page)).toEqual([]);

  // The display name is the link; Enter on it opens the member.
  await page.getByRole('link', { name: 'ada_lovelace' }).focus();
  await page.keyboard.press('Enter');
  await page.waitForURL(`**/dashboard/members/${ada}`);
  await expect(page.locator('h1').textContent()).resolves.toBe('ada_lovelace');

  await page.getByLabel(/^Note \(operators only/).focus();
  await page.keyboard.type('Asked for an invoice copy.');
  await page.keyboard.press('Enter');
  await page.keyboard.type('Prefers DMs.');
  await page.keyboard.press('Tab');
  expect(await focused(page)).toBe('m-tags');
  await page.keyboard.type('VIP, Early Bird');
  await page.keyboard.press('Tab');
  await expect(page.evaluate(() => document.activeElement?.textContent)).resolves.toBe('Save note and tags');
  await page.keyboard.press('Enter');
  await page.waitForURL(`**/dashboard/members/${ada}?done=updated`);
  await expect(page.getByRole('status').textContent()).resolves.toBe('Saved.');
  await expect(page.getByTestId('member-note').innerText()).resolves.toBe('Asked for an invoice copy.\nPrefers DMs.');
  await expect(page.getByTestId('member-tags').locator('li').allTextContents()).resolves.toEqual(['early-bird', 'vip']);
  const api = await call(app.url, 'GET', `/v1/members/${ada}`, { key: shop.key });
  expect(api.body).toMatchObject({ note: 'Asked for an invoice copy.\nPrefers DMs.', tags: ['early-bird', 'vip'], display_name: 'ada_lovelace' });
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('a refused tag is shown beside its field, with what was typed kept', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/members/${byron}`);
  await page.getByLabel(/^Note \(operators only/).focus();
  await page.keyboard.type('Kept while the tags are fixed.');
  await page.getByLabel(/^Tags/).focus();
  await page.keyboard.type('fine, not fine!');
  await page.keyboard.press('Enter');
  await page.waitForURL(`**/dashboard/members/${byron}/notes`);
  const tags = page.getByLabel(/^Tags/);
  await expect(tags.getAttribute('aria-invalid')).resolves.toBe('true');
  await expect(page.locator('#m-tags-problem').textContent()).resolves.toMatch(/letters, digits and - _ \. : \/ only/);
  await expect(tags.getAttribute('aria-describedby')).resolves.toContain('m-tags-problem');
  await expect(tags.inputValue()).resolves.toBe('fine, not fine!');
  await expect(page.getByLabel(/^Note \(operators only/).inputValue()).resolves.toBe('Kept while the tags are fixed.');
  expect(await seriousViolations(page)).toEqual([]);
  expect((await call(app.url, 'GET', `/v1/members/${byron}`, { key: shop.key })).body).toMatchObject({ note: null, tags: [] });
  await context.close();
});

test('the list filters by status, tier and tag, and a refused filter shows its problem beside it', async () => {
  await call(app.url, 'PATCH', `/v1/members/${byron}`, { key: shop.key, body: { tags: ['press'] } });
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/members`);
  await page.getByLabel('Subscription status').selectOption('active');
  await page.getByLabel('Tier').selectOption({ label: 'Gold' });
  await page.getByLabel('Tag').press('Enter');
  await page.waitForURL(`**/dashboard/members?**tier_id=${gold}**`);
  await expect(page.locator('tbody').textContent()).resolves.toContain('ada_lovelace');
  expect(await page.locator('tbody tr').count()).toBe(1);
  expect(await seriousViolations(page)).toEqual([]);

  await page.goto(`${app.url}/dashboard/members?tag=Press`);
  expect(await page.locator('tbody tr').count()).toBe(1);
  await expect(page.locator('tbody').textContent()).resolves.toContain('ada_byron');

  const refused = await page.goto(`${app.url}/dashboard/members?tag=${encodeURIComponent('no good!')}`);
  expect(refused?.status()).toBe(422);
  await expect(page.getByLabel('Tag').getAttribute('aria-invalid')).resolves.toBe('true');
  await expect(page.locator('#f-tag-problem').textContent()).resolves.toMatch(/only/);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('a viewer reads the note and tags but gets no form, and a forged post is refused', async () => {
  await call(app.url, 'PATCH', `/v1/members/${byron}`, { key: shop.key, body: { note: 'Seen by viewers.', tags: ['press'] } });
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/members/${byron}`);
  await expect(page.getByTestId('member-note').textContent()).resolves.toBe('Seen by viewers.');
  expect(await page.getByLabel(/^Note \(operators only/).count()).toBe(0);
  const csrf = await page.locator('input[name="csrf"]').first().inputValue();
  const res = await page.request.post(`${app.url}/dashboard/members/${byron}/notes`, { form: { csrf, note: 'changed', tags: '' } });
  expect(res.status()).toBe(403);
  expect(await res.text()).toContain('Your role (viewer) cannot do this.');
  expect((await call(app.url, 'GET', `/v1/members/${byron}`, { key: shop.key })).body.note).toBe('Seen by viewers.');
  await context.close();
});
