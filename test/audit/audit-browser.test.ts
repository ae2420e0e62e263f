// The dashboard's door and the Audit page (issue 31 item 3), in a real browser: a key
// an admin creates is in the log with the operator, the dashboard session and the
// request's X-Request-Id; the page filters by table, actor and day, opens a change
// from the keyboard, pages, and has no serious accessibility violation.
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';

let app: TestApp;
let browser: Browser;
let t: Tenant;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp(), launchBrowser()]);
  t = await createTenant(app.owner);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('a key created in the dashboard is read back on the Audit page, from the keyboard', async () => {
  const { context, page } = await newPage(browser);
  const email = await signInAs(page, app, t.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/keys`);
  await page.getByLabel('Name').fill('from the dashboard');
  await page.getByLabel('plans:read').check();
  const [post] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/dashboard/keys')),
    page.getByRole('button', { name: 'Create key' }).click(),
  ]);
  const requestId = (await post.allHeaders())['x-request-id'];
  expect(requestId).toMatch(/^[0-9a-f-]{36}$/);

  const { rows: [line] } = await app.owner.query(`select l.actor_type, l.actor_id, l.key_id, l.request_id, l.after->>'name' as name,
      (select u.email from billing_private.operator_users u where u.id = l.actor_id) as email,
      (select s.user_id from billing_private.operator_sessions s where s.id = l.key_id) as session_user_id
    from billing.audit_log l where l.community_id = $1 and l.table_name = 'api_keys' and l.operation = 'insert' and l.after->>'name' = 'from the dashboard'`, [t.communityId]);
  expect(line).toEqual({ actor_type: 'operator', actor_id: expect.stringMatching(/^opu_/), key_id: expect.stringMatching(/^ops_/),
    request_id: requestId, name: 'from the dashboard', email, session_user_id: line.actor_id });

  await page.goto(`${app.url}/dashboard`);
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.getByLabel('table').selectOption('api_keys');
  await page.getByLabel('actor type').selectOption('operator');
  const today = new Date().toISOString().slice(0, 10);
  await page.getByLabel('From (day)').fill(today);
  await page.getByLabel('To (day)').fill(today);
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.waitForURL(/\/dashboard\/audit\?/);
  const rows = page.locator('main table tbody tr');
  expect(await rows.count()).toBe(1);
  await expect(rows.first().textContent()).resolves.toContain(requestId);
  expect(await seriousViolations(page)).toEqual([]);

  // The change opens from the keyboard: its summary is focusable and toggles with Enter.
  const summary = rows.first().locator('summary');
  await summary.focus();
  await page.keyboard.press('Enter');
  expect(await rows.first().locator('details').getAttribute('open')).not.toBeNull();
  await expect(rows.first().locator('details dl').textContent()).resolves.toMatch(/name"from the dashboard"/);
  await expect(rows.first().locator('details').textContent()).resolves.not.toMatch(/key_hash/);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('a viewer reads the log too (audit:read), page by page', async () => {
  for (let i = 0; i < 30; i++) await app.owner.query(`insert into billing.entitlements (community_id, key, name) values ($1, $2, 'E')`, [t.communityId, `e${i}`]);
  const { context, page } = await newPage(browser);
  await signInAs(page, app, t.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/audit?table=entitlements`);
  expect(await page.locator('main table tbody tr').count()).toBe(25);
  await page.getByRole('link', { name: 'Next page →' }).click();
  await page.waitForURL(/[?&]cursor=/); // the next page, not the first while the browser leaves it
  expect(await page.locator('main table tbody tr').count()).toBe(5);
  // A filter the operation refuses is a problem page, not a crash.
  await page.goto(`${app.url}/dashboard/audit?table=nope`);
  await expect(page.getByRole('alert').textContent()).resolves.toMatch(/table/);
  await context.close();
});
