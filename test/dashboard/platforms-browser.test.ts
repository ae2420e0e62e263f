// Deliveries shown to operators (issue 29 item 5), in a real browser: the Platforms page
// lists each connection with its health (token set, never the token; last success,
// last error; benefits waiting) and the calls made, newest first and paged; the member
// page shows each benefit's delivery and retries it from the keyboard. Reads run as the
// operator's session under RLS: another community's rows never show.
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { startApp, TestApp } from '../support/app';
import { deliveryWorld, DeliveryWorld, queuedJob, TOKEN } from '../platforms/delivery-views-fixture';

let app: TestApp;
let browser: Browser;
let w: DeliveryWorld;
let other: DeliveryWorld;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  [w, other] = await Promise.all([deliveryWorld(app.owner), deliveryWorld(app.owner)]);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('the Platforms page shows each connection\'s health and the calls made, never the token', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, w.tenant.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard`);
  // Reached from the navigation with the keyboard.
  await page.getByRole('link', { name: 'Platforms' }).focus();
  await page.keyboard.press('Enter');
  await page.waitForURL('**/dashboard/platforms');
  expect(await page.locator('a[aria-current=page]').textContent()).toBe('Platforms');
  const rows = page.locator('h2:has-text("Connections") + table tbody tr');
  expect(await rows.count()).toBe(2);
  const discordRow = (await rows.filter({ hasText: 'Main server' }).innerText()).replace(/\s+/g, ' ');
  expect(discordRow).toContain('Main server');
  expect(discordRow).toContain('guild 111222333444555666');
  expect(discordRow).toContain('set (its own)');
  expect(discordRow).toMatch(/\d{4}-\d\d-\d\dT.*add_channel_overwrite/);
  expect(discordRow).toContain('add_role (HTTP 403)');
  expect(discordRow).toContain(w.errors.role);
  expect(discordRow).toContain('0 pending, 0 failed, 1 action required');
  const telegramRow = (await rows.filter({ hasText: 'Members chat' }).innerText()).replace(/\s+/g, ' ');
  expect(telegramRow).toContain('chat -1001234567890');
  expect(telegramRow).toContain('none: deliveries wait');
  expect(telegramRow).toMatch(/never none 0 pending, 0 failed, 1 action required/);
  const content = await page.content();
  expect(content).not.toContain(TOKEN);
  expect(content).not.toContain(other.discord);
  const actions = page.locator('h2:has-text("Recent actions") ~ table tbody tr');
  expect((await actions.allInnerTexts()).map((t) => t.split('\t')[3])).toEqual(['add_role', 'add_channel_overwrite']);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('the action log pages newest first and filters by connection', async () => {
  const c = w.tenant.communityId;
  await app.owner.query(`insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome, status_code, error)
    select $1, $2, $3, 'send_invite', 'chat -1001234567890 user ' || i, 'retry', 502, 'Telegram failed (HTTP 502); retrying.' from generate_series(1, 30) i`,
  [c, w.memberId, w.telegram]);
  const { context, page } = await newPage(browser);
  await signInAs(page, app, c, 'viewer');
  await page.goto(`${app.url}/dashboard/platforms`);
  const targets = async () => (await page.locator('h2:has-text("Recent actions") ~ table tbody tr').allInnerTexts()).map((t) => t.split('\t')[4]);
  const first = await targets();
  expect(first).toHaveLength(25);
  expect(first[0]).toBe('chat -1001234567890 user 30');
  await page.getByRole('link', { name: 'Next page →' }).click();
  // The next page, not the table while the browser is still leaving the first (CI read
  // an empty table once).
  await page.waitForURL(/[?&]cursor=/);
  expect(await targets()).toEqual(['chat -1001234567890 user 5', 'chat -1001234567890 user 4', 'chat -1001234567890 user 3',
    'chat -1001234567890 user 2', 'chat -1001234567890 user 1', 'role 900000000000000001 user 555000111', 'channel 900000000000000002 user 555000111']);
  await page.goto(`${app.url}/dashboard/platforms`);
  await page.getByLabel('Connection').selectOption({ label: 'Main server' });
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/platform_config_id=/);
  expect(await targets()).toEqual(['role 900000000000000001 user 555000111', 'channel 900000000000000002 user 555000111']);
  const telegramRow = (await page.locator('h2:has-text("Connections") + table tbody tr', { hasText: 'Members chat' }).innerText()).replace(/\s+/g, ' ');
  expect(telegramRow).toContain('send_invite (HTTP 502) Telegram failed (HTTP 502); retrying.');
  await context.close();
});

test('the member page shows each benefit\'s delivery, and an admin retries from the keyboard', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, w.tenant.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/members/${w.memberId}`);
  const rows = (await page.locator('h2:has-text("Benefit deliveries") + table tbody tr').allInnerTexts()).map((t) => t.split('\t'));
  expect(rows.map((r) => [r[1], r[2], r[3], r[5]])).toEqual([
    ['discord', 'channel 900000000000000002', 'delivered', ''],
    ['discord', 'role 900000000000000001', 'action required', w.errors.role],
    ['telegram', 'chat -1001234567890', 'action required', w.errors.chat]]);
  expect(await seriousViolations(page)).toEqual([]);
  expect(await queuedJob(app.owner, w)).toBeNull();
  await page.getByRole('button', { name: 'Retry deliveries' }).focus();
  await page.keyboard.press('Enter');
  await page.getByText('The member\'s deliveries are queued').waitFor();
  // Queued (or, in a shared database, already taken by another test file's delivery worker).
  const job = await queuedJob(app.owner, w);
  const { rows: [{ attempts }] } = await app.owner.query<{ attempts: number }>(
    `select attempts from billing.benefit_deliveries where community_id = $1 and member_id = $2 and type = 'role'`, [w.tenant.communityId, w.memberId]);
  expect(job !== null || attempts > 1).toBe(true);
  await context.close();
});

test('a viewer sees the deliveries but no Retry, and a forged retry is refused', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, other.tenant.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/members/${other.memberId}`);
  expect(await page.locator('h2:has-text("Benefit deliveries") + table').textContent()).toContain(other.errors.role);
  expect(await page.getByRole('button', { name: 'Retry deliveries' }).count()).toBe(0);
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const res = await page.request.post(`${app.url}/dashboard/members/${other.memberId}/deliveries/retry`, { form: { csrf } });
  expect(res.status()).toBe(403);
  expect(await queuedJob(app.owner, other)).toBeNull();
  await context.close();
});
