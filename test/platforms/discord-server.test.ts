// The local Discord stand-in (test/support/discord-server.ts) driven by the real client,
// @discordjs/rest with Routes from discord-api-types: what the service will send for a
// Discord benefit (issue 29) is answered as Discord answers it, every request and answer is
// checked against Discord's published OpenAPI document, and the failure classes the worker
// must handle (429 with retry_after, 5xx, 403 Missing Permissions, 404 Unknown Member) reach
// the client as they would from Discord.
import { DiscordAPIError, HTTPError, RateLimitError, REST } from '@discordjs/rest';
import { Routes, type RESTGetAPIGuildMemberResult, type RESTGetAPIGuildMembersResult, type RESTGetAPIGuildRolesResult } from 'discord-api-types/v10';
import { startDiscordServer, type DiscordGuild, type DiscordServer } from '../support/discord-server';

let server: DiscordServer;
let guild: DiscordGuild;
let roleId: string;
let highRoleId: string;
let channelId: string;

// Fast tests: 5xx retried twice at most, and no 15 s timeout to sit through on a bug.
const client = (opts: ConstructorParameters<typeof REST>[0] = {}) =>
  new REST({ api: server.api, version: '10', retries: 2, timeout: 5000, ...opts }).setToken(server.token);

beforeEach(async () => {
  server = await startDiscordServer();
  guild = server.addGuild({ botRolePosition: 10, roles: [{ name: 'Gold', position: 3 }, { name: 'Admins', position: 20 }] });
  [roleId, highRoleId] = [...guild.roles.values()].filter((r) => r.name !== '@everyone').map((r) => r.id);
  channelId = server.addChannel(guild.id);
});
afterEach(async () => {
  server.assertClean();
  await server.close();
});

test('a role is granted and removed, with the audit-log reason Discord shows', async () => {
  const member = server.addMember(guild.id);
  const rest = client();
  await rest.put(Routes.guildMemberRole(guild.id, member.userId, roleId), { reason: 'Gold membership: entitlement granted' });
  expect(server.memberRoles(guild.id, member.userId)).toEqual([roleId]);
  // Granting twice is what Discord does too: 204, nothing changes (deliveries are at least once).
  await rest.put(Routes.guildMemberRole(guild.id, member.userId, roleId), { reason: 'retry' });
  expect(server.memberRoles(guild.id, member.userId)).toEqual([roleId]);
  await rest.delete(Routes.guildMemberRole(guild.id, member.userId, roleId), { reason: 'Gold membership: entitlement revoked' });
  expect(server.memberRoles(guild.id, member.userId)).toEqual([]);

  const calls = server.requests.filter((r) => r.template === '/guilds/{guild_id}/members/{user_id}/roles/{role_id}');
  expect(calls.map((r) => [r.method, r.status, r.reason])).toEqual([
    ['PUT', 204, 'Gold membership: entitlement granted'],
    ['PUT', 204, 'retry'],
    ['DELETE', 204, 'Gold membership: entitlement revoked'],
  ]);
  expect(calls.every((r) => r.authorization === `Bot ${server.token}`)).toBe(true);
});

test('a member is kicked; kicking again is 404 Unknown Member', async () => {
  const member = server.addMember(guild.id);
  const rest = client();
  await rest.delete(Routes.guildMember(guild.id, member.userId), { reason: 'kick_on_revoke' });
  expect(server.memberRoles(guild.id, member.userId)).toBeNull();
  const again = await rest.delete(Routes.guildMember(guild.id, member.userId)).catch((e: unknown) => e);
  expect(again).toBeInstanceOf(DiscordAPIError);
  expect(again).toMatchObject({ status: 404, code: 10007 });
});

test('a member permission overwrite lets the member view the channel, and is removed', async () => {
  const member = server.addMember(guild.id);
  const rest = client();
  // VIEW_CHANNEL (1 << 10). The document types allow/deny as integers (discord-api-types says strings).
  await rest.put(Routes.channelPermission(channelId, member.userId), { body: { type: 1, allow: 1024, deny: 0 }, reason: 'channel benefit' });
  expect(server.overwrites.get(channelId)?.get(member.userId)).toEqual({ type: 1, allow: 1024, deny: 0 });
  await rest.delete(Routes.channelPermission(channelId, member.userId), { reason: 'channel benefit revoked' });
  expect(server.overwrites.get(channelId)?.has(member.userId)).toBe(false);
});

test('reads answer bodies that validate: a member, the roles, the members page by page', async () => {
  const users = Array.from({ length: 5 }, () => server.addMember(guild.id, { roles: [roleId] }).userId);
  const rest = client();
  const one = (await rest.get(Routes.guildMember(guild.id, users[2]))) as RESTGetAPIGuildMemberResult;
  expect(one.user.id).toBe(users[2]);
  expect(one.roles).toEqual([roleId]);
  const roles = (await rest.get(Routes.guildRoles(guild.id))) as RESTGetAPIGuildRolesResult;
  expect(roles.map((r) => r.name)).toEqual(['@everyone', 'Gold', 'Admins']);

  // Reconciliation pages through a guild with limit and after (the last user id seen).
  const seen: string[] = [];
  let after = '0';
  for (;;) {
    const page = (await rest.get(Routes.guildMembers(guild.id), { query: new URLSearchParams({ limit: '2', after }) })) as RESTGetAPIGuildMembersResult;
    if (page.length === 0) break;
    seen.push(...page.map((m) => m.user.id));
    after = page[page.length - 1].user.id;
  }
  expect(seen).toEqual([...users].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)));
  expect(server.requestsTo('list_guild_members')).toHaveLength(4);
});

test('a 429 with retry_after is waited out by @discordjs/rest, then the grant succeeds', async () => {
  const member = server.addMember(guild.id);
  server.fault({ kind: 'rate-limit', operation: 'add_guild_member_role', retryAfter: 0.15 });
  const limited: number[] = [];
  const rest = client();
  rest.on('rateLimited', (info) => limited.push(info.retryAfter));
  await rest.put(Routes.guildMemberRole(guild.id, member.userId, roleId));
  expect(server.memberRoles(guild.id, member.userId)).toEqual([roleId]);
  const [first, second] = server.requestsTo('add_guild_member_role');
  expect([first.status, second.status]).toEqual([429, 204]);
  expect(second.at - first.at).toBeGreaterThanOrEqual(150);
});

test('a global 429 (X-RateLimit-Global) is waited out too', async () => {
  const member = server.addMember(guild.id);
  server.fault({ kind: 'rate-limit', global: true, retryAfter: 0.1 });
  await client().put(Routes.guildMemberRole(guild.id, member.userId, roleId));
  const [first, second] = server.requestsTo('add_guild_member_role');
  expect([first.status, second.status]).toEqual([429, 204]);
  expect(second.at - first.at).toBeGreaterThanOrEqual(100);
});

test('with rejectOnRateLimit a 429 surfaces as RateLimitError carrying the wait', async () => {
  const member = server.addMember(guild.id);
  server.fault({ kind: 'rate-limit', operation: 'add_guild_member_role', retryAfter: 0.2 });
  const e = await client({ rejectOnRateLimit: () => true }).put(Routes.guildMemberRole(guild.id, member.userId, roleId)).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(RateLimitError);
  expect((e as RateLimitError).retryAfter).toBeGreaterThanOrEqual(200);
  expect(server.memberRoles(guild.id, member.userId)).toEqual([]);
});

test('a 5xx is retried by the client; past its retries it surfaces as HTTPError', async () => {
  const member = server.addMember(guild.id);
  server.fault({ kind: 'server-error', operation: 'add_guild_member_role', status: 502 });
  await client().put(Routes.guildMemberRole(guild.id, member.userId, roleId));
  expect(server.requestsTo('add_guild_member_role').map((r) => r.status)).toEqual([502, 204]);

  server.fault({ kind: 'server-error', operation: 'delete_guild_member_role', times: Infinity });
  const e = await client().delete(Routes.guildMemberRole(guild.id, member.userId, roleId)).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(HTTPError);
  expect((e as HTTPError).status).toBe(500);
  expect(server.requestsTo('delete_guild_member_role')).toHaveLength(3); // first try + retries: 2
  expect(server.memberRoles(guild.id, member.userId)).toEqual([roleId]);
});

test('403 Missing Permissions (role above the bot, or injected) and 404 Unknown Member surface as DiscordAPIError', async () => {
  const member = server.addMember(guild.id);
  const rest = client();
  const above = await rest.put(Routes.guildMemberRole(guild.id, member.userId, highRoleId)).catch((x: unknown) => x);
  expect(above).toBeInstanceOf(DiscordAPIError);
  expect(above).toMatchObject({ status: 403, code: 50013, rawError: { code: 50013, message: 'Missing Permissions' } });

  server.fault({ kind: 'missing-permissions', operation: 'set_channel_permission_overwrite' });
  const denied = await rest.put(Routes.channelPermission(channelId, member.userId), { body: { type: 1, allow: 1024 } }).catch((x: unknown) => x);
  expect(denied).toMatchObject({ status: 403, code: 50013 });

  const stranger = server.snowflake();
  const missing = await rest.put(Routes.guildMemberRole(guild.id, stranger, roleId)).catch((x: unknown) => x);
  expect(missing).toBeInstanceOf(DiscordAPIError);
  expect(missing).toMatchObject({ status: 404, code: 10007, rawError: { message: 'Unknown Member' } });

  server.fault({ kind: 'unknown-member', operation: 'get_guild_member' });
  await expect(rest.get(Routes.guildMember(guild.id, member.userId))).rejects.toMatchObject({ status: 404, code: 10007 });
  // No retry on 4xx: each failed once.
  expect(server.requests.filter((r) => r.status >= 400)).toHaveLength(4);
});

test('an enforced per-route limit is respected through the bucket headers, per guild', async () => {
  server.limit('add_guild_member_role', { limit: 3, windowMs: 300 });
  const members = Array.from({ length: 7 }, () => server.addMember(guild.id).userId);
  const rest = client();
  const started = performance.now();
  await Promise.all(members.map((u) => rest.put(Routes.guildMemberRole(guild.id, u, roleId))));
  const elapsed = performance.now() - started;
  expect(members.every((u) => server.memberRoles(guild.id, u)?.includes(roleId))).toBe(true);
  const calls = server.requestsTo('add_guild_member_role');
  const granted = calls.filter((r) => r.status === 204);
  expect(granted).toHaveLength(7);
  // 7 grants at 3 per 300 ms window need at least two window resets.
  expect(elapsed).toBeGreaterThanOrEqual(600);
  // The client read the bucket (X-RateLimit-Bucket, -Remaining, -Reset-After) and waited for
  // the reset instead of being refused: no 429 at all, at most 3 requests per window.
  expect(calls.filter((r) => r.status === 429)).toEqual([]);
  const windows = [calls.slice(0, 3), calls.slice(3, 6), calls.slice(6)];
  for (let i = 1; i < windows.length; i++) expect(windows[i][0].at - windows[i - 1][0].at).toBeGreaterThanOrEqual(300);
});

test('the add-member endpoint (guilds.join) takes an OAuth2 access token', async () => {
  const userId = server.snowflake();
  server.accessTokens.set('oauth-access-token', userId);
  const rest = client();
  const added = (await rest.put(Routes.guildMember(guild.id, userId), { body: { access_token: 'oauth-access-token', roles: [roleId] } })) as RESTGetAPIGuildMemberResult;
  expect(added.roles).toEqual([roleId]);
  await rest.put(Routes.guildMember(guild.id, userId), { body: { access_token: 'oauth-access-token' } });
  expect(server.requestsTo('add_guild_member').map((r) => r.status)).toEqual([201, 204]);
  await expect(rest.put(Routes.guildMember(guild.id, server.snowflake()), { body: { access_token: 'wrong' } }))
    .rejects.toMatchObject({ status: 403, code: 50025 });
});

test('an interaction callback is accepted without the bot token and recorded', async () => {
  const interactionId = server.snowflake();
  await client().post(Routes.interactionCallback(interactionId, 'interaction-token'), {
    auth: false, body: { type: 4, data: { content: 'Linked to your membership.', flags: 64 } },
  });
  expect(server.interactionResponses).toEqual([
    { interactionId, token: 'interaction-token', body: { type: 4, data: { content: 'Linked to your membership.', flags: 64 } } },
  ]);
});

describe('the validator fails what the OpenAPI document does not allow', () => {
  const raw = (method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bot ${server.token}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });

  test('a malformed snowflake in the path is a recorded violation and 400 Invalid Form Body', async () => {
    const member = server.addMember(guild.id);
    const res = await raw('PUT', `/guilds/${guild.id}/members/${member.userId}/roles/gold`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ code: 50035, message: 'Invalid Form Body' });
    expect(server.memberRoles(guild.id, member.userId)).toEqual([]);
    expect(() => server.assertClean()).toThrow(/path parameter role_id \("gold"\) must match pattern/);
    expect(server.takeViolations()).toHaveLength(1);
  });

  test('a body that breaks the requestBody schema, or carries an unknown field, is a violation', async () => {
    const member = server.addMember(guild.id);
    const path = `/channels/${channelId}/permissions/${member.userId}`;
    expect((await raw('PUT', path, { body: { type: 5, allow: 1024 } })).status).toBe(400);
    expect((await raw('PUT', path, { body: { type: 1, allow: '1024' } })).status).toBe(400);
    expect((await raw('PUT', path, { body: { type: 1, allow: 1024, alow: 1 } })).status).toBe(400);
    expect(server.overwrites.get(channelId)?.size).toBe(0);
    const problems = server.takeViolations().map((v) => v.problems.join('; '));
    expect(problems).toEqual([
      expect.stringContaining('body/type'),
      expect.stringContaining('body/allow must be integer,null'),
      expect.stringContaining('must NOT have unevaluated properties (alow)'),
    ]);
  });

  test('a missing or malformed Authorization, an unknown path, a wrong method, a bad query, are violations', async () => {
    const member = server.addMember(guild.id);
    expect((await raw('GET', `/guilds/${guild.id}/members/${member.userId}`, { headers: { authorization: '' } })).status).toBe(401);
    expect((await raw('GET', `/guilds/${guild.id}/members/${member.userId}`, { headers: { authorization: server.token } })).status).toBe(401);
    expect((await raw('GET', `/guilds/${guild.id}/memberz`)).status).toBe(404);
    expect((await raw('POST', `/guilds/${guild.id}/members/${member.userId}/roles/${roleId}`)).status).toBe(405);
    expect((await raw('GET', `/guilds/${guild.id}/members?limit=5000`)).status).toBe(400);
    expect((await raw('GET', `/guilds/${guild.id}/members?limit=5&before=1`)).status).toBe(400);
    expect((await raw('DELETE', `/guilds/${guild.id}/members/${member.userId}`, { headers: { 'x-audit-log-reason': '%E0%A4%A' } })).status).toBe(400);
    expect(server.takeViolations().map((v) => v.problems[0])).toEqual([
      expect.stringContaining('Authorization is not "Bot <token>"'),
      expect.stringContaining('Authorization is not "Bot <token>"'),
      expect.stringContaining('no path of the OpenAPI document matches'),
      expect.stringContaining('POST is not documented'),
      expect.stringContaining('query parameter limit ("5000") must be <= 1000'),
      expect.stringContaining('query parameter before is not documented'),
      expect.stringContaining('X-Audit-Log-Reason is not URI-encoded'),
    ]);
    expect(server.memberRoles(guild.id, member.userId)).toEqual([]);
  });

  test('a fault or limit naming no operation of the document is refused, not silently idle', () => {
    expect(() => server.fault({ kind: 'server-error', operation: 'add_member_role' })).toThrow(/neither an operationId/);
    expect(() => server.limit('PUT /guilds/{guild_id}/members/{user_id}/role/{role_id}', { limit: 1, windowMs: 1000 })).toThrow(/neither an operationId/);
    server.fault({ kind: 'server-error', operation: 'PUT /guilds/{guild_id}/members/{user_id}/roles/{role_id}', times: 0 });
  });

  test('a well-formed but wrong bot token is 401, as for a revoked bot, and not a violation', async () => {
    const member = server.addMember(guild.id);
    const e = await new REST({ api: server.api, version: '10' }).setToken('revoked-token')
      .put(Routes.guildMemberRole(guild.id, member.userId, roleId)).catch((x: unknown) => x);
    expect(e).toMatchObject({ status: 401, code: 0 });
    expect(server.violations).toEqual([]);
  });
});
