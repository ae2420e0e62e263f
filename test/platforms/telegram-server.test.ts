// The local Bot API stand-in (test/support/telegram-server.ts) driven by the real client,
// grammY with `client.apiRoot`: what the service will send for a Telegram chat benefit
// (issue 29: a one-use invite link sent to the member; ban then unban on revoke) is answered
// as the Bot API answers it, and its failures (429 with retry_after, 5xx, 403, 400) reach
// the client as GrammyError / HttpError with the Bot API's fields.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Bot, GrammyError, HttpError } from 'grammy';
import { startTelegramServer, type TelegramChat, type TelegramServer } from '../support/telegram-server';

let server: TelegramServer;
let chat: TelegramChat;
let bot: Bot;

beforeEach(async () => {
  server = await startTelegramServer();
  chat = server.addChat({ title: 'Gold members' });
  bot = new Bot(server.token, { client: { apiRoot: server.apiRoot, timeoutSeconds: 5 } });
});
afterEach(async () => {
  server.assertClean();
  await server.close();
});

const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

test('getMe answers the bot, as grammY needs on init', async () => {
  await bot.init();
  expect(bot.botInfo).toMatchObject({ id: server.bot.id, is_bot: true, username: 'community_billing_bot' });
});

test('a one-use invite link is created and sent to the member, and admits one user only', async () => {
  const member = server.addUser({ first_name: 'Ada' });
  const expireDate = inAnHour();
  const link = await bot.api.createChatInviteLink(chat.id, { member_limit: 1, expire_date: expireDate, name: 'gold ent_1' });
  expect(link).toMatchObject({
    invite_link: expect.stringMatching(/^https:\/\/t\.me\/\+/), creator: { id: server.bot.id, is_bot: true },
    member_limit: 1, expire_date: expireDate, name: 'gold ent_1', creates_join_request: false, is_primary: false, is_revoked: false,
  });
  const message = await bot.api.sendMessage(member.id, `Your invite to Gold members: ${link.invite_link}`);
  expect(message).toMatchObject({ chat: { id: member.id, type: 'private' }, from: { id: server.bot.id }, text: expect.stringContaining(link.invite_link) });
  expect(server.sent.map((m) => [m.chatId, m.text])).toEqual([[member.id, `Your invite to Gold members: ${link.invite_link}`]]);

  expect(server.join(link.invite_link, member.id)).toEqual({ joined: true });
  expect(server.status(chat.id, member.id)).toBe('member');
  // member_limit: 1 is one seat: a forwarded link does not admit a second user.
  const other = server.addUser();
  expect(server.join(link.invite_link, other.id)).toEqual({ joined: false, reason: 'limit reached' });
  expect((await bot.api.getChatMember(chat.id, member.id)).status).toBe('member');
  expect((await bot.api.getChatMember(chat.id, other.id)).status).toBe('left');
});

test('an expired link admits nobody', async () => {
  const link = await bot.api.createChatInviteLink(chat.id, { member_limit: 1, expire_date: Math.floor(Date.now() / 1000) - 1 });
  expect(server.join(link.invite_link, server.addUser().id)).toEqual({ joined: false, reason: 'expired' });
});

test('revoking is ban then unban: the member is out, not banned for good, and may join again', async () => {
  const member = server.addUser();
  server.setStatus(chat.id, member.id, 'member');
  expect(await bot.api.banChatMember(chat.id, member.id)).toBe(true);
  expect(server.status(chat.id, member.id)).toBe('kicked');
  expect(await bot.api.getChatMember(chat.id, member.id)).toMatchObject({ status: 'kicked', until_date: 0 });
  expect(server.join((await bot.api.createChatInviteLink(chat.id, { member_limit: 1 })).invite_link, member.id)).toEqual({ joined: false, reason: 'banned' });

  expect(await bot.api.unbanChatMember(chat.id, member.id, { only_if_banned: true })).toBe(true);
  expect(server.status(chat.id, member.id)).toBe('left');
  const again = await bot.api.createChatInviteLink(chat.id, { member_limit: 1 });
  expect(server.join(again.invite_link, member.id)).toEqual({ joined: true });

  // As the Bot API documents: unban without only_if_banned removes a current member;
  // with it, a member is left alone.
  await bot.api.unbanChatMember(chat.id, member.id, { only_if_banned: true });
  expect(server.status(chat.id, member.id)).toBe('member');
  await bot.api.unbanChatMember(chat.id, member.id);
  expect(server.status(chat.id, member.id)).toBe('left');
});

test('a 429 surfaces as GrammyError with parameters.retry_after, as the Bot API sends it', async () => {
  const member = server.addUser();
  server.fault({ kind: 'flood', method: 'sendMessage', retryAfter: 3 });
  const e = await bot.api.sendMessage(member.id, 'hello').catch((x: unknown) => x);
  expect(e).toBeInstanceOf(GrammyError);
  expect(e).toMatchObject({ error_code: 429, description: 'Too Many Requests: retry after 3', parameters: { retry_after: 3 }, method: 'sendMessage' });
  // grammY itself does not retry (the service must wait retry_after): one call, then the next succeeds.
  expect(server.requestsTo('sendMessage').map((r) => r.status)).toEqual([429]);
  await bot.api.sendMessage(member.id, 'hello');
  expect(server.sent).toHaveLength(1);
});

test('a 5xx surfaces as GrammyError (JSON 500) or HttpError (the proxy\'s HTML 502)', async () => {
  server.fault({ kind: 'server-error', method: 'createChatInviteLink' });
  await expect(bot.api.createChatInviteLink(chat.id, { member_limit: 1 })).rejects.toMatchObject({ error_code: 500, description: 'Internal Server Error' });
  server.fault({ kind: 'server-error', method: 'createChatInviteLink', status: 502 });
  await expect(bot.api.createChatInviteLink(chat.id, { member_limit: 1 })).rejects.toBeInstanceOf(HttpError);
  expect(chat.links.size).toBe(0);
});

test('403 bot is not a member, 400 user not found, 403 can\'t initiate conversation', async () => {
  const member = server.addUser();
  const gone = server.addChat({ botStatus: 'left' });
  const notMember = await bot.api.createChatInviteLink(gone.id, { member_limit: 1 }).catch((x: unknown) => x);
  expect(notMember).toBeInstanceOf(GrammyError);
  expect(notMember).toMatchObject({ error_code: 403, description: 'Forbidden: bot is not a member of the supergroup chat' });
  server.fault({ kind: 'bot-not-member', method: 'banChatMember' });
  await expect(bot.api.banChatMember(chat.id, member.id)).rejects.toMatchObject({ error_code: 403, description: expect.stringMatching(/^Forbidden: bot is not a member/) });

  await expect(bot.api.getChatMember(chat.id, 424242)).rejects.toMatchObject({ error_code: 400, description: 'Bad Request: user not found' });
  server.fault({ kind: 'user-not-found', method: 'unbanChatMember' });
  await expect(bot.api.unbanChatMember(chat.id, member.id)).rejects.toMatchObject({ error_code: 400, description: 'Bad Request: user not found' });

  const stranger = server.addUser({ startedBot: false });
  await expect(bot.api.sendMessage(stranger.id, 'hi')).rejects.toMatchObject({ error_code: 403, description: "Forbidden: bot can't initiate conversation with a user" });
  const admin = server.addUser();
  server.setStatus(chat.id, admin.id, 'administrator');
  await expect(bot.api.banChatMember(chat.id, admin.id)).rejects.toMatchObject({ error_code: 400, description: 'Bad Request: user is an administrator of the chat' });
});

test('setWebhook keeps the URL and secret; updates are posted with X-Telegram-Bot-Api-Secret-Token', async () => {
  await expect(bot.api.setWebhook('http://127.0.0.1:1/updates')).rejects.toMatchObject({ error_code: 400, description: expect.stringContaining('HTTPS URL') });
  await bot.api.setWebhook('https://billing.example/platforms/telegram/pcfg_1/updates', { secret_token: 'hook-secret_1', allowed_updates: ['message'] });
  expect(server.webhook).toEqual({ url: 'https://billing.example/platforms/telegram/pcfg_1/updates', secretToken: 'hook-secret_1', allowedUpdates: ['message'] });
  expect(await bot.api.getWebhookInfo()).toMatchObject({ url: 'https://billing.example/platforms/telegram/pcfg_1/updates', allowed_updates: ['message'] });

  // A local receiver in place of the service: the stand-in accepts http URLs when told to.
  const local = await startTelegramServer({ acceptHttpWebhook: true });
  const got: { secret: string | undefined; body: unknown }[] = [];
  const receiver = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => { raw += c; });
    req.on('end', () => { got.push({ secret: req.headers['x-telegram-bot-api-secret-token'] as string | undefined, body: JSON.parse(raw) }); res.end(); });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  try {
    const localBot = new Bot(local.token, { client: { apiRoot: local.apiRoot } });
    await localBot.api.setWebhook(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/updates`, { secret_token: 's3cret' });
    const from = local.addUser({ first_name: 'Ada', username: 'ada' });
    expect((await local.deliverUpdate(local.textUpdate(from, '/start lnk_abc'))).status).toBe(200);
    expect(got).toEqual([{
      secret: 's3cret',
      body: {
        update_id: expect.any(Number),
        message: expect.objectContaining({ text: '/start lnk_abc', from: expect.objectContaining({ id: from.id }), chat: expect.objectContaining({ id: from.id, type: 'private' }), entities: [{ type: 'bot_command', offset: 0, length: 6 }] }),
      },
    }]);
    local.assertClean();
  } finally {
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
    await local.close();
  }
});

describe('calls outside the Bot API are violations', () => {
  const raw = (method: string, body: unknown, token = server.token) =>
    fetch(`${server.apiRoot}/bot${token}/${method}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  test('a missing required parameter, a wrong type, a value out of range, an unknown parameter', async () => {
    const member = server.addUser();
    expect((await raw('banChatMember', { chat_id: chat.id })).status).toBe(400);
    expect((await raw('banChatMember', { chat_id: chat.id, user_id: String(member.id) })).status).toBe(400);
    expect((await raw('createChatInviteLink', { chat_id: chat.id, member_limit: 0 })).status).toBe(400);
    const unknown = await raw('unbanChatMember', { chat_id: chat.id, user_id: member.id, only_if_baned: true });
    expect(await unknown.json()).toMatchObject({ ok: false, error_code: 400 });
    expect((await raw('sendMesage', { chat_id: member.id, text: 'x' })).status).toBe(404);
    expect(server.status(chat.id, member.id)).toBe('left');
    expect(() => server.assertClean()).toThrow(/banChatMember must have required property 'user_id'/);
    expect(server.takeViolations().map((v) => v.problems.join('; '))).toEqual([
      "banChatMember must have required property 'user_id'",
      'banChatMember/user_id must be integer',
      'createChatInviteLink/member_limit must be >= 1',
      'unbanChatMember must NOT have additional properties (only_if_baned)',
      'sendMesage is not a method the stand-in implements',
    ]);
  });

  test('a wrong token is 401 Unauthorized, as for a revoked bot, and not a violation', async () => {
    const e = await new Bot('123:wrong', { client: { apiRoot: server.apiRoot } }).api.getMe().catch((x: unknown) => x);
    expect(e).toMatchObject({ error_code: 401, description: 'Unauthorized' });
    expect(server.violations).toEqual([]);
  });

  test('form-encoded parameters are read as the Bot API reads them', async () => {
    const member = server.addUser();
    server.setStatus(chat.id, member.id, 'member');
    const res = await fetch(`${server.apiRoot}/bot${server.token}/banChatMember`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ chat_id: String(chat.id), user_id: String(member.id) }),
    });
    expect(await res.json()).toEqual({ ok: true, result: true });
    expect(server.status(chat.id, member.id)).toBe('kicked');
  });
});
