// Platform connections configured from the dashboard (issue 29 item 1), in a real
// browser: an admin adds a Discord connection with its bot token and client secret
// (write-only: never in the page), edits its settings, sees the database's problem
// beside the field it names, replaces and removes the token; the stored token is the
// ciphertext of what was entered (decrypted here with the service's key). A viewer sees
// no form, and a forged POST is refused by the role's scopes.
import crypto from 'node:crypto';
import type { Browser, Locator, Page } from 'playwright-core';
import { PlatformSecretBox } from '../../src/domain/catalog/platform-secrets';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { launchBrowser, newPage, seriousViolations } from '../support/browser';
import { signInAs } from '../support/dashboard';
import { asTenant } from '../support/tenant';

const ENCRYPTION_KEY = crypto.randomBytes(32).toString('base64');
const b64url = (n: number) => crypto.randomBytes(n).toString('base64url');
const discordToken = () => `${b64url(18)}.${b64url(4)}.${b64url(27)}`;
const TOKEN = discordToken();
const CLIENT_SECRET = b64url(24);
const GUILD = '111222333444555666';

let app: TestApp;
let browser: Browser;
let tenant: Tenant;

beforeAll(async () => {
  [app, browser] = await Promise.all([startApp({ webhookEncryptionKey: ENCRYPTION_KEY }), launchBrowser()]);
  tenant = await createTenant(app.owner);
});
afterAll(async () => { await browser?.close(); await app?.close(); });

async function connection(key: string) {
  const { rows } = await app.owner.query<{ id: string; name: string | null; platform: string; settings: Record<string, string> }>(
    'select id, name, platform, settings from billing.platform_configs where community_id = $1 and key = $2', [tenant.communityId, key]);
  return rows[0] ?? null;
}

/** The stored secrets of a connection, read as the owner: name to ciphertext. */
async function storedSecrets(id: string): Promise<Record<string, string>> {
  const { rows } = await app.owner.query<{ name: string; ciphertext: string }>(
    'select name, ciphertext from billing_private.platform_secrets where community_id = $1 and platform_config_id = $2', [tenant.communityId, id]);
  return Object.fromEntries(rows.map((r) => [r.name, r.ciphertext]));
}

const box = new PlatformSecretBox(ENCRYPTION_KEY);
const decrypt = (id: string, name: 'bot_token' | 'client_secret', ciphertext: string) => box.decrypt(tenant.communityId, id, name, ciphertext);

async function expectNoSecretShown(page: Page, ...secrets: string[]) {
  const content = await page.content();
  for (const s of secrets) expect(content).not.toContain(s);
  for (const value of await page.locator('input[type=password]').evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value))) {
    expect(value).toBe('');
  }
}

async function adminPage(): Promise<{ page: Page; close: () => Promise<void> }> {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'admin');
  await page.goto(`${app.url}/dashboard/platforms`);
  return { page, close: () => context.close() };
}

/** Submits a form and waits for the page it leads to (the same address again). */
async function submit(page: Page, button: Locator) {
  await Promise.all([page.waitForEvent('framenavigated'), button.click()]);
  await page.waitForLoadState();
}

/** The edit form of a connection (its details opened). */
async function editForm(page: Page, key: string) {
  const form = page.locator(`form[data-connection="${key}"]`);
  if (!(await form.isVisible())) await page.locator('details', { has: form }).locator('summary').click();
  return form;
}

test('an admin adds a Discord connection with its bot token: listed as set, never shown, stored encrypted', async () => {
  const { page, close } = await adminPage();
  const add = page.locator('form[method=post][action="/dashboard/platforms"]');
  await add.getByLabel('Key', { exact: true }).fill('main');
  await add.getByLabel('Platform', { exact: true }).selectOption('discord');
  await add.getByLabel('Name', { exact: true }).fill('Main server');
  await add.getByLabel('Server id (guild_id)').fill(GUILD);
  await add.getByLabel(/kick_on_revoke/).check();
  await add.getByLabel('Bot token', { exact: true }).fill(TOKEN);
  await add.getByLabel('Discord OAuth2 client secret').fill(CLIENT_SECRET);
  await submit(page, add.getByRole('button', { name: 'Add connection' }));
  await page.getByText('The connection is saved.').waitFor();

  const row = (await page.locator('h2:has-text("Connections") + table tbody tr', { hasText: 'Main server' }).innerText()).replace(/\s+/g, ' ');
  expect(row).toContain(`guild ${GUILD}`);
  expect(row).toContain('set (its own)');
  expect(await page.getByTestId('secrets-main').textContent()).toBe('bot token set, client secret set');
  await expectNoSecretShown(page, TOKEN, CLIENT_SECRET);
  expect(await seriousViolations(page)).toEqual([]);

  const c = await connection('main');
  expect(c).toMatchObject({ name: 'Main server', platform: 'discord', settings: { guild_id: GUILD, kick_on_revoke: 'true' } });
  const secrets = await storedSecrets(c.id);
  expect(secrets.bot_token).toMatch(/^v1:/);
  expect(secrets.bot_token).not.toContain(TOKEN);
  expect(decrypt(c.id, 'bot_token', secrets.bot_token)).toBe(TOKEN);
  expect(decrypt(c.id, 'client_secret', secrets.client_secret)).toBe(CLIENT_SECRET);

  // A Telegram chat, without a token of its own.
  await add.getByLabel('Key', { exact: true }).fill('chat');
  await add.getByLabel('Platform', { exact: true }).selectOption('telegram');
  await add.getByLabel('Name', { exact: true }).fill('Members chat');
  await add.getByLabel('Chat id or @channelname (chat_id)').fill('-1001234567890');
  await submit(page, add.getByRole('button', { name: 'Add connection' }));
  await page.getByText('The connection is saved.').waitFor();
  expect(await page.getByTestId('secrets-chat').textContent()).toBe('no bot token of its own');
  expect(await connection('chat')).toMatchObject({ platform: 'telegram', settings: { chat_id: '-1001234567890' } });
  expect(await storedSecrets((await connection('chat')).id)).toEqual({});
  await close();
});

test('an admin edits the settings; a blank secret field keeps the stored secret', async () => {
  const before = await connection('main');
  const stored = await storedSecrets(before.id);
  const { page, close } = await adminPage();
  const form = await editForm(page, 'main');
  expect(await form.getByLabel('Server id (guild_id)').inputValue()).toBe(GUILD);
  await form.getByLabel('Name', { exact: true }).fill('Main guild');
  await form.getByLabel('Application id (client_id)').fill('222333444555666777');
  await form.getByLabel('Public key (public_key)').fill('ab'.repeat(32));
  await form.getByLabel(/kick_on_revoke/).uncheck();
  await submit(page, form.getByRole('button', { name: 'Save Main server' }));
  await page.getByText('The connection is saved.').waitFor();
  expect(await connection('main')).toMatchObject({ id: before.id, name: 'Main guild',
    settings: { guild_id: GUILD, client_id: '222333444555666777', public_key: 'ab'.repeat(32) } });
  expect((await connection('main')).settings).not.toHaveProperty('kick_on_revoke');
  expect(await storedSecrets(before.id)).toEqual(stored);
  await close();
});

test('a bad guild_id or token shows the problem beside its field and changes nothing', async () => {
  const before = await connection('main');
  const stored = await storedSecrets(before.id);
  const { page, close } = await adminPage();
  let form = await editForm(page, 'main');
  await form.getByLabel('Server id (guild_id)').fill('my-server');
  await submit(page, form.getByRole('button', { name: 'Save Main guild' }));
  const problem = page.locator('form[data-connection="main"] [id$="-guild_id-problem"]');
  await problem.waitFor();
  // The database's message (billing.platform_settings_problem), beside the field it names.
  expect(await problem.innerText()).toBe('expected a Discord snowflake (the server id: digits, e.g. "1234567890123456789")');
  form = page.locator('form[data-connection="main"]');
  expect(await form.isVisible()).toBe(true);
  const field = form.getByLabel('Server id (guild_id)');
  expect(await field.getAttribute('aria-invalid')).toBe('true');
  expect(await field.inputValue()).toBe('my-server');
  expect(await seriousViolations(page)).toEqual([]);
  expect(await connection('main')).toEqual(before);

  // A malformed token: refused beside its field, never quoted back.
  const bad = `not-a-token-${b64url(6)}`;
  await field.fill(GUILD);
  await form.getByLabel('Bot token', { exact: true }).fill(bad);
  await submit(page, form.getByRole('button', { name: 'Save Main guild' }));
  const tokenProblem = form.locator('[id$="-bot_token-problem"]');
  await tokenProblem.waitFor();
  expect(await tokenProblem.innerText()).toMatch(/^Expected a Discord bot token/);
  await expectNoSecretShown(page, bad, TOKEN);
  expect(await storedSecrets(before.id)).toEqual(stored);
  await close();
});

test('an admin replaces the bot token, then removes it', async () => {
  const c = await connection('main');
  const { page, close } = await adminPage();
  const rotated = discordToken();
  let form = await editForm(page, 'main');
  await form.getByLabel('Bot token', { exact: true }).fill(rotated);
  await submit(page, form.getByRole('button', { name: 'Save Main guild' }));
  await page.getByText('The connection is saved.').waitFor();
  expect(decrypt(c.id, 'bot_token', (await storedSecrets(c.id)).bot_token)).toBe(rotated);
  await expectNoSecretShown(page, rotated, TOKEN);

  form = await editForm(page, 'main');
  await form.getByLabel('Remove the stored bot token').check();
  await submit(page, form.getByRole('button', { name: 'Save Main guild' }));
  await page.getByText('The connection is saved.').waitFor();
  expect(Object.keys(await storedSecrets(c.id))).toEqual(['client_secret']);
  expect(await page.getByTestId('secrets-main').textContent()).toBe('no bot token of its own, client secret set');
  expect(await seriousViolations(page)).toEqual([]);
  await close();
});

test('a viewer sees no form, and a forged POST is refused', async () => {
  const { context, page } = await newPage(browser);
  await signInAs(page, app, tenant.communityId, 'viewer');
  await page.goto(`${app.url}/dashboard/platforms`);
  expect(await page.locator('h2:has-text("Connections") + table tbody tr').count()).toBe(2);
  expect(await page.locator('form[method=post][action^="/dashboard/platforms"]').count()).toBe(0);
  expect(await page.locator('input[type=password]').count()).toBe(0);
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const added = await page.request.post(`${app.url}/dashboard/platforms`,
    { form: { csrf, key: 'forged', platform: 'telegram', chat_id: '-100999', bot_token: `123456:${b64url(30)}` } });
  expect(added.status()).toBe(403);
  expect(await added.text()).toContain('Your role (viewer) cannot do this.');
  const c = await connection('main');
  const edited = await page.request.post(`${app.url}/dashboard/platforms/${c.id}`,
    { form: { csrf, platform: 'discord', name: 'Forged', guild_id: GUILD, remove_client_secret: 'true' } });
  expect(edited.status()).toBe(403);
  expect(await connection('forged')).toBeNull();
  expect(await connection('main')).toEqual(c);
  expect(Object.keys(await storedSecrets(c.id))).toEqual(['client_secret']);
  await context.close();
});

test('the doors write the current community\'s connections only, and billing_api cannot write the tables itself', async () => {
  const c = await connection('main');
  const other = await createTenant(app.owner);
  const refused = (sql: string, values: unknown[], why: string | RegExp) => asTenant(app.owner, other.communityId,
    (db) => expect(db.query(sql, values)).rejects.toThrow(why), { role: 'billing_api' });
  await refused(`select billing_private.platform_secret_set($1, 'bot_token', 'v1:x')`, [c.id], `No platform connection ${c.id}.`);
  await refused(`select billing_private.platform_secret_set($1, 'bot_token', null)`, [c.id], `No platform connection ${c.id}.`);
  await refused(`select billing_api.platform_config_save($1)`, [{ id: c.id, name: 'Taken' }], `No platform connection ${c.id}.`);
  await refused(`update billing.platform_configs set name = 'Taken'`, [], /permission denied/);
  await refused(`delete from billing_private.platform_secrets`, [], /permission denied/);
  expect(await connection('main')).toEqual(c);
  expect(Object.keys(await storedSecrets(c.id))).toEqual(['client_secret']);
});
