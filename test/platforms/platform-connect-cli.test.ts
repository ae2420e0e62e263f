// `billing platforms connect` (issue 29 item 3): points a connection's bot at the
// service, run as an operator runs it (a process of its own). Telegram: setWebhook with
// the connection's derived secret, proved by an update the stand-in then delivers and
// the service accepts and acts on. Discord: the /link command registered as a global
// application command (checked against Discord's OpenAPI), and the URLs to enter in the
// Developer Portal printed.
import crypto from 'node:crypto';
import { applyCatalog, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { telegramWebhookSecret } from '../../src/domain/catalog/telegram-webhook-secret';
import { call, createTenant, startApp, TestApp } from '../support/app';
import { runCli, runFailing, runJson } from '../support/cli-process';
import { startDiscordServer, type DiscordServer } from '../support/discord-server';
import { startTelegramServer, type TelegramServer } from '../support/telegram-server';

const KEY = crypto.randomBytes(32).toString('base64');
const BOT = 'MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz012345';

let app: TestApp;
let discord: DiscordServer;
let telegram: TelegramServer;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  discord = await startDiscordServer({ token: BOT });
  telegram = await startTelegramServer({ acceptHttpWebhook: true });
  app = await startApp({ webhookEncryptionKey: KEY, telegramApiUrl: telegram.apiRoot, discordApiUrl: discord.url });
  env = { WEBHOOK_ENCRYPTION_KEY: KEY, TELEGRAM_API_URL: telegram.apiRoot, DISCORD_API_URL: discord.url, DISCORD_BOT_TOKEN: '', TELEGRAM_BOT_TOKEN: '' };
});
afterAll(async () => {
  await app.close();
  discord.assertClean();
  telegram.assertClean();
  await discord.close();
  await telegram.close();
});

async function community(platforms: unknown[]) {
  const tenant = await createTenant(app.owner);
  const ids = await applyCatalog(app.owner, tenant.communityId, parseCatalog({ platforms }), { encryptionKey: KEY });
  return { tenant, ids };
}

test('Telegram: the webhook is set with the connection\'s secret, and the updates it brings are accepted', async () => {
  const { tenant, ids } = await community([{ key: 'tg', platform: 'telegram', settings: { chat_id: '-1001', bot_token: telegram.token } }]);
  const pcfg = ids.platforms.tg;
  const out = await runJson(['platforms', 'connect', '--community', tenant.communityId, '--platform', 'tg', '--base-url', app.url], env);
  expect(out).toEqual({ platform_config_id: pcfg, platform: 'telegram', url: `${app.url}/platforms/telegram/${pcfg}/updates`, registered: ['message'], oauth2_redirect: null });
  expect(telegram.webhook).toEqual({ url: out.url, secretToken: telegramWebhookSecret(KEY, tenant.communityId, pcfg), allowedUpdates: ['message'] });

  // Telegram now calls the service with that secret: a member's /start <code> links them.
  const { rows: [m] } = await app.owner.query<{ id: string }>('insert into billing.members (community_id) values ($1) returning id', [tenant.communityId]);
  const code = await call(app.url, 'POST', `/v1/members/${m.id}/link-codes`, { key: tenant.key, body: { intended_platform: 'telegram' } });
  expect(code.status).toBe(200);
  const user = telegram.addUser({ startedBot: true });
  const answered = await telegram.deliverUpdate(telegram.textUpdate(user, `/start ${code.body.code}`));
  expect(answered.status).toBe(200);
  const member = await call(app.url, 'GET', `/v1/members/${m.id}`, { key: tenant.key });
  expect(member.body.identities).toEqual([expect.objectContaining({ platform: 'telegram', platform_uid: String(user.id) })]);
});

test('Discord: /link is registered for the application and the portal settings are printed', async () => {
  const { tenant, ids } = await community([{ key: 'main', platform: 'discord', settings: {
    guild_id: '1', client_id: discord.application.id, bot_token: BOT, client_secret: discord.application.secret } }]);
  const pcfg = ids.platforms.main;
  const r = await runCli(['platforms', 'connect', '--community', tenant.communityId, '--platform', 'main', '--base-url', 'https://billing.example.com/'], env);
  expect(r.code).toBe(0);
  expect(r.stdout).toBe([
    `Discord command /link registered for ${pcfg}.`,
    `Set the application's Interactions Endpoint URL (Developer Portal, General Information) to: https://billing.example.com/platforms/discord/${pcfg}/interactions`,
    'Add this OAuth2 redirect (Developer Portal, OAuth2): https://billing.example.com/platforms/discord/oauth/callback',
    '',
  ].join('\n'));
  expect(discord.commands.get(discord.application.id)).toEqual([expect.objectContaining({
    name: 'link', type: 1, options: [expect.objectContaining({ type: 3, name: 'code', required: true })],
  })]);
  expect(r.stdout + r.stderr).not.toContain(BOT);
});

test('a connection without what it needs is refused with the reason', async () => {
  const { tenant } = await community([{ key: 'main', platform: 'discord', settings: { guild_id: '1', bot_token: BOT } }]);
  const base = ['platforms', 'connect', '--community', tenant.communityId, '--base-url', 'https://billing.example.com'];
  expect((await runFailing([...base, '--platform', 'main'], env)).message).toMatch(/needs settings\.client_id/);
  expect((await runFailing([...base, '--platform', 'nope'], env)).message).toMatch(/no platform connection "nope"/);
  expect((await runFailing(['platforms', 'connect', '--community', tenant.communityId, '--platform', 'main'], { ...env, PUBLIC_BASE_URL: '' })).message)
    .toMatch(/--base-url \(or PUBLIC_BASE_URL\)/);
});
