// Issue 29 item 3: members link their own Discord account. Discord posts interactions to
// POST /platforms/discord/{pcfg_id}/interactions signed with the application's Ed25519 key
// (X-Signature-Ed25519 over X-Signature-Timestamp + raw body, the connection's
// settings.public_key); a bad or missing signature answers 401, a PING {type: 1}, and the
// /link command redeems a link code for the invoking user, answered ephemerally.
import crypto from 'node:crypto';
import express from 'express';
import type { AddressInfo } from 'node:net';
import { mountPlatformLinking } from '../../src/linking/linking-routes';
import type { IdentityLinked } from '../../src/linking/link-redemption';
import { startApp, TestApp } from '../support/app';
import { advance, events, subscribe } from '../support/shop';
import { waitFor } from '../support/webhooks';
import { createLinkShop, ed25519Pair, Ed25519Pair, ENCRYPTION_KEY, identities, linkCode, LinkShop, newMember, post } from './linking-fixture';

let app: TestApp;
let keys: Ed25519Pair;
let shop: LinkShop;
beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY });
  keys = ed25519Pair();
  shop = await createLinkShop(app, { publicKeyHex: keys.publicKeyHex });
});
afterAll(() => app.close());

const path = (pcfgId: string) => `/platforms/discord/${pcfgId}/interactions`;

function signed(body: string | Buffer, privateKey = keys.privateKey, timestamp = String(Math.floor(Date.now() / 1000))) {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const signature = crypto.sign(null, Buffer.concat([Buffer.from(timestamp), bytes]), privateKey).toString('hex');
  return { 'x-signature-ed25519': signature, 'x-signature-timestamp': timestamp };
}

function send(interaction: unknown, s: LinkShop = shop, privateKey = keys.privateKey) {
  const body = JSON.stringify(interaction);
  return post(app, path(s.discordId), body, signed(body, privateKey));
}

let uids = 0;
const discordUid = () => `${BigInt(Date.now()) * 1000n + BigInt(++uids)}`;

/** A /link command as Discord sends it: in a guild (member.user) or in a DM (user). */
function linkCommand(code: unknown, uid: string, where: 'guild' | 'dm' = 'guild') {
  const user = { id: uid, username: 'ann_d', discriminator: '0', global_name: 'Ann', avatar: null };
  return {
    id: '1100000000000000001', application_id: '1100000000000000002', type: 2, token: 'interaction-token', version: 1,
    data: { id: '1100000000000000003', name: 'link', type: 1, options: code === undefined ? [] : [{ name: 'code', type: 3, value: code }] },
    ...(where === 'guild'
      ? { guild_id: '1234', channel_id: '1100000000000000004', member: { user, roles: [], permissions: '0', joined_at: '2026-01-01T00:00:00Z' } }
      : { channel_id: '1100000000000000005', user }),
  };
}

const ephemeral = (content: string | RegExp) => ({ type: 4, data: { content: expect.stringMatching(content), flags: 64, allowed_mentions: { parse: [] } } });

describe('signature', () => {
  test('a PING signed with the application\'s key answers {type: 1}', async () => {
    const r = await send({ id: '1', application_id: '2', type: 1, token: 't', version: 1 });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ type: 1 });
  });

  test('a PING signed with another key answers 401 problem+json', async () => {
    const r = await send({ type: 1 }, shop, ed25519Pair().privateKey);
    expect(r.status).toBe(401);
    expect(r.contentType).toMatch(/^application\/problem\+json/);
    expect(r.body).toMatchObject({ code: 'unauthorized', status: 401 });
  });

  test('missing or malformed signature headers answer 401', async () => {
    const body = JSON.stringify({ type: 1 });
    const good = signed(body);
    for (const headers of [{} as Record<string, string>, { 'x-signature-ed25519': good['x-signature-ed25519'] }, { 'x-signature-timestamp': good['x-signature-timestamp'] },
      { ...good, 'x-signature-ed25519': 'zz' + good['x-signature-ed25519'].slice(2) }, { ...good, 'x-signature-ed25519': '' }]) {
      const r = await post(app, path(shop.discordId), body, headers);
      expect([headers, r.status, r.body?.code]).toEqual([headers, 401, 'unauthorized']);
    }
  });

  test('a tampered body or timestamp answers 401', async () => {
    const body = JSON.stringify({ type: 1 });
    const headers = signed(body);
    expect((await post(app, path(shop.discordId), JSON.stringify({ type: 1, x: 1 }), headers)).status).toBe(401);
    expect((await post(app, path(shop.discordId), body, { ...headers, 'x-signature-timestamp': String(Number(headers['x-signature-timestamp']) + 1) })).status).toBe(401);
    expect((await post(app, path(shop.discordId), body, headers)).status).toBe(200);
  });

  test('a connection without a public key refuses every interaction', async () => {
    const other = await createLinkShop(app);
    expect((await send({ type: 1 }, other)).status).toBe(401);
  });

  test('an unknown connection, or a Telegram one, answers 404 problem+json', async () => {
    for (const id of ['pcfg_00000000000000000000000000', shop.telegramId, 'pcfg_%00', 'x'.repeat(300)]) {
      const body = JSON.stringify({ type: 1 });
      const r = await post(app, path(id), body, signed(body));
      expect([id, r.status, r.body?.code]).toEqual([id, 404, 'not_found']);
      expect(r.contentType).toMatch(/^application\/problem\+json/);
    }
  });
});

describe('/link', () => {
  test('in a guild, the code links the invoking user to its member, as the API does, with its events', async () => {
    const { memberId } = await subscribe(app, shop, 'silver');
    const code = await linkCode(app, shop, memberId, 'discord');
    const uid = discordUid();
    const before = (await events(app.owner, shop.communityId)).length;
    const r = await send(linkCommand(code.toLowerCase(), uid));
    expect(r.status).toBe(200);
    expect(r.body).toEqual(ephemeral(/is now linked/));
    expect(r.body.data.content).not.toContain(memberId);
    expect((await identities(app, shop.communityId)).filter((i) => i.platform_uid === uid))
      .toEqual([{ member_id: memberId, platform: 'discord', platform_uid: uid, username: 'ann_d' }]);
    const after = (await events(app.owner, shop.communityId)).slice(before);
    expect(after.map((e) => e.type)).toEqual(expect.arrayContaining(['member.updated', 'member.entitlement.updated']));
    expect(after.find((e) => e.type === 'member.updated')!.data).toMatchObject({ change: { kind: 'identity_linked', platform: 'discord', platform_uid: uid } });

    // The code was used: a second try says so, and links nothing more.
    const again = await send(linkCommand(code, discordUid()));
    expect(again.body).toEqual(ephemeral(/already used/));
  });

  test('in a DM, the invoking user is interaction.user', async () => {
    const member = await newMember(app, shop);
    const uid = discordUid();
    const r = await send(linkCommand(await linkCode(app, shop, member, 'discord'), uid, 'dm'));
    expect(r.body).toEqual(ephemeral(/is now linked/));
    expect((await identities(app, shop.communityId)).find((i) => i.platform_uid === uid)?.member_id).toBe(member);
  });

  test('an unknown, replaced or malformed code says it is not valid or was replaced, and links nothing', async () => {
    const member = await newMember(app, shop);
    const first = await linkCode(app, shop, member, 'discord');
    await linkCode(app, shop, member, 'discord');
    const uid = discordUid();
    expect((await send(linkCommand('0123456789', uid))).body).toEqual(ephemeral(/not valid/));
    expect((await send(linkCommand(first, uid))).body).toEqual(ephemeral(/already used, or a newer code replaced it/));
    for (const code of [undefined, '', 'abc\u0000def', 'x'.repeat(500), 42, { a: 1 }]) {
      const r = await send(linkCommand(code, uid));
      expect([code, r.status, r.body]).toEqual([code, 200, ephemeral(/not valid/)]);
    }
    expect((await identities(app, shop.communityId)).filter((i) => i.platform_uid === uid)).toEqual([]);
  });

  test('an expired code says so', async () => {
    const s = await createLinkShop(app, { publicKeyHex: keys.publicKeyHex });
    const member = await newMember(app, s);
    const code = await linkCode(app, s, member, 'discord');
    await advance(app, s, 11 / 1440);
    expect((await send(linkCommand(code, discordUid()), s)).body).toEqual(ephemeral(/expired/));
    expect(await identities(app, s.communityId)).toEqual([]);
  });

  test('a code for Telegram is refused on Discord and stays usable', async () => {
    const member = await newMember(app, shop);
    const code = await linkCode(app, shop, member, 'telegram');
    const uid = discordUid();
    expect((await send(linkCommand(code, uid))).body).toEqual(ephemeral(/not for Discord/));
    expect((await identities(app, shop.communityId)).filter((i) => i.member_id === member)).toEqual([]);
    const { rows } = await app.owner.query('select redeemed_at from billing.link_codes where community_id = $1 and code = $2', [shop.communityId, code]);
    expect(rows).toEqual([{ redeemed_at: null }]);
  });

  test('an account linked to another member is refused without naming it', async () => {
    const first = await newMember(app, shop);
    const uid = discordUid();
    await send(linkCommand(await linkCode(app, shop, first, 'discord'), uid));
    const second = await newMember(app, shop);
    const r = await send(linkCommand(await linkCode(app, shop, second, 'discord'), uid));
    expect(r.body).toEqual(ephemeral(/already linked to another membership/));
    expect(r.text).not.toContain(first);
  });

  test('another community\'s connection cannot redeem this community\'s code', async () => {
    const otherKeys = ed25519Pair();
    const other = await createLinkShop(app, { publicKeyHex: otherKeys.publicKeyHex });
    const member = await newMember(app, shop);
    const code = await linkCode(app, shop, member, 'discord');
    const uid = discordUid();
    expect((await send(linkCommand(code, uid), other, otherKeys.privateKey)).body).toEqual(ephemeral(/not valid/));
    // Nor with this community's key on the other's URL.
    expect((await send(linkCommand(code, uid), other)).status).toBe(401);
    expect(await identities(app, other.communityId)).toEqual([]);
    expect((await send(linkCommand(code, uid))).body).toEqual(ephemeral(/is now linked/));
  });

  test('another command or interaction type gets an ephemeral answer and changes nothing', async () => {
    const cmd = linkCommand('0123456789', discordUid());
    expect((await send({ ...cmd, data: { ...cmd.data, name: 'other' } })).body).toEqual(ephemeral(/only answers the \/link command/));
    expect((await send({ ...cmd, type: 3, data: { custom_id: 'x', component_type: 2 } })).body).toEqual(ephemeral(/only answers/));
  });
});

describe('hostile bodies', () => {
  test('a body over 100 kB answers 413 problem+json', async () => {
    const body = JSON.stringify({ type: 1, pad: 'x'.repeat(200_000) });
    const r = await post(app, path(shop.discordId), body, signed(body));
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: 'payload_too_large' });
  });

  test('signed bodies that are not JSON, hold raw NUL bytes, are not UTF-8 or nest deeply answer 400', async () => {
    const bodies = [
      '{"type": 1',
      Buffer.from('{"type": 2, "data": {"name": "link\u0000"}}'),
      Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
      '['.repeat(5000) + ']'.repeat(5000),
      `{"type":2,"data":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`,
    ];
    for (const body of bodies) {
      const r = await post(app, path(shop.discordId), body, signed(body));
      expect([String(body).slice(0, 20), r.status, r.body?.code]).toEqual([String(body).slice(0, 20), 400, 'invalid_request']);
    }
  });
});

test('a new link calls the delivery hook once, after commit, with the member and connection', async () => {
  const calls: IdentityLinked[] = [];
  const server = express();
  mountPlatformLinking(server, { config: app.config, apiPool: app.api, onIdentityLinked: async (l) => {
    // Committed before the hook runs: another connection sees the identity.
    const { rows } = await app.owner.query('select member_id from billing.member_identities where community_id = $1 and member_id = $2', [l.communityId, l.memberId]);
    expect(rows).toHaveLength(1);
    calls.push(l);
  } });
  const listener = server.listen(0, '127.0.0.1');
  await new Promise((resolve) => listener.once('listening', resolve));
  try {
    const url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
    const member = await newMember(app, shop);
    const body = JSON.stringify(linkCommand(await linkCode(app, shop, member, 'discord'), discordUid()));
    const r = await fetch(url + path(shop.discordId), { method: 'POST', headers: { 'content-type': 'application/json', ...signed(body) }, body });
    expect((await r.json()).data.content).toMatch(/is now linked/);
    await waitFor('the hook', () => calls.length > 0 || null); // it runs after the answer is written
    expect(calls).toEqual([{ communityId: shop.communityId, memberId: member, platform: 'discord', platformConfigId: shop.discordId }]);
  } finally {
    listener.closeAllConnections();
    await new Promise((resolve) => listener.close(resolve));
  }
});
