// Issue 31 item 6 in a real browser: an operator sets up a second factor with the
// keyboard alone (a wrong code shows its error beside the field), gets recovery codes,
// then signs in with a link and a code; the pages are axe-clean, and so are the owner's
// Operators page (sessions, removing, the requirement) and the account's sessions list.
import type { Browser, Locator, Page } from 'playwright-core';
import { Secret, TOTP } from 'otpauth';
import { inviteOperator, signInLink } from '../../src/domain/operators/operator-accounts';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { refillBrowserSignIns, signInAs } from '../support/dashboard';
import { createTenant, startApp, TestApp, Tenant } from '../support/app';
import { ENCRYPTION_KEY } from '../support/webhooks';

let app: TestApp;
let browser: Browser;
let tenant: Tenant;
jest.setTimeout(120_000);

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp({ webhookEncryptionKey: ENCRYPTION_KEY }), launchBrowser()]);
  tenant = await createTenant(app.owner);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

const code = (secret: string, steps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: Date.now() + steps * 30_000 });

/** Presses Tab until the target has the focus (unless it has it already, autofocus): it is reachable with the keyboard. */
async function tabTo(page: Page, target: Locator, max = 60): Promise<void> {
  await target.waitFor();
  if (await target.evaluate((el) => el === document.activeElement)) return;
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if (await target.evaluate((el) => el === document.activeElement)) return;
  }
  throw new Error('not reachable with Tab');
}

test('an operator sets up TOTP with the keyboard, then signs in with a link and a code', async () => {
  const { context, page } = await newPage(browser);
  const email = await signInAs(page, app, tenant.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/account/second-factor`);
  expect(await seriousViolations(page)).toEqual([]);
  await tabTo(page, page.getByRole('button', { name: 'Set up a second factor' }));
  await page.keyboard.press('Enter');
  const secretText = page.getByTestId('totp-secret');
  await secretText.waitFor();
  const secret = (await secretText.textContent())!.replace(/\s+/g, '');
  await expect(page.getByTestId('totp-uri').getAttribute('href')).resolves.toMatch(/^otpauth:\/\/totp\/.*secret=/);
  expect(await seriousViolations(page)).toEqual([]);

  // A wrong code: the error is beside the field, tied to it.
  const field = page.getByLabel('The 6-digit code the app shows now');
  await tabTo(page, field);
  await page.keyboard.type(code(secret) === '000000' ? '111111' : '000000');
  await page.keyboard.press('Enter');
  await page.getByText('That code is not right').waitFor();
  const wrongField = page.getByLabel('The 6-digit code the app shows now');
  await expect(wrongField.getAttribute('aria-invalid')).resolves.toBe('true');
  const describedBy = (await wrongField.getAttribute('aria-describedby'))!;
  await expect(page.locator(`#${describedBy}`).textContent()).resolves.toMatch(/not right/);
  expect(await seriousViolations(page)).toEqual([]);

  await tabTo(page, wrongField);
  await page.keyboard.type(code(secret));
  await page.keyboard.press('Enter');
  const codes = page.getByTestId('recovery-codes');
  await codes.waitFor();
  expect((await codes.textContent())!.trim().split('\n')).toHaveLength(10);
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();

  // A new sign-in (a link): the code is asked for, then the dashboard opens.
  const second = await newPage(browser);
  const invitation = await inviteOperator(app.owner, tenant.communityId, email, 'admin');
  await refillBrowserSignIns(app);
  await second.page.goto(signInLink(app.url, invitation.token));
  await tabTo(second.page, second.page.getByRole('button', { name: 'Sign in' }));
  await second.page.keyboard.press('Enter');
  await second.page.waitForURL('**/dashboard/second-factor?**');
  expect(await seriousViolations(second.page)).toEqual([]);
  await second.page.goto(`${app.url}/dashboard/subscriptions`);
  await second.page.waitForURL('**/dashboard/second-factor');
  await tabTo(second.page, second.page.getByLabel('Code', { exact: true }));
  await second.page.keyboard.type(code(secret, 1));
  await second.page.keyboard.press('Enter');
  await second.page.waitForURL('**/dashboard');
  await second.context.close();
});

test('the Operators page (sessions, removing, the requirement) and the account\'s sessions are axe-clean', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'owner');
  await page.goto(`${app.url}/dashboard/operators`);
  await page.getByRole('heading', { name: 'Signed in' }).waitFor();
  await page.getByLabel('Every operator must use a second factor (an authenticator app)').waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await page.goto(`${app.url}/dashboard/account`);
  await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
  await expect(page.locator('table').last().textContent()).resolves.toContain('this session');
  expect(await seriousViolations(page)).toEqual([]);
  await context.close();
});
