// "Connect Discord" (issue 29 item 3): from the sandbox checkout page the buyer authorizes
// the community's Discord application (OAuth2 authorization code, identify and
// guilds.join), against the local Discord stand-in: its authorization page approves, its
// token endpoint exchanges the code once for the registered client, /users/@me (checked
// against Discord's OpenAPI) names the user, and the bot adds them to the server with
// the user's access token. The identity is the member's before payment.
import crypto from 'node:crypto';
import { applyCatalog, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { call, createTenant, startApp, TestApp } from '../support/app';
import { startDiscordServer, type DiscordGuild, type DiscordServer } from '../support/discord-server';

const KEY = crypto.randomBytes(32).toString('base64');
const BOT = 'MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz012345';
const OAUTH = 'https://discord.example/oauth2/authorize';

let app: TestApp;
let discord: DiscordServer;
let guild: DiscordGuild;

beforeAll(async () => {
  discord = await startDiscordServer({ token: BOT });
  guild = discord.addGuild({ botRolePosition: 10, roles: [{ name: 'Gold', position: 2 }] });
  app = await startApp({ discordApiUrl: discord.url, discordOauthUrl: OAUTH, webhookEncryptionKey: KEY, discordBotToken: null });
});
afterAll(async () => {
  await app.close();
  discord.assertClean();
  await discord.close();
});

async function shop(opts: { clientId?: boolean } = {}) {
  const tenant = await createTenant(app.owner);
  const role = [...guild.roles.values()].find((r) => r.name === 'Gold')!.id;
  const settings: Record<string, unknown> = { guild_id: guild.id, bot_token: BOT };
  if (opts.clientId !== false) Object.assign(settings, { client_id: discord.application.id, client_secret: discord.application.secret });
  const ids = await applyCatalog(app.owner, tenant.communityId, parseCatalog({
    payment_provider: { type: 'sandbox' },
    platforms: [{ key: 'discord-main', platform: 'discord', settings }],
    entitlements: [{ key: 'gold-chat', name: 'Gold chat', benefits: [{ platform: 'discord-main', type: 'role', value: role }] }],
    tiers: [{ key: 'gold', name: 'Gold', kind: 'subscription', billing_mode: 'recurring', entitlements: ['gold-chat'],
      plans: [{ key: 'gold-monthly', amount_cents: 1500, currency: 'usd', interval: 'month' }] }],
  }), { encryptionKey: KEY });
  const link = await call(app.url, 'POST', '/v1/checkout-links', {
    key: tenant.key, body: { tier_id: ids.tiers.gold, subject: { external: { namespace: 'app', external_user_id: `u-${crypto.randomUUID()}` } } },
  });
  expect(link.status).toBe(200);
  return { tenant, ids, link: link.body as { url: string; member_id: string; checkout_id: string } };
}

const connectHref = (html: string) => /<a href="([^"]*\/connect\?[^"]*)">Connect Discord<\/a>/.exec(html)?.[1].replace(/&amp;/g, '&') ?? null;

/** The page's Connect Discord link followed: Discord's authorization URL and the state cookie. */
async function startConnect(pageUrl: string): Promise<{ authorize: string; cookie: string }> {
  const href = connectHref(await (await fetch(pageUrl)).text());
  expect(href).not.toBeNull();
  const res = await fetch(new URL(href!, app.url), { redirect: 'manual' });
  expect(res.status).toBe(302);
  const cookie = res.headers.get('set-cookie')!;
  expect(cookie).toMatch(/^discord_connect=[^;]+; .*HttpOnly/);
  expect(cookie).toMatch(/SameSite=Lax/);
  return { authorize: res.headers.get('location')!, cookie: cookie.split(';')[0] };
}

test('the buyer connects Discord from the checkout page: identity on the member, joined to the server, page says so', async () => {
  const { tenant, link } = await shop();
  const { authorize, cookie } = await startConnect(link.url);
  const to = new URL(authorize);
  expect(`${to.origin}${to.pathname}`).toBe(OAUTH);
  expect(Object.fromEntries(to.searchParams)).toMatchObject({
    response_type: 'code', client_id: discord.application.id, scope: 'identify guilds.join', redirect_uri: `${app.url}/platforms/discord/oauth/callback`,
  });
  // The checkout's page token never goes to Discord.
  expect(authorize).not.toContain(new URL(link.url).searchParams.get('t')!);

  const userId = discord.snowflake();
  const back = discord.authorize(authorize, { id: userId, username: 'buyer' });
  const done = await fetch(back, { redirect: 'manual', headers: { cookie } });
  expect(done.status).toBe(303);
  expect(done.headers.get('location')).toMatch(new RegExp(`^/sandbox/checkout/${link.checkout_id}\\?t=.+&discord=connected$`));

  const member = await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: tenant.key });
  expect(member.body.identities).toEqual([expect.objectContaining({ platform: 'discord', platform_uid: userId, username: 'buyer' })]);
  // guilds.join: the bot added the user with their access token (201).
  expect(discord.memberRoles(guild.id, userId)).toEqual([]);
  expect(discord.requestsTo('add_guild_member').map((r) => [r.params.user_id, r.status, r.authorization])).toContainEqual([userId, 201, `Bot ${BOT}`]);
  // The page tells the buyer, and offers no second connect.
  const page = await (await fetch(new URL(done.headers.get('location')!, app.url))).text();
  expect(page).toContain('Your Discord account is connected');
  expect(connectHref(page)).toBeNull();
});

test('a callback without the browser\'s cookie, or with another state, changes nothing', async () => {
  const { tenant, link } = await shop();
  const { authorize, cookie } = await startConnect(link.url);
  const back = discord.authorize(authorize, { id: discord.snowflake(), username: 'intruder' });
  expect((await fetch(back, { redirect: 'manual' })).status).toBe(400);
  const forged = new URL(back);
  forged.searchParams.set('state', 'x'.repeat(32));
  expect((await fetch(forged, { redirect: 'manual', headers: { cookie } })).status).toBe(400);
  const tampered = `${cookie.slice(0, -3)}abc`;
  expect((await fetch(back, { redirect: 'manual', headers: { cookie: tampered } })).status).toBe(400);
  expect((await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: tenant.key })).body.identities).toEqual([]);
});

test('declining on Discord\'s page goes back with nothing changed; an account of another member is refused', async () => {
  const first = await shop();
  const a = await startConnect(first.link.url);
  const declined = new URL(`${app.url}/platforms/discord/oauth/callback`);
  declined.searchParams.set('error', 'access_denied');
  declined.searchParams.set('state', new URL(a.authorize).searchParams.get('state')!);
  const res = await fetch(declined, { redirect: 'manual', headers: { cookie: a.cookie } });
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toMatch(/&discord=declined$/);

  // The same Discord account on two checkouts of one community: the second is refused.
  const userId = discord.snowflake();
  const b = await startConnect(first.link.url);
  expect((await fetch(discord.authorize(b.authorize, { id: userId, username: 'twice' }), { redirect: 'manual', headers: { cookie: b.cookie } })).status).toBe(303);
  const other = await call(app.url, 'POST', '/v1/checkout-links', {
    key: first.tenant.key, body: { tier_id: first.ids.tiers.gold, subject: { external: { namespace: 'app', external_user_id: `u-${crypto.randomUUID()}` } } },
  });
  const c = await startConnect(other.body.url);
  const refused = await fetch(discord.authorize(c.authorize, { id: userId, username: 'twice' }), { redirect: 'manual', headers: { cookie: c.cookie } });
  expect(refused.headers.get('location')).toMatch(/&discord=identity_taken$/);
  expect((await call(app.url, 'GET', `/v1/members/${other.body.member_id}`, { key: first.tenant.key })).body.identities).toEqual([]);
});

test('without an OAuth2 application (client_id) the page offers no Connect Discord', async () => {
  const { link } = await shop({ clientId: false });
  expect(connectHref(await (await fetch(link.url)).text())).toBeNull();
});

test('the client secret is write-only like the bot token: checked in the file, never in settings, only for Discord', async () => {
  const tenant = await createTenant(app.owner);
  const apply = async (platform: string, settings: Record<string, unknown>) => applyCatalog(app.owner, tenant.communityId,
    parseCatalog({ platforms: [{ key: 'p', platform, settings }] }), { encryptionKey: KEY });
  await expect(apply('telegram', { chat_id: '-1001', client_secret: discord.application.secret }))
    .rejects.toThrow('platforms[0].settings.client_secret: only a Discord connection has an OAuth2 client secret');
  await expect(apply('discord', { guild_id: '1', client_secret: 'short' }))
    .rejects.toThrow(/client_secret: expected the Discord application's OAuth2 client secret/);
  await expect(apply('discord', { guild_id: '1', client_id: 'abc' })).rejects.toThrow(/client_id: expected the application's id/);
  await apply('discord', { guild_id: '1', client_id: discord.application.id, client_secret: discord.application.secret });
  const { rows } = await app.owner.query(`select settings, (select array_agg(name order by name) from billing_private.platform_secrets s
    where s.community_id = p.community_id and s.platform_config_id = p.id) as secrets from billing.platform_configs p where community_id = $1`, [tenant.communityId]);
  expect(rows).toEqual([{ settings: { guild_id: '1', client_id: discord.application.id }, secrets: ['client_secret'] }]);
  expect(JSON.stringify(rows)).not.toContain(discord.application.secret);
});

test('from the member portal: the session\'s member connects Discord and comes back to the portal', async () => {
  const { tenant, link } = await shop();
  // Paid, so the member has access and a portal.
  const paid = await fetch(link.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
  expect(paid.status).toBe(303);
  const portal = await call(app.url, 'POST', `/v1/members/${link.member_id}/portal-sessions`, { key: tenant.key, body: {} });
  expect(portal.status).toBe(200);
  const opened = await fetch(portal.body.url, { redirect: 'manual' });
  const session = opened.headers.get('set-cookie')!.split(';')[0];
  const html = await opened.text();
  const href = /<a class="button" href="([^"]+\/connect-discord)">Connect Discord<\/a>/.exec(html)?.[1];
  expect(href).toBeDefined();

  // Without the portal's session cookie, nothing starts.
  expect((await fetch(new URL(href!, app.url), { redirect: 'manual' })).status).toBe(401);
  const start = await fetch(new URL(href!, app.url), { redirect: 'manual', headers: { cookie: session } });
  expect(start.status).toBe(302);
  const state = start.headers.get('set-cookie')!.split(';')[0];
  const userId = discord.snowflake();
  const done = await fetch(discord.authorize(start.headers.get('location')!, { id: userId, username: 'from-portal' }), { redirect: 'manual', headers: { cookie: state } });
  expect(done.status).toBe(303);
  const ps = new URL(portal.body.url).pathname.split('/').pop();
  expect(done.headers.get('location')).toBe(`/sandbox/portal/${ps}/account?discord=connected`);
  const back = await (await fetch(new URL(done.headers.get('location')!, app.url), { headers: { cookie: session } })).text();
  expect(back).toContain('Your Discord account is connected');
  expect(back).not.toContain('Connect Discord</a>');
  const member = await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: tenant.key });
  expect(member.body.identities).toEqual([expect.objectContaining({ platform: 'discord', platform_uid: userId, username: 'from-portal' })]);
});

test('odd input to the connect routes is a 4xx, never a 500', async () => {
  const { link, ids } = await shop();
  const pcfg = ids.platforms['discord-main'];
  const t = encodeURIComponent(new URL(link.url).searchParams.get('t')!);
  const paths = [
    `/platforms/discord/%00/connect?checkout=${link.checkout_id}&t=${t}`,
    `/platforms/discord/${pcfg}/connect?checkout=${link.checkout_id}%00&t=${t}`,
    `/platforms/discord/${pcfg}/connect?checkout=${link.checkout_id}&t=%ED%A0%80`,
    `/platforms/discord/${pcfg}/connect?checkout=${link.checkout_id}&checkout=x&t=${t}&t=${t}`,
    `/platforms/discord/${pcfg}/connect?checkout=${link.checkout_id}&t=${'x'.repeat(5000)}`,
    '/platforms/discord/oauth/callback?code=%00&state=%ED%A0%80',
    '/platforms/discord/oauth/callback?state=a&state=b&code[x]=1',
  ];
  for (const p of paths) {
    const res = await fetch(new URL(p, app.url), { redirect: 'manual', headers: { cookie: 'discord_connect=%ZZ; discord_connect=x.y' } });
    await res.text();
    expect([p, res.status >= 400 && res.status < 500]).toEqual([p, true]);
  }
});
