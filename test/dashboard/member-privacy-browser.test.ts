// A member's export and erasure from the dashboard (issue 31 item 4), in a real browser
// with the keyboard alone: the member page's Export button downloads the JSON
// document; Erase member… opens a confirm step where a wrong id is refused beside the
// field and the right one erases; a viewer sees neither and is refused both. Each page
// is checked with axe-core.
import fs from 'node:fs';
import type { Browser } from 'playwright-core';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { Seed } from '../support/seed';

let app: TestApp;
let browser: Browser;
let shop: Tenant;
let ada: string;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  shop = await createTenant(app.owner);
  const seed = new Seed(app.owner, shop.communityId);
  const gold = await seed.tier({ name: 'Gold' });
  const plan = await seed.plan(gold, { name: 'Gold monthly' });
  ada = await seed.member({ discord: '700000000000000011', username: 'ada_privacy' });
  await seed.subscription(ada, plan, { status: 'active' });
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('an admin exports a member\'s data, then erases them after confirming, with the keyboard', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/members/${ada}`);
  expect(await seriousViolations(page)).toEqual([]);

  // Export: the button downloads the JSON document.
  await page.getByRole('button', { name: 'Export data (JSON)' }).focus();
  const [download] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('Enter')]);
  expect(download.suggestedFilename()).toBe(`${ada}-export.json`);
  const doc = JSON.parse(fs.readFileSync((await download.path())!, 'utf8'));
  expect(doc).toMatchObject({ format: 'member-export/1', member: { id: ada, identities: [{ platform_uid: '700000000000000011', username: 'ada_privacy' }] } });

  // Erase: the confirm step, a wrong id refused beside the field, then the right one.
  await page.getByRole('button', { name: 'Erase member…' }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: `Erase member ${ada}` }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await page.getByLabel('Type the member id to confirm').focus();
  await page.keyboard.type('mem_wrong');
  await page.keyboard.press('Enter');
  await page.getByRole('alert').waitFor();
  expect(await page.getByRole('alert').textContent()).toContain('This is not the member id');
  expect(await page.getByLabel('Type the member id to confirm').getAttribute('aria-invalid')).toBe('true');
  expect(await seriousViolations(page)).toEqual([]);
  expect((await app.owner.query('select erased_at from billing.members where community_id = $1 and id = $2', [shop.communityId, ada])).rows[0].erased_at).toBeNull();

  await page.getByLabel('Type the member id to confirm').focus();
  await page.keyboard.type(ada);
  await page.keyboard.press('Enter');
  await page.getByText('The member is erased').waitFor();
  expect(page.url()).toBe(`${app.url}/dashboard/members/${ada}?done=erased`);
  expect(await page.locator('.facts').textContent()).not.toContain('ada_privacy');
  expect(await page.getByText(/personal data was erased on/).count()).toBe(1);
  expect(await page.getByRole('button', { name: 'Erase member…' }).count()).toBe(0);
  expect(await seriousViolations(page)).toEqual([]);
  const { rows: [m] } = await app.owner.query('select erased_at from billing.members where community_id = $1 and id = $2', [shop.communityId, ada]);
  expect(m.erased_at).not.toBeNull();
  const subs = await app.owner.query('select status from billing.subscriptions where community_id = $1 and member_id = $2', [shop.communityId, ada]);
  expect(subs.rows.map((r) => r.status)).toEqual(['cancelled']);
  await context.close();
});

test('a viewer is offered neither, and is refused both', async () => {
  const seed = new Seed(app.owner, shop.communityId);
  const grace = await seed.member({ telegram: '800000011', username: 'grace_privacy' });
  const { context, page } = await newPage(browser);
  await signInAs(page, app, shop.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/members/${grace}`);
  expect(await page.getByRole('button', { name: 'Export data (JSON)' }).count()).toBe(0);
  expect(await page.getByRole('button', { name: 'Erase member…' }).count()).toBe(0);
  const exported = await page.request.get(`${app.url}/dashboard/members/${grace}/export`);
  expect(exported.status()).toBe(403);
  expect(await exported.text()).toContain('Your role (viewer) cannot do this.');
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const erased = await page.request.post(`${app.url}/dashboard/members/${grace}/erase`, { form: { csrf, confirm: grace } });
  expect(erased.status()).toBe(403);
  expect(await erased.text()).toContain('Your role (viewer) cannot do this.');
  expect((await app.owner.query('select erased_at from billing.members where community_id = $1 and id = $2', [shop.communityId, grace])).rows[0].erased_at).toBeNull();
  await context.close();
});
