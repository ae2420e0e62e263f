// Benefit delivery (issue 29 item 2): the worker applies each member's benefits on its
// platform through the real clients (@discordjs/rest, grammY) against the local
// stand-ins, which check every request against what the platforms publish. Grant,
// update, revoke, an identity linked later or changed, each failure class (429 waited
// out, 5xx retried, 403 and 404 as action_required), and the delivery each benefit
// shows in GET /v1/members/{id}/entitlements. The ledger stays the authority: a failed
// delivery never changes an entitlement.
import type pg from 'pg';
import { PlatformSecretBox, storePlatformSecret } from '../../src/domain/catalog/platform-secrets';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { startDiscordServer, type DiscordGuild, type DiscordServer } from '../support/discord-server';
import { startTelegramServer, type TelegramChat, type TelegramServer } from '../support/telegram-server';
import { ENCRYPTION_KEY, worker } from '../support/webhooks';
import { runCli, runJson } from '../support/cli-process';
import { PlatformClients } from '../../src/platforms/platform-clients';
import { reconcileConnection, type ReconcileConnection } from '../../src/platforms/reconcile';
import type { WorkerHandle } from '../../worker';

let app: TestApp;
let discord: DiscordServer;
let telegram: TelegramServer;
let handle: WorkerHandle;

beforeAll(async () => {
  app = await startApp();
  discord = await startDiscordServer();
  telegram = await startTelegramServer();
  // No deployment-wide tokens: this worker also takes the delivery jobs other test files'
  // ledgers queue (one database), and those connections have no token of their own, so
  // they end as action_required without a call. Ours carry the stand-ins' tokens.
  handle = await worker({
    platformDeliveries: true,
    platforms: { discordApiUrl: discord.url, telegramApiUrl: telegram.apiRoot, discordBotToken: null, telegramBotToken: null, timeoutMs: 5000 },
  });
});
afterAll(async () => {
  await handle.stop();
  discord.assertClean();
  telegram.assertClean();
  await discord.close();
  await telegram.close();
  await app.close();
});

interface Shop { tenant: Tenant; tierId: string; entitlementId: string; pcfg: string }

/** A community with one tier whose entitlement carries the given benefits on one connection. */
async function shop(owner: pg.Pool, platform: 'discord' | 'telegram', settings: Record<string, string>, benefits: { type: string; value: string }[],
  token: string | null = platform === 'discord' ? discord.token : telegram.token): Promise<Shop> {
  const tenant = await createTenant(owner);
  const c = tenant.communityId;
  const { rows: [p] } = await owner.query<{ id: string }>(
    `insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'main', $2, $3) returning id`, [c, platform, settings]);
  const { rows: [t] } = await owner.query<{ id: string }>(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold') returning id`, [c]);
  const { rows: [e] } = await owner.query<{ id: string }>(`insert into billing.entitlements (community_id, key, name) values ($1, 'gold', 'Gold access') returning id`, [c]);
  await owner.query(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)`, [c, t.id, e.id]);
  for (const b of benefits) {
    await owner.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value) values ($1, $2, $3, $4, $5)`,
      [c, e.id, p.id, b.type, b.value]);
  }
  if (token !== null) await storePlatformSecret(owner, new PlatformSecretBox(ENCRYPTION_KEY), c, p.id, 'bot_token', token);
  return { tenant, tierId: t.id, entitlementId: e.id, pcfg: p.id };
}

async function member(owner: pg.Pool, s: Shop, identity?: { platform: 'discord' | 'telegram'; uid: string }): Promise<string> {
  const { rows: [m] } = await owner.query<{ id: string }>(`insert into billing.members (community_id) values ($1) returning id`, [s.tenant.communityId]);
  if (identity) await link(owner, s, m.id, identity);
  return m.id;
}

async function link(owner: pg.Pool, s: Shop, memberId: string, identity: { platform: 'discord' | 'telegram'; uid: string }) {
  await owner.query(`delete from billing.member_identities where community_id = $1 and member_id = $2 and platform = $3`, [s.tenant.communityId, memberId, identity.platform]);
  await owner.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid) values ($1, $2, $3, $4)`,
    [s.tenant.communityId, memberId, identity.platform, identity.uid]);
}

async function grant(owner: pg.Pool, s: Shop, memberId: string): Promise<string> {
  const { rows: [g] } = await owner.query<{ id: string }>(
    `insert into billing.grants (community_id, member_id, tier_id, created_at) values ($1, $2, $3, now()) returning id`, [s.tenant.communityId, memberId, s.tierId]);
  return g.id;
}

async function revoke(owner: pg.Pool, s: Shop, grantId: string) {
  await owner.query(`update billing.grants set revoked_at = now() where community_id = $1 and id = $2`, [s.tenant.communityId, grantId]);
}

/** The member's active entitlements' benefits with their delivery, as the API shows them. */
async function deliveries(s: Shop, memberId: string): Promise<{ type: string; value: string; delivery: { status: string; error: string | null; updated_at: string | null } }[]> {
  const r = await call(app.url, 'GET', `/v1/members/${memberId}/entitlements`, { key: s.tenant.key });
  expect(r.status).toBe(200);
  return r.body.data.flatMap((e: { benefits: unknown[] }) => e.benefits);
}

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const statuses = async (s: Shop, m: string) => (await deliveries(s, m)).map((b) => b.delivery.status);

function discordGuild(): { guild: DiscordGuild; role: string; channel: string } {
  const guild = discord.addGuild({ botRolePosition: 10, roles: [{ name: 'Gold', position: 3 }, { name: 'Admins', position: 20 }] });
  const role = [...guild.roles.values()].find((r) => r.name === 'Gold')!.id;
  return { guild, role, channel: discord.addChannel(guild.id) };
}

test('a Discord role and channel are granted when the entitlement is, shown delivered, and removed when it is revoked', async () => {
  const { guild, role, channel } = discordGuild();
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }, { type: 'channel', value: channel }]);
  const user = discord.addMember(guild.id);
  const m = await member(app.owner, s, { platform: 'discord', uid: user.userId });
  const g = await grant(app.owner, s, m);

  await until('role granted', () => statuses(s, m), (v) => v.join() === 'delivered,delivered');
  expect(discord.memberRoles(guild.id, user.userId)).toEqual([role]);
  expect(discord.overwrites.get(channel)?.get(user.userId)).toEqual({ type: 1, allow: 1024, deny: 0 });
  const put = discord.requestsTo('add_guild_member_role').filter((r) => r.params.user_id === user.userId);
  expect(put.map((r) => [r.status, r.reason, r.authorization])).toEqual([[204, 'Gold access: entitlement granted', `Bot ${discord.token}`]]);

  await revoke(app.owner, s, g);
  await until('role removed', async () => discord.memberRoles(guild.id, user.userId), (r) => r !== null && r.length === 0);
  await until('overwrite removed', async () => discord.overwrites.get(channel)?.has(user.userId) ?? false, (v) => v === false);
  // Nothing left to hold: the delivery rows are gone, the log keeps every call.
  await until('rows gone', async () => (await app.owner.query(`select 1 from billing.benefit_deliveries where community_id = $1`, [s.tenant.communityId])).rowCount, (n) => n === 0);
  const { rows } = await app.owner.query<{ action: string; outcome: string }>(
    `select action, outcome from billing.platform_actions where community_id = $1 order by id`, [s.tenant.communityId]);
  expect(rows.map((r) => `${r.action}:${r.outcome}`).sort()).toEqual(['add_channel:ok', 'add_role:ok', 'remove_channel:ok', 'remove_role:ok']);
});

test('a member without a linked Discord account is action_required; linking one delivers at once', async () => {
  const { guild, role } = discordGuild();
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }]);
  const user = discord.addMember(guild.id);
  const m = await member(app.owner, s);
  await grant(app.owner, s, m);
  const [b] = await until('action_required', () => deliveries(s, m), (v) => v[0]?.delivery.status === 'action_required');
  expect(b.delivery.error).toMatch(/has not linked a Discord account/);
  // The entitlement itself is untouched by the delivery.
  expect((await call(app.url, 'GET', `/v1/members/${m}/entitlements`, { key: s.tenant.key })).body.data[0].status).toBe('active');

  await link(app.owner, s, m, { platform: 'discord', uid: user.userId });
  await until('delivered after linking', () => statuses(s, m), (v) => v.join() === 'delivered');
  expect(discord.memberRoles(guild.id, user.userId)).toEqual([role]);
});

test('a changed identity moves the role: removed from the old account, granted to the new one', async () => {
  const { guild, role } = discordGuild();
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }]);
  const [first, second] = [discord.addMember(guild.id), discord.addMember(guild.id)];
  const m = await member(app.owner, s, { platform: 'discord', uid: first.userId });
  await grant(app.owner, s, m);
  await until('first holds it', async () => discord.memberRoles(guild.id, first.userId), (r) => r?.length === 1);
  await link(app.owner, s, m, { platform: 'discord', uid: second.userId });
  await until('second holds it', async () => discord.memberRoles(guild.id, second.userId), (r) => r?.length === 1);
  expect(discord.memberRoles(guild.id, first.userId)).toEqual([]);
  expect(await statuses(s, m)).toEqual(['delivered']);
});

test('429 is waited out and 5xx retried: the role arrives once, the log shows the failed attempt', async () => {
  const { guild, role } = discordGuild();
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }]);
  const user = discord.addMember(guild.id);
  // More 5xx than the client retries within one call (2): the job fails, is retried by
  // graphile-worker, and then succeeds.
  discord.fault({ kind: 'rate-limit', operation: 'add_guild_member_role', retryAfter: 0.2 });
  discord.fault({ kind: 'server-error', operation: 'add_guild_member_role', status: 502, times: 3 });
  const m = await member(app.owner, s, { platform: 'discord', uid: user.userId });
  await grant(app.owner, s, m);
  await until('delivered after retries', () => statuses(s, m), (v) => v.join() === 'delivered', 30_000);
  expect(discord.memberRoles(guild.id, user.userId)).toEqual([role]);
  const calls = discord.requestsTo('add_guild_member_role').filter((r) => r.params.user_id === user.userId).map((r) => r.status);
  expect(calls).toEqual([429, 502, 502, 502, 204]);
  const { rows } = await app.owner.query<{ outcome: string; status_code: number | null }>(
    `select outcome, status_code from billing.platform_actions where community_id = $1 order by id`, [s.tenant.communityId]);
  expect(rows.map((r) => `${r.outcome}:${r.status_code}`)).toEqual(['retry:502', 'ok:null']);
});

test('403 Missing Permissions (a role above the bot) and 404 Unknown Member are action_required with a reason', async () => {
  const { guild } = discordGuild();
  const high = [...guild.roles.values()].find((r) => r.name === 'Admins')!.id;
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: high }]);
  const inGuild = discord.addMember(guild.id);
  const m1 = await member(app.owner, s, { platform: 'discord', uid: inGuild.userId });
  await grant(app.owner, s, m1);
  const [b1] = await until('403', () => deliveries(s, m1), (v) => v[0]?.delivery.status === 'action_required');
  expect(b1.delivery.error).toMatch(/Manage Roles.*above the benefit's role/);

  const s2 = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: [...guild.roles.values()].find((r) => r.name === 'Gold')!.id }]);
  const m2 = await member(app.owner, s2, { platform: 'discord', uid: discord.snowflake() });
  await grant(app.owner, s2, m2);
  const [b2] = await until('404', () => deliveries(s2, m2), (v) => v[0]?.delivery.status === 'action_required');
  expect(b2.delivery.error).toMatch(/not in the Discord server/);
  expect(discord.requestsTo('add_guild_member_role').filter((r) => r.params.user_id === inGuild.userId).map((r) => r.status)).toEqual([403]);
});

test('the connection\'s own bot token is what the bot sends; without one the delivery says which setting to fill', async () => {
  const { guild, role } = discordGuild();
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }], null);
  const user = discord.addMember(guild.id);
  const m = await member(app.owner, s, { platform: 'discord', uid: user.userId });
  await grant(app.owner, s, m);
  // Nothing can deliver (no token of its own, none for the deployment): no job is queued,
  // and the delivery says what is missing.
  const queued = async () => (await app.owner.query(`select 1 from graphile_worker._private_jobs where key = $1`, [`deliver:${s.tenant.communityId}:${m}`])).rowCount;
  expect(await queued()).toBe(0);
  const [b] = await deliveries(s, m);
  expect(b.delivery).toMatchObject({ status: 'action_required', error: expect.stringMatching(/No bot token.*settings\.bot_token/) });
  expect(discord.requestsTo('add_guild_member_role').filter((r) => r.params.user_id === user.userId)).toEqual([]);

  // A token given later queues the connection's members. One the platform does not know:
  // 401, action_required, and the token is never shown.
  const wrong = 'OwnTokenOfThisConnection.abcdef.ghijklmnopqrstuvwxyz0123';
  await storePlatformSecret(app.owner, new PlatformSecretBox(ENCRYPTION_KEY), s.tenant.communityId, s.pcfg, 'bot_token', wrong);
  const [b2] = await until('refused', () => deliveries(s, m), (v) => /rejected the bot token/.test(v[0]?.delivery.error ?? ''));
  expect(b2.delivery.status).toBe('action_required');
  const sent = discord.requestsTo('add_guild_member_role').filter((r) => r.params.user_id === user.userId);
  expect(sent.map((r) => [r.status, r.authorization])).toEqual([[401, `Bot ${wrong}`]]);
  expect(JSON.stringify(await deliveries(s, m))).not.toContain(wrong);
});

test('a deployment bot token appearing for a platform queues the members of its connections without one', async () => {
  const { guild, role } = discordGuild();
  const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }], null);
  const m = await member(app.owner, s, { platform: 'discord', uid: discord.addMember(guild.id).userId });
  await grant(app.owner, s, m);
  const key = `deliver:${s.tenant.communityId}:${m}`;
  const queued = async () => (await app.owner.query(`select 1 from graphile_worker._private_jobs where key = $1`, [key])).rowCount;
  expect(await queued()).toBe(0);
  // What a worker started with DISCORD_BOT_TOKEN records (then back to this file's worker's: none).
  try {
    const { rows: [r] } = await app.owner.query<{ n: number }>('select billing_private.platform_defaults_set(true, false) as n');
    expect(r.n).toBeGreaterThanOrEqual(1);
    // Queued (or, in a shared database, taken at once by this file's worker, which finds no token: action_required).
    const job = await queued();
    const attempted = (await app.owner.query(`select 1 from billing.benefit_deliveries where community_id = $1 and member_id = $2`, [s.tenant.communityId, m])).rowCount;
    expect(job! + attempted!).toBeGreaterThan(0);
  } finally {
    await app.owner.query('select billing_private.platform_defaults_set(false, false)');
  }
});

describe('kick_on_revoke', () => {
  test('a member whose last benefit on the server is revoked is removed from it; one still holding a benefit stays', async () => {
    const { guild, role, channel } = discordGuild();
    const s = await shop(app.owner, 'discord', { guild_id: guild.id, kick_on_revoke: 'true' }, [{ type: 'role', value: role }, { type: 'channel', value: channel }]);
    const user = discord.addMember(guild.id);
    const m = await member(app.owner, s, { platform: 'discord', uid: user.userId });
    // Two grants of the tier: the benefit stays while either is active.
    const [g1, g2] = [await grant(app.owner, s, m), await grant(app.owner, s, m)];
    await until('delivered', () => statuses(s, m), (v) => v.join() === 'delivered,delivered');
    await revoke(app.owner, s, g1);
    await new Promise((r) => setTimeout(r, 500));
    expect(discord.memberRoles(guild.id, user.userId)).toEqual([role]);
    expect(discord.requestsTo('delete_guild_member').filter((r) => r.params.user_id === user.userId)).toEqual([]);

    await revoke(app.owner, s, g2);
    await until('kicked', async () => discord.memberRoles(guild.id, user.userId), (r) => r === null);
    const kicks = discord.requestsTo('delete_guild_member').filter((r) => r.params.user_id === user.userId);
    expect(kicks.map((r) => [r.status, r.reason])).toEqual([[204, 'Membership ended: entitlement revoked (kick_on_revoke)']]);
    expect(discord.overwrites.get(channel)?.has(user.userId)).toBe(false);
    await until('rows gone', async () => (await app.owner.query(`select 1 from billing.benefit_deliveries where community_id = $1`, [s.tenant.communityId])).rowCount, (n) => n === 0);
    const { rows } = await app.owner.query<{ action: string }>(`select action from billing.platform_actions where community_id = $1 and outcome = 'ok'`, [s.tenant.communityId]);
    expect(rows.map((r) => r.action).sort()).toEqual(['add_channel', 'add_role', 'kick_member', 'remove_channel', 'remove_role']);
  });

  test('without kick_on_revoke the member stays in the server; a refused kick is action_required and tried again', async () => {
    const { guild, role } = discordGuild();
    const plain = await shop(app.owner, 'discord', { guild_id: guild.id, kick_on_revoke: 'false' }, [{ type: 'role', value: role }]);
    const stays = discord.addMember(guild.id);
    const m1 = await member(app.owner, plain, { platform: 'discord', uid: stays.userId });
    const g1 = await grant(app.owner, plain, m1);
    await until('delivered', () => statuses(plain, m1), (v) => v.join() === 'delivered');
    await revoke(app.owner, plain, g1);
    await until('role removed', async () => (await app.owner.query(`select 1 from billing.platform_actions where community_id = $1 and action = 'remove_role'`, [plain.tenant.communityId])).rowCount, (n) => n === 1);
    expect(discord.memberRoles(guild.id, stays.userId)).toEqual([]);

    const s = await shop(app.owner, 'discord', { guild_id: guild.id, kick_on_revoke: 'true' }, [{ type: 'role', value: role }]);
    const user = discord.addMember(guild.id);
    const m = await member(app.owner, s, { platform: 'discord', uid: user.userId });
    const g = await grant(app.owner, s, m);
    await until('delivered', () => statuses(s, m), (v) => v.join() === 'delivered');
    discord.fault({ kind: 'missing-permissions', operation: 'delete_guild_member' });
    await revoke(app.owner, s, g);
    const row = async () => (await app.owner.query<{ status: string; error: string; applied_uid: string }>(
      `select status, error, applied_uid from billing.benefit_deliveries where community_id = $1`, [s.tenant.communityId])).rows[0];
    const refused = await until('refused', row, (r) => r?.status === 'action_required');
    expect(refused.error).toMatch(/Kick Members/);
    expect(refused.applied_uid).toBe(user.userId);
    expect(discord.memberRoles(guild.id, user.userId)).toEqual([]);
    // The operator fixes the bot's permissions; the next run removes and kicks.
    await app.owner.query(`select billing_private.enqueue_deliveries(array[$1], array[$2])`, [s.tenant.communityId, m]);
    await until('kicked', async () => discord.memberRoles(guild.id, user.userId), (r) => r === null);
    await until('row gone', row, (r) => r === undefined);
  });
});

describe('reconciliation', () => {
  const box = () => new PlatformSecretBox(ENCRYPTION_KEY);
  const tokenOf = (c: ReconcileConnection) => (c.token ? box().decrypt(c.community_id, c.platform_config_id, 'bot_token', c.token) : null);
  const held = (guild: DiscordGuild, uid: string, role: string) => guild.members.get(uid)?.roles.has(role) ?? false;
  const actions = async (s: Shop) => (await app.owner.query<{ member_id: string | null; action: string; target: string; outcome: string }>(
    `select member_id, action, target, outcome from billing.platform_actions where community_id = $1 order by id`, [s.tenant.communityId])).rows;

  /** A guild with drift both ways, more members than a page: who must end up holding what. */
  async function drifted() {
    const guild = discord.addGuild({ botRolePosition: 10, roles: [{ name: 'Gold', position: 3 }, { name: 'Helpers', position: 2 }] });
    const [role, other] = ['Gold', 'Helpers'].map((n) => [...guild.roles.values()].find((r) => r.name === n)!.id);
    const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'role', value: role }]);
    const [kept, strippedByHand, revoked, unlinked, bot] = [discord.addMember(guild.id), discord.addMember(guild.id), discord.addMember(guild.id),
      discord.addMember(guild.id, { roles: [role, other] }), discord.addMember(guild.id, { roles: [role], bot: true })];
    for (let i = 0; i < 3; i++) discord.addMember(guild.id, { roles: [other] });
    const mKept = await member(app.owner, s, { platform: 'discord', uid: kept.userId });
    const mStripped = await member(app.owner, s, { platform: 'discord', uid: strippedByHand.userId });
    const mRevoked = await member(app.owner, s, { platform: 'discord', uid: revoked.userId });
    await grant(app.owner, s, mKept);
    await grant(app.owner, s, mStripped);
    const g = await grant(app.owner, s, mRevoked);
    await until('delivered', async () => [held(guild, kept.userId, role), held(guild, strippedByHand.userId, role), held(guild, revoked.userId, role)], (v) => v.every(Boolean));
    await until('recorded', () => statuses(s, mRevoked), (v) => v.join() === 'delivered');
    await revoke(app.owner, s, g);
    await until('revoked', async () => held(guild, revoked.userId, role), (v) => !v);
    await until('rows settled', async () => (await app.owner.query(`select 1 from billing.benefit_deliveries where community_id = $1 and member_id = $2`, [s.tenant.communityId, mRevoked])).rowCount, (n) => n === 0);
    // Drift made by hand: the role taken from an entitled member, given back to a revoked one.
    guild.members.get(strippedByHand.userId)!.roles.delete(role);
    guild.members.get(revoked.userId)!.roles.add(role);
    return { guild, role, other, s, kept, strippedByHand, revoked, unlinked, bot, mRevoked };
  }

  async function repaired(d: Awaited<ReturnType<typeof drifted>>) {
    const { guild, role, other } = d;
    await until('repaired', async () => [held(guild, d.strippedByHand.userId, role), held(guild, d.revoked.userId, role)], (v) => v[0] && !v[1]);
    expect(held(guild, d.kept.userId, role)).toBe(true);
    // The unlinked user loses the benefit's role only; a bot and other roles are never touched.
    expect(discord.memberRoles(guild.id, d.unlinked.userId)).toEqual([other]);
    expect(held(guild, d.bot.userId, role)).toBe(true);
    expect(guild.members.size).toBe(8);
  }

  test('repairs drift both ways through the delivery path, paging the guild within its rate limits', async () => {
    const d = await drifted();
    const before = discord.requests.length;
    discord.limit('list_guild_members', { limit: 2, windowMs: 400 });
    discord.limit('add_guild_member_role', { limit: 2, windowMs: 400 });
    const clients = new PlatformClients({ discordApiUrl: discord.url, telegramApiUrl: telegram.apiRoot, timeoutMs: 5000 });
    const seen: number[] = [];
    let summary;
    try {
      summary = await reconcileConnection(app.owner, clients, tokenOf, d.s.tenant.communityId, d.s.pcfg, { pageSize: 3, progress: (x) => seen.push(x.checked) });
    } finally {
      clients.close();
    }
    expect(summary).toMatchObject({ platform: 'discord', checked: 7, pages: 3, missing: 1, held_without_entitlement: 1, removed_unlinked: 1, members_queued: 2, errors: [] });
    expect(seen).toEqual([3, 5, 7]);
    // Pages of 3 (the bot is one of the 8), each after the last user id of the one before;
    // no request was refused for its rate (the client waited out the bucket).
    const pages = discord.requests.slice(before).filter((r) => r.operationId === 'list_guild_members' && r.params.guild_id === d.guild.id);
    const ids = [...d.guild.members.keys()].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
    expect(pages.map((r) => [r.status, r.query.limit, r.query.after])).toEqual([[200, '3', '0'], [200, '3', ids[2]], [200, '3', ids[5]]]);
    expect(pages[2].at - pages[0].at).toBeGreaterThan(350);
    await repaired(d);
    // Both members' jobs have recorded (the revoked one's row is gone, the other's delivered).
    await until('delivered again', () => app.owner.query(`select status from billing.benefit_deliveries where community_id = $1`, [d.s.tenant.communityId]),
      (r) => r.rows.length === 2 && r.rows.every((x) => x.status === 'delivered'));
    const log = await actions(d.s);
    expect(log.filter((a) => a.member_id === null)).toEqual([{ member_id: null, action: 'reconcile_remove_role', target: d.role, outcome: 'ok' }]);
    // The repairs of members went through their delivery jobs.
    expect(log.filter((a) => a.member_id === d.mRevoked).map((a) => a.action)).toEqual(['add_role', 'remove_role', 'remove_role']);

    // Nothing to repair now: a second run changes nothing.
    const again = new PlatformClients({ discordApiUrl: discord.url, telegramApiUrl: telegram.apiRoot, timeoutMs: 5000 });
    try {
      expect(await reconcileConnection(app.owner, again, tokenOf, d.s.tenant.communityId, d.s.pcfg, { pageSize: 1000 }))
        .toMatchObject({ checked: 7, pages: 1, missing: 0, held_without_entitlement: 0, removed_unlinked: 0, members_queued: 0 });
    } finally {
      again.close();
    }
  });

  test('channel overwrites: restored for the entitled, removed from others, an admin\'s own overwrite left alone', async () => {
    const { guild, channel } = discordGuild();
    const s = await shop(app.owner, 'discord', { guild_id: guild.id }, [{ type: 'channel', value: channel }]);
    const [entitled, linked, stranger, moderator] = [1, 2, 3, 4].map(() => discord.addMember(guild.id));
    const m1 = await member(app.owner, s, { platform: 'discord', uid: entitled.userId });
    const m2 = await member(app.owner, s, { platform: 'discord', uid: linked.userId });
    await grant(app.owner, s, m1);
    await until('delivered', () => statuses(s, m1), (v) => v.join() === 'delivered');
    const ow = discord.overwrites.get(channel)!;
    ow.delete(entitled.userId);
    ow.set(linked.userId, { type: 1, allow: 1024, deny: 0 });
    ow.set(stranger.userId, { type: 1, allow: 1024, deny: 0 });
    ow.set(moderator.userId, { type: 1, allow: 1024 | 2048, deny: 0 });
    const clients = new PlatformClients({ discordApiUrl: discord.url, telegramApiUrl: telegram.apiRoot, timeoutMs: 5000 });
    try {
      expect(await reconcileConnection(app.owner, clients, tokenOf, s.tenant.communityId, s.pcfg))
        .toMatchObject({ checked: 3, missing: 1, held_without_entitlement: 1, removed_unlinked: 1, errors: [] });
    } finally {
      clients.close();
    }
    await until('repaired', async () => [...ow.keys()].sort(), (k) => k.length === 2 && ow.has(entitled.userId) && ow.has(moderator.userId));
    expect(ow.get(entitled.userId)).toEqual({ type: 1, allow: 1024, deny: 0 });
    expect(discord.requestsTo('get_channel').at(-1)?.status).toBe(200);
    // The job records its calls after making them.
    await until('logged', async () => (await actions(s)).filter((a) => a.member_id === m2).map((a) => a.action), (a) => a.join() === 'remove_channel');
  });

  test('the worker\'s job reconciles every connection of a community; the CLI does the same and reports', async () => {
    const d = await drifted();
    await app.owner.query(`select graphile_worker.add_job('platform_connections__reconcile', json_build_object('community_id', $1::text))`, [d.s.tenant.communityId]);
    await repaired(d);

    // Drift again, repaired by the operator's command (a process of its own, the owner's connection).
    d.guild.members.get(d.strippedByHand.userId)!.roles.delete(d.role);
    d.guild.members.get(d.unlinked.userId)!.roles.add(d.role);
    const env = { DISCORD_API_URL: discord.url, WEBHOOK_ENCRYPTION_KEY: ENCRYPTION_KEY };
    const out = await runJson(['platforms', 'reconcile', '--community', d.s.tenant.communityId, '--page-size', '2'], env);
    expect(out.totals).toEqual({ checked: 7, missing: 1, held_without_entitlement: 0, removed_unlinked: 1, members_queued: 1, errors: 0 });
    expect(out.connections[0]).toMatchObject({ platform_config_id: d.s.pcfg, pages: 5 });
    await until('repaired again', async () => held(d.guild, d.strippedByHand.userId, d.role), Boolean);
    expect(held(d.guild, d.unlinked.userId, d.role)).toBe(false);

    const human = await runCli(['platforms', 'reconcile', '--community', d.s.tenant.communityId], env);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`${d.s.pcfg} (discord): 7 checked, 0 missing (delivery queued), 0 held without entitlement (removal queued), 0 removed from unlinked users`);
    expect(human.stdout).toContain('Repairs: 0');
    expect(human.stderr).toContain(`${d.s.pcfg} (discord): 7 checked, 0 repairs so far`);
    expect(human.stderr + human.stdout).not.toContain(discord.token);
  });
});

describe('Telegram', () => {
  let chat: TelegramChat;
  beforeAll(() => { chat = telegram.addChat({ botStatus: 'administrator' }); });

  test('a chat benefit sends a one-use invite link; revoking removes the member without a lasting ban', async () => {
    const s = await shop(app.owner, 'telegram', { chat_id: String(chat.id) }, [{ type: 'chat', value: String(chat.id) }]);
    const user = telegram.addUser({ startedBot: true });
    const m = await member(app.owner, s, { platform: 'telegram', uid: String(user.id) });
    const g = await grant(app.owner, s, m);
    await until('invite sent', () => statuses(s, m), (v) => v.join() === 'delivered');
    const sent = telegram.sent.filter((x) => x.chatId === user.id);
    expect(sent).toHaveLength(1);
    const link = /(https:\/\/t\.me\/\+\S+)/.exec(sent[0].text)![1];
    expect(telegram.requestsTo('createChatInviteLink').at(-1)?.params).toMatchObject({ chat_id: String(chat.id), member_limit: 1 });
    expect(telegram.join(link, user.id)).toEqual({ joined: true });
    expect(telegram.status(chat.id, user.id)).toBe('member');

    await revoke(app.owner, s, g);
    await until('removed', async () => telegram.status(chat.id, user.id), (st) => st === 'left');
    expect(telegram.requestsTo('banChatMember').length).toBeGreaterThan(0);
    expect(telegram.requestsTo('unbanChatMember').at(-1)?.params).toMatchObject({ only_if_banned: true });
  });

  test('reconciliation: a former member still in the chat is removed; one who left and an entitled one are left alone', async () => {
    const s = await shop(app.owner, 'telegram', { chat_id: String(chat.id) }, [{ type: 'chat', value: String(chat.id) }]);
    const [back, gone, entitled] = [1, 2, 3].map(() => telegram.addUser({ startedBot: true }));
    const ms: string[] = [];
    for (const u of [back, gone, entitled]) ms.push(await member(app.owner, s, { platform: 'telegram', uid: String(u.id) }));
    const grants = [];
    for (const m of ms) grants.push(await grant(app.owner, s, m));
    for (const m of ms) await until('invited', () => statuses(s, m), (v) => v.join() === 'delivered');
    for (const u of [back, gone, entitled]) chat.members.set(u.id, 'member');
    await revoke(app.owner, s, grants[0]);
    await revoke(app.owner, s, grants[1]);
    await until('removed', async () => [telegram.status(chat.id, back.id), telegram.status(chat.id, gone.id)], (v) => v.every((x) => x === 'left'));
    await until('rows settled', async () => (await app.owner.query(`select 1 from billing.benefit_deliveries where community_id = $1`, [s.tenant.communityId])).rowCount, (n) => n === 1);
    // One of them comes back by hand (an invite of someone else's); Telegram cannot list a chat.
    chat.members.set(back.id, 'member');
    const before = telegram.requestsTo('getChatMember').length;
    const clients = new PlatformClients({ discordApiUrl: discord.url, telegramApiUrl: telegram.apiRoot, timeoutMs: 5000 });
    const tokenOf = (c: ReconcileConnection) => new PlatformSecretBox(ENCRYPTION_KEY).decrypt(c.community_id, c.platform_config_id, 'bot_token', c.token!);
    try {
      expect(await reconcileConnection(app.owner, clients, tokenOf, s.tenant.communityId, s.pcfg))
        .toMatchObject({ platform: 'telegram', checked: 2, missing: 0, held_without_entitlement: 1, members_queued: 1, errors: [] });
    } finally {
      clients.close();
    }
    expect(telegram.requestsTo('getChatMember').slice(before).map((r) => Number(r.params.user_id)).sort()).toEqual([back.id, gone.id].sort());
    await until('removed again', async () => telegram.status(chat.id, back.id), (st) => st === 'left');
    expect(telegram.status(chat.id, entitled.id)).toBe('member');
    const log = async () => (await app.owner.query<{ action: string }>(
      `select action from billing.platform_actions where community_id = $1 and member_id = $2 order by id`, [s.tenant.communityId, ms[0]])).rows.map((r) => r.action);
    await until('logged', log, (a) => a.length === 3);
    expect(await log()).toEqual(['add_chat', 'remove_chat', 'remove_chat']);
  });

  test('a member who never started the bot is action_required; the invite link made is kept, not made again', async () => {
    const s = await shop(app.owner, 'telegram', { chat_id: String(chat.id) }, [{ type: 'chat', value: String(chat.id) }]);
    const user = telegram.addUser({ startedBot: false });
    const m = await member(app.owner, s, { platform: 'telegram', uid: String(user.id) });
    await grant(app.owner, s, m);
    const [b] = await until('403', () => deliveries(s, m), (v) => v[0]?.delivery.status === 'action_required');
    expect(b.delivery.error).toMatch(/press Start/);
    const made = telegram.requestsTo('createChatInviteLink').length;
    // They start the bot; the operator's retry (here: the job queued again) reuses the link.
    telegram.users.get(user.id)!.startedBot = true;
    await app.owner.query(`select billing_private.enqueue_deliveries(array[$1], array[$2])`, [s.tenant.communityId, m]);
    await until('delivered', () => statuses(s, m), (v) => v.join() === 'delivered');
    expect(telegram.requestsTo('createChatInviteLink').length).toBe(made);
    expect(telegram.sent.filter((x) => x.chatId === user.id)).toHaveLength(1);
  });
});
