// The operator dashboard in a real browser (issue 16): signing in by link and by
// password, creating and revoking an API key, a viewer refused, every page free of
// serious accessibility violations.
import crypto from 'node:crypto';
import type { Browser } from 'playwright-core';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { refillBrowserSignIns, signInAs } from '../support/dashboard';
import { createTenant, startApp, TestApp, Tenant } from '../support/app';

let app: TestApp;
let browser: Browser;
let tenant: Tenant;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp({ webhookEncryptionKey: crypto.randomBytes(32).toString('base64') }), launchBrowser()]);
  tenant = await createTenant(app.owner);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

test('an operator signs in by link, sets a password, signs out and back in with it', async () => {
  const { context, page } = await newPage(browser);
  const email = await signInAs(page, app, tenant.communityId, 'owner');
  await page.getByLabel(/New password/).fill('a long enough password');
  await page.getByRole('button', { name: 'Save password' }).click();
  await page.getByText('Your password is set').waitFor();
  const cookie = (await context.cookies()).find((c) => c.name === 'billing_session')!;
  expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/dashboard' });
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL('**/dashboard/sign-in');
  await page.goto(`${app.url}/dashboard/keys`);
  await page.waitForURL(/sign-in\?next=/);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a long enough password');
  await refillBrowserSignIns(app);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL('**/dashboard/keys');
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});

test('an admin creates a key (shown once, working) and revokes it', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/keys`);
  await page.getByLabel('Name').fill('ci bot');
  await page.getByLabel('plans:read').check();
  await page.getByRole('button', { name: 'Create key' }).click();
  const key = (await page.getByTestId('new-key').textContent())!.trim();
  expect((await fetch(`${app.url}/v1/plans`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
  expect(await seriousViolations(page)).toEqual([]);
  await page.goto(`${app.url}/dashboard/keys`);
  expect(await page.getByTestId('new-key').count()).toBe(0);
  await page.getByRole('button', { name: `Revoke ${key.slice(0, 11)}` }).click();
  await page.getByText('The key is revoked').waitFor();
  expect((await fetch(`${app.url}/v1/plans`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);
  await context.close();
});

test('a viewer sees no actions, and a forged write is refused by the database', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/keys`);
  expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
  // The form a viewer is not shown, posted anyway with the session's own CSRF token.
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const res = await page.request.post(`${app.url}/dashboard/keys`, { form: { csrf, scopes: 'plans:read' } });
  expect(res.status()).toBe(403);
  expect(await res.text()).toContain('Your role (viewer) cannot do this.');
  const noCsrf = await page.request.post(`${app.url}/dashboard/keys/${tenant.keyId}/revoke`, { form: {} });
  expect(noCsrf.status()).toBe(403);
  await context.close();
});

test('every dashboard page renders for a viewer without serious accessibility violations', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'viewer');
  for (const path of ['/dashboard', '/dashboard/subscriptions', '/dashboard/purchases', '/dashboard/invoices', '/dashboard/members',
    '/dashboard/catalog', '/dashboard/keys', '/dashboard/webhooks', '/dashboard/events', '/dashboard/settings']) {
    const res = await page.goto(`${app.url}${path}`);
    expect([path, res!.status()]).toEqual([path, 200]);
    expect([path, await seriousViolations(page)]).toEqual([path, []]);
  }
  await context.close();
});

test('bad input shows a clear message with a 4xx status, never a 500', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'admin');
  const get = async (path: string) => { const r = await page.request.get(`${app.url}${path}`); return [r.status(), await r.text()] as const; };
  const [badStatus, badText] = await get('/dashboard/subscriptions?status=bogus');
  expect(badStatus).toBe(422);
  expect(badText).toContain('Invalid status');
  expect((await get('/dashboard/invoices?cursor=%%%'))[0]).toBe(400);
  expect((await get('/dashboard/members/mem_00000000000000000000000000'))[0]).toBe(404);
  expect((await get('/dashboard/no-such-page'))[0]).toBe(404);
  await page.goto(`${app.url}/dashboard/keys`);
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const noScopes = await page.request.post(`${app.url}/dashboard/keys`, { form: { csrf, name: 'x' } });
  expect(noScopes.status()).toBe(422);
  expect(await noScopes.text()).toContain('scopes');
  const badHook = await page.request.post(`${app.url}/dashboard/webhooks`, { form: { csrf, url: 'not a url' } });
  expect(badHook.status()).toBe(422);
  await context.close();
});

test('an owner invites an operator whose link signs in; admins cannot manage operators; the last owner stays', async () => {
  const shop = await createTenant(app.owner);
  const { context, page } = await newPage(browser);
  const ownerEmail = await signInAs(page, app, shop.communityId, 'owner');
  await page.goto(`${app.url}/dashboard/operators`);
  await page.getByLabel('Email').fill('new-admin@example.com');
  await page.locator('#o-role').selectOption('admin');
  await page.getByRole('button', { name: 'Invite' }).click();
  const link = (await page.getByTestId('invite-link').textContent())!.trim();
  expect(await seriousViolations(page)).toEqual([]);
  // The only owner cannot make itself an admin.
  const ownerRow = page.locator('tr', { hasText: ownerEmail });
  await ownerRow.locator('select').selectOption('admin');
  await ownerRow.getByRole('button', { name: `Save role of ${ownerEmail}` }).click();
  expect(await page.getByRole('alert').textContent()).toContain('A community keeps at least one enabled owner');

  const other = await newPage(browser);
  await other.page.goto(link);
  await refillBrowserSignIns(app);
  await other.page.getByRole('button', { name: 'Sign in' }).click();
  await other.page.waitForURL('**/dashboard/account');
  expect(await other.page.locator('.who').textContent()).toContain('new-admin@example.com · admin');
  expect(await other.page.getByRole('link', { name: 'Operators' }).count()).toBe(0);
  const refused = await other.page.goto(`${app.url}/dashboard/operators`);
  expect(refused!.status()).toBe(403);
  await other.context.close();
  await context.close();
});
