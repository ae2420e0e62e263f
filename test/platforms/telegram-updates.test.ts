// Issue 29 item 3: members link their own Telegram account. The bot's webhook is
// POST /platforms/telegram/{pcfg_id}/updates, set with a secret_token the service derives
// (telegramWebhookSecret); Telegram sends it back as X-Telegram-Bot-Api-Secret-Token, and a
// wrong or missing one answers 401. A private `/start <code>` (a deep link) redeems the code
// for message.from.id and the bot replies in that chat (sendMessage through grammY, to the
// local Bot API stand-in); any other update answers 200 and does nothing.
import { Api } from 'grammy';
import type { User } from 'grammy/types';
import { telegramWebhookSecret } from '../../src/domain/catalog/telegram-webhook-secret';
import { startApp, TestApp } from '../support/app';
import { advance, events, subscribe } from '../support/shop';
import { startTelegramServer, TelegramServer } from '../support/telegram-server';
import { createLinkShop, ENCRYPTION_KEY, identities, linkCode, LinkShop, newMember, post } from './linking-fixture';

let app: TestApp;
let telegram: TelegramServer;
let shop: LinkShop;
beforeAll(async () => {
  telegram = await startTelegramServer({ acceptHttpWebhook: true });
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, telegramApiUrl: telegram.apiRoot });
  shop = await createLinkShop(app, { telegramToken: telegram.token });
  // As the service would set it: this connection's URL and secret.
  await new Api(telegram.token, { apiRoot: telegram.apiRoot }).setWebhook(`${app.url}${path(shop.telegramId)}`,
    { secret_token: secretOf(shop, shop.telegramId) });
});
afterAll(async () => {
  await app.close();
  await telegram.close();
});
afterEach(() => telegram.assertClean());

const path = (pcfgId: string) => `/platforms/telegram/${pcfgId}/updates`;
const secretOf = (s: LinkShop, pcfgId: string) => telegramWebhookSecret(ENCRYPTION_KEY, s.communityId, pcfgId);

let updateIds = 0;
function send(update: object, s: LinkShop = shop, secret: string | null = secretOf(s, s.telegramId)) {
  const body = JSON.stringify({ update_id: ++updateIds, ...update });
  return post(app, path(s.telegramId), body, secret === null ? {} : { 'x-telegram-bot-api-secret-token': secret });
}

const repliesTo = (user: User) => telegram.sent.filter((m) => m.chatId === user.id).map((m) => m.text);

describe('secret token', () => {
  test('the update sent by Telegram to the webhook set with the derived secret is taken', async () => {
    const user = telegram.addUser({ username: 'ann_t' });
    const member = await newMember(app, shop);
    const code = await linkCode(app, shop, member, 'telegram');
    const res = await telegram.deliverUpdate(telegram.textUpdate(user, `/start ${code}`));
    expect(res.status).toBe(200);
    expect(repliesTo(user)).toEqual([expect.stringMatching(/is now linked/)]);
    expect((await identities(app, shop.communityId)).filter((i) => i.member_id === member))
      .toEqual([{ member_id: member, platform: 'telegram', platform_uid: String(user.id), username: 'ann_t' }]);
  });

  test('a wrong or missing secret answers 401 problem+json and does nothing', async () => {
    const user = telegram.addUser();
    const member = await newMember(app, shop);
    const update = telegram.textUpdate(user, `/start ${await linkCode(app, shop, member, 'telegram')}`);
    const other = await createLinkShop(app);
    for (const secret of [null, '', 'x'.repeat(43), secretOf(other, other.telegramId), secretOf(shop, shop.discordId), secretOf(shop, shop.telegramId).slice(1)]) {
      const r = await send(update, shop, secret);
      expect([secret, r.status, r.body?.code]).toEqual([secret, 401, 'unauthorized']);
      expect(r.contentType).toMatch(/^application\/problem\+json/);
    }
    expect(repliesTo(user)).toEqual([]);
    expect((await identities(app, shop.communityId)).filter((i) => i.member_id === member)).toEqual([]);
  });

  test('an unknown connection, or a Discord one, answers 404', async () => {
    for (const id of ['pcfg_00000000000000000000000000', shop.discordId]) {
      const r = await post(app, path(id), '{}', { 'x-telegram-bot-api-secret-token': secretOf(shop, id) });
      expect([id, r.status, r.body?.code]).toEqual([id, 404, 'not_found']);
    }
  });
});

describe('/start <code>', () => {
  test('links the sender to the code\'s member, as the API does, with its events, and the bot replies in the chat', async () => {
    const user = telegram.addUser({ username: 'bob_t' });
    const { memberId } = await subscribe(app, shop, 'silver');
    const code = await linkCode(app, shop, memberId, 'telegram');
    const before = (await events(app.owner, shop.communityId)).length;
    const r = await send(telegram.textUpdate(user, `/start ${code}`));
    expect(r.status).toBe(200);
    expect(telegram.requestsTo('sendMessage').at(-1)).toMatchObject({ status: 200, params: { chat_id: user.id } });
    expect(repliesTo(user)).toEqual(['Your Telegram account is now linked to your membership.']);
    const after = (await events(app.owner, shop.communityId)).slice(before);
    expect(after.map((e) => e.type)).toEqual(expect.arrayContaining(['member.updated', 'member.entitlement.updated']));
    expect(after.find((e) => e.type === 'member.updated')!.data)
      .toMatchObject({ change: { kind: 'identity_linked', platform: 'telegram', platform_uid: String(user.id) } });

    const again = await send(telegram.textUpdate(telegram.addUser(), `/start@community_billing_bot ${code}`));
    expect(again.status).toBe(200);
    expect(telegram.sent.at(-1)!.text).toMatch(/already used/);
  });

  test('expired, unknown and other platform\'s codes get a reply that says why, and link nothing', async () => {
    const s = await createLinkShop(app, { telegramToken: telegram.token });
    const member = await newMember(app, s);
    const discordCode = await linkCode(app, s, member, 'discord');
    const user = telegram.addUser();
    const sendS = (text: string) => send(telegram.textUpdate(user, text), s);
    expect((await sendS(`/start ${discordCode}`)).status).toBe(200);
    expect((await sendS('/start 0123456789')).status).toBe(200);
    const code = await linkCode(app, s, member, 'telegram');
    await advance(app, s, 11 / 1440);
    expect((await sendS(`/start ${code}`)).status).toBe(200);
    expect((await sendS('/start')).status).toBe(200);
    expect(repliesTo(user)).toEqual([
      'That link code is not for Telegram. Ask for a code for Telegram.',
      'That link code is not valid. Check it, or ask for a new one.',
      'That link code has expired (codes last ten minutes). Ask for a new one.',
      expect.stringMatching(/send \/start followed by your link code/),
    ]);
    expect(repliesTo(user).join(' ')).not.toContain(member);
    expect(await identities(app, s.communityId)).toEqual([]);
  });

  test('updates it cannot use answer 200 and do nothing', async () => {
    const user = telegram.addUser();
    const member = await newMember(app, shop);
    const code = await linkCode(app, shop, member, 'telegram');
    const sentBefore = telegram.requestsTo('sendMessage').length;
    const group = { ...telegram.textUpdate(user, `/start ${code}`).message, chat: { id: -100200300, type: 'supergroup', title: 'g' } };
    const bot = { ...telegram.textUpdate(user, `/start ${code}`).message, from: { id: 42, is_bot: true, first_name: 'bot' } };
    for (const update of [
      telegram.textUpdate(user, 'hello'), telegram.textUpdate(user, `/help ${code}`), telegram.textUpdate(user, `${code}`),
      { message: group }, { message: bot }, { edited_message: telegram.textUpdate(user, `/start ${code}`).message },
      { my_chat_member: { chat: { id: user.id, type: 'private' } } }, {}, [], 'text', 42, null,
    ]) {
      const r = await post(app, path(shop.telegramId), JSON.stringify(update && typeof update === 'object' && !Array.isArray(update) ? { update_id: ++updateIds, ...update } : update),
        { 'x-telegram-bot-api-secret-token': secretOf(shop, shop.telegramId) });
      expect([update, r.status]).toEqual([update, 200]);
    }
    expect(telegram.requestsTo('sendMessage').length).toBe(sentBefore);
    expect((await identities(app, shop.communityId)).filter((i) => i.member_id === member)).toEqual([]);
  });

  test('another community\'s connection cannot redeem this community\'s code', async () => {
    const other = await createLinkShop(app, { telegramToken: telegram.token });
    const member = await newMember(app, shop);
    const code = await linkCode(app, shop, member, 'telegram');
    const user = telegram.addUser();
    expect((await send(telegram.textUpdate(user, `/start ${code}`), other)).status).toBe(200);
    expect(repliesTo(user)).toEqual(['That link code is not valid. Check it, or ask for a new one.']);
    expect(await identities(app, other.communityId)).toEqual([]);
    expect((await identities(app, shop.communityId)).filter((i) => i.member_id === member)).toEqual([]);
    // Still this community's to redeem.
    await send(telegram.textUpdate(user, `/start ${code}`));
    expect(repliesTo(user).at(-1)).toMatch(/is now linked/);
  });

  test('a reply the bot cannot send (the user blocked it) still answers 200 and keeps the link', async () => {
    const user = telegram.addUser({ blockedBot: true });
    const member = await newMember(app, shop);
    const r = await send(telegram.textUpdate(user, `/start ${await linkCode(app, shop, member, 'telegram')}`));
    expect(r.status).toBe(200);
    expect(telegram.requestsTo('sendMessage').at(-1)).toMatchObject({ status: 403, params: { chat_id: user.id } });
    expect((await identities(app, shop.communityId)).filter((i) => i.member_id === member)).toHaveLength(1);
  });
});

describe('hostile bodies', () => {
  test('over 100 kB answers 413; not JSON, raw NUL bytes or deep nesting 400', async () => {
    const headers = { 'x-telegram-bot-api-secret-token': secretOf(shop, shop.telegramId) };
    const big = await post(app, path(shop.telegramId), JSON.stringify({ update_id: 1, pad: 'x'.repeat(200_000) }), headers);
    expect([big.status, big.body?.code]).toEqual([413, 'payload_too_large']);
    for (const body of ['{"update_id": 1', '{"update_id": 1, "message": {"text": "/start a\u0000b"}}', '['.repeat(5000) + ']'.repeat(5000)]) {
      const r = await post(app, path(shop.telegramId), body, headers);
      expect([body.slice(0, 20), r.status, r.body?.code]).toEqual([body.slice(0, 20), 400, 'invalid_request']);
    }
  });
});
