// Issue 29 item 1: platform connections. The catalog's platforms[] configure a Discord
// server (guild_id, public_key, bot_token) or a Telegram chat (chat_id, bot_token).
// Settings are checked per platform by the database, with the field named through
// `billing catalog apply`; bot tokens are encrypted at rest (billing_private, owner
// only), write-only, and appear in no answer: not the CLI's, the export, the API, MCP,
// GraphQL, nor anything an operator's SQL login reads. The platforms' API base URLs
// come from the environment.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { apiBaseUrl, loadConfig } from '../../src/core/config';
import { applyCatalog, CatalogError, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { PlatformSecretBox, platformSecretCiphertext, PlatformTokens } from '../../src/domain/catalog/platform-secrets';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { dashboardOperation } from '../../src/operations';
import { call, createTenant, startApp, TEST_DB, TestApp } from '../support/app';
import { cli } from '../support/cli';
import { runCli, runFailing, runJson } from '../support/cli-process';
import { createExecutor } from '../support/dashboard';
import { callTool, connect, resultJson } from '../support/mcp-client';
import { catalog as shopCatalog, checkout, externalSubject, pay } from '../support/shop';

const ENCRYPTION_KEY = crypto.randomBytes(32).toString('base64');
// Shaped like real tokens, random so a hit anywhere can only be a leak.
const DISCORD_TOKEN = `${crypto.randomBytes(18).toString('base64url')}.${crypto.randomBytes(5).toString('base64url')}.${crypto.randomBytes(27).toString('base64url')}`;
const TELEGRAM_TOKEN = `${crypto.randomInt(100000000, 999999999)}:${crypto.randomBytes(26).toString('base64url')}`;
const PUBLIC_KEY = crypto.randomBytes(32).toString('hex');
const TOKENS = [DISCORD_TOKEN, TELEGRAM_TOKEN];

const discord = (settings: Record<string, unknown> = {}) => ({ key: 'discord-main', platform: 'discord', name: 'Main server',
  settings: { guild_id: '1234567890123456789', public_key: PUBLIC_KEY, bot_token: DISCORD_TOKEN, ...settings } });
const telegram = (settings: Record<string, unknown> = {}) => ({ key: 'tg', platform: 'telegram', name: 'Announcements',
  settings: { chat_id: '-1001234567890', bot_token: TELEGRAM_TOKEN, ...settings } });

let app: TestApp;
let dir: string;
beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platforms-'));
});
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await app?.close();
});

let files = 0;
function writeCatalog(content: unknown): string {
  const file = path.join(dir, `catalog-${++files}.json`);
  fs.writeFileSync(file, JSON.stringify(content));
  return file;
}
const CLI_ENV = { WEBHOOK_ENCRYPTION_KEY: ENCRYPTION_KEY };
const leaks = (text: string) => TOKENS.filter((t) => text.includes(t));

async function stored(communityId: string) {
  const { rows } = await app.owner.query<{ key: string; platform: string; settings: Record<string, string>; name: string | null; ciphertext: string | null; updated_at: Date | null }>(
    `select pc.key, pc.platform, pc.settings, s.name, s.ciphertext, s.updated_at from billing.platform_configs pc
     left join billing_private.platform_secrets s on s.community_id = pc.community_id and s.platform_config_id = pc.id
     where pc.community_id = $1 order by pc.key`, [communityId]);
  return rows;
}

describe('config', () => {
  test('DISCORD_API_URL and TELEGRAM_API_URL default to the platforms\' own, and may point elsewhere', () => {
    const defaults = loadConfig({});
    expect(defaults.discordApiUrl).toBe('https://discord.com/api/v10');
    expect(defaults.telegramApiUrl).toBe('https://api.telegram.org');
    expect(defaults.discordBotToken).toBeNull();
    expect(defaults.telegramBotToken).toBeNull();
    const local = loadConfig({ DISCORD_API_URL: 'http://127.0.0.1:4100/api/v10/', TELEGRAM_API_URL: 'http://127.0.0.1:4200',
      DISCORD_BOT_TOKEN: DISCORD_TOKEN, TELEGRAM_BOT_TOKEN: TELEGRAM_TOKEN });
    expect(local.discordApiUrl).toBe('http://127.0.0.1:4100/api/v10');
    expect(local.telegramApiUrl).toBe('http://127.0.0.1:4200');
    expect(local.discordBotToken).toBe(DISCORD_TOKEN);
    expect(local.telegramBotToken).toBe(TELEGRAM_TOKEN);
    expect(loadConfig({ DISCORD_API_URL: '' }).discordApiUrl).toBe('https://discord.com/api/v10');
  });

  test('a base URL that is not an http(s) URL is refused, naming the variable', () => {
    expect(() => loadConfig({ DISCORD_API_URL: 'discord.com/api' })).toThrow(/^DISCORD_API_URL: expected an http\(s\) URL/);
    expect(() => loadConfig({ TELEGRAM_API_URL: 'ftp://proxy.example' })).toThrow(/^TELEGRAM_API_URL: /);
    expect(() => apiBaseUrl('X', 'https://user:pw@proxy.example', 'https://a.example')).toThrow(/without query, fragment or credentials/);
  });
});

describe('catalog apply', () => {
  test('stores each connection\'s settings, its bot token only encrypted, and prints neither token', async () => {
    const tenant = await createTenant(app.owner);
    const file = writeCatalog({ platforms: [discord(), telegram()] });
    const run = await runCli(['catalog', 'apply', file, '--community', tenant.communityId, '--json'], CLI_ENV);
    expect(run.code).toBe(0);
    expect(leaks(run.stdout + run.stderr)).toEqual([]);
    const out = JSON.parse(run.stdout);
    expect(Object.keys(out.platforms)).toEqual(['discord-main', 'tg']);

    const rows = await stored(tenant.communityId);
    expect(rows.map((r) => [r.key, r.platform, r.settings, r.name])).toEqual([
      ['discord-main', 'discord', { guild_id: '1234567890123456789', public_key: PUBLIC_KEY }, 'bot_token'],
      ['tg', 'telegram', { chat_id: '-1001234567890' }, 'bot_token'],
    ]);
    // The column holds ciphertext only, bound to its connection: it decrypts with the
    // service's key, and as that connection only.
    const box = new PlatformSecretBox(ENCRYPTION_KEY);
    for (const [r, token] of [[rows[0], DISCORD_TOKEN], [rows[1], TELEGRAM_TOKEN]] as const) {
      expect(r.ciphertext).toMatch(/^v1:/);
      expect(leaks(r.ciphertext!)).toEqual([]);
      expect(box.decrypt(tenant.communityId, out.platforms[r.key], 'bot_token', r.ciphertext!)).toBe(token);
    }
    expect(() => box.decrypt(tenant.communityId, out.platforms.tg, 'bot_token', rows[0].ciphertext!)).toThrow();
    // No table of the billing schema holds a token anywhere.
    const { rows: dump } = await app.owner.query<{ t: string }>(
      `select string_agg(t::text, '\n') as t from (select row_to_json(pc)::text as t from billing.platform_configs pc where community_id = $1
       union all select row_to_json(e)::text from billing.events e where community_id = $1) t`, [tenant.communityId]);
    expect(leaks(dump[0].t ?? '')).toEqual([]);

    // The service reads the ciphertext of its own community's connections.
    const client = await app.api.connect();
    try {
      await client.query('begin');
      await client.query(`select set_config('app.community_id', $1, true)`, [tenant.communityId]);
      expect(await platformSecretCiphertext(client, out.platforms['discord-main'])).toBe(rows[0].ciphertext);
      // The token a connection acts with: its own, else the deployment's.
      const defaults = { discord: 'deployment-discord', telegram: 'deployment-telegram' };
      const ctx = { communityId: tenant.communityId, query: client.query.bind(client) } as Parameters<PlatformTokens['botToken']>[0];
      const tokens = new PlatformTokens(ENCRYPTION_KEY, defaults);
      expect(await tokens.botToken(ctx, out.platforms['discord-main'], 'discord')).toBe(DISCORD_TOKEN);
      expect(await tokens.botToken(ctx, out.platforms.tg, 'telegram')).toBe(TELEGRAM_TOKEN);
      expect(await tokens.botToken(ctx, 'pcfg_none', 'telegram')).toBe('deployment-telegram');
      const otherKey = new PlatformTokens(crypto.randomBytes(32).toString('base64'), defaults);
      const refused = otherKey.botToken(ctx, out.platforms.tg, 'telegram');
      await expect(refused).rejects.toThrow(/encrypted with another WEBHOOK_ENCRYPTION_KEY/);
      await expect(refused).rejects.not.toThrow(TELEGRAM_TOKEN);
      await expect(new PlatformTokens(null, defaults).botToken(ctx, out.platforms.tg, 'telegram')).rejects.toThrow(/no valid WEBHOOK_ENCRYPTION_KEY/);
      await client.query(`select set_config('app.community_id', $1, true)`, ['com_other']);
      expect(await platformSecretCiphertext(client, out.platforms['discord-main'])).toBeNull();
      await expect(client.query('select * from billing_private.platform_secrets')).rejects.toThrow(/permission denied/);
    } finally {
      await client.query('rollback');
      client.release();
    }
  });

  test('a token is write-only: absent keeps it, the same changes nothing, another replaces it, null removes it', async () => {
    const tenant = await createTenant(app.owner);
    const first = await runJson(['catalog', 'apply', writeCatalog({ platforms: [discord(), telegram()] }), '--community', tenant.communityId], CLI_ENV);
    const before = await stored(tenant.communityId);

    const same = await runJson(['catalog', 'apply', writeCatalog({ platforms: [discord(), telegram()] }), '--community', tenant.communityId], CLI_ENV);
    expect(same.changes).toEqual([]);
    const { bot_token: _d, ...discordSettings } = discord().settings;
    const { bot_token: _t, ...telegramSettings } = telegram().settings;
    const without = await runJson(['catalog', 'apply', writeCatalog({ platforms: [{ ...discord(), settings: discordSettings }, { ...telegram(), settings: telegramSettings }] }),
      '--community', tenant.communityId], CLI_ENV);
    expect(without.changes).toEqual([]);
    expect(await stored(tenant.communityId)).toEqual(before);

    const rotated = `${TELEGRAM_TOKEN.split(':')[0]}:${crypto.randomBytes(26).toString('base64url')}`;
    const changed = await runJson(['catalog', 'apply', writeCatalog({ platforms: [telegram({ bot_token: rotated })] }), '--community', tenant.communityId], CLI_ENV);
    expect(changed.changes).toEqual([{ kind: 'platform', key: 'tg', id: first.platforms.tg, action: 'updated', fields: ['bot_token'] }]);
    const after = await stored(tenant.communityId);
    expect(new PlatformSecretBox(ENCRYPTION_KEY).decrypt(tenant.communityId, first.platforms.tg, 'bot_token', after[1].ciphertext!)).toBe(rotated);
    expect(after[0]).toEqual(before[0]);

    const removed = await runJson(['catalog', 'apply', writeCatalog({ platforms: [discord({ bot_token: null })] }), '--community', tenant.communityId], CLI_ENV);
    expect(removed.changes).toEqual([{ kind: 'platform', key: 'discord-main', id: first.platforms['discord-main'], action: 'updated', fields: ['bot_token'] }]);
    expect((await stored(tenant.communityId))[0]).toMatchObject({ key: 'discord-main', name: null, ciphertext: null });
  });

  test('invalid settings are refused with the field named, through the CLI, and nothing is written', async () => {
    const tenant = await createTenant(app.owner);
    const refused = async (platforms: unknown[]) => {
      const r = await runFailing(['catalog', 'apply', writeCatalog({ platforms }), '--community', tenant.communityId], CLI_ENV);
      expect(leaks(r.stderr)).toEqual([]);
      return r.message.replace(/^billing: invalid catalog: /, '');
    };
    expect(await refused([discord({ guild_id: 'my-server' })]))
      .toBe('platforms[0].settings.guild_id: expected a Discord snowflake (the server id: digits, e.g. "1234567890123456789")');
    expect(await refused([telegram(), discord({ guild_id: 1234 })])).toBe('platforms[1].settings.guild_id: expected a string');
    expect(await refused([discord({ guild_id: undefined })])).toBe('platforms[0].settings.guild_id: required (the Discord server id)');
    expect(await refused([discord({ public_key: 'abc123' })]))
      .toBe('platforms[0].settings.public_key: expected the application\'s public key (64 hexadecimal digits)');
    expect(await refused([discord({ chat_id: '-100' })]))
      .toBe('platforms[0].settings.chat_id: unknown setting for discord (expected guild_id, public_key, client_id, kick_on_revoke, and bot_token, client_secret)');
    expect(await refused([discord({ kick_on_revoke: 'yes' })]))
      .toBe('platforms[0].settings.kick_on_revoke: expected "true" or "false" (remove the member from the server when their last benefit on it is revoked)');
    expect(await refused([telegram({ kick_on_revoke: 'true' })]))
      .toBe('platforms[0].settings.kick_on_revoke: unknown setting for telegram (expected chat_id, and bot_token)');
    expect(await refused([telegram({ chat_id: 'not a chat' })]))
      .toBe('platforms[0].settings.chat_id: expected a Telegram chat id (an integer, e.g. "-1001234567890") or a public @channelname');
    expect(await refused([telegram({ chat_id: undefined })])).toBe('platforms[0].settings.chat_id: required (the Telegram chat: its id or @channelname)');
    expect(await refused([telegram({ bot_token: DISCORD_TOKEN })]))
      .toBe('platforms[0].settings.bot_token: expected a Telegram bot token (<bot id>:<secret>, from BotFather) or null');
    expect(await refused([discord({ bot_token: TELEGRAM_TOKEN })]))
      .toBe('platforms[0].settings.bot_token: expected a Discord bot token (three dot-separated parts, from the application\'s Bot page) or null');
    expect(await stored(tenant.communityId)).toEqual([]);

    // What passes: a public channel's name, a chat's id, no public key.
    await runJson(['catalog', 'apply', writeCatalog({ platforms: [discord({ public_key: undefined }), telegram({ chat_id: '@my_channel' })] }),
      '--community', tenant.communityId], CLI_ENV);
    expect((await stored(tenant.communityId)).map((r) => r.settings)).toEqual([{ guild_id: '1234567890123456789' }, { chat_id: '@my_channel' }]);
  });

  test('the database keeps the rule for every door: settings checked, a token in clear refused', async () => {
    const tenant = await createTenant(app.owner);
    const insert = (platform: string, settings: unknown) => app.owner.query(
      `insert into billing.platform_configs (community_id, key, platform, settings) values ($1, $2, $3, $4::jsonb)`,
      [tenant.communityId, `k${++files}`, platform, JSON.stringify(settings)]);
    await expect(insert('discord', { guild_id: 'x' })).rejects.toThrow(/platform_configs_settings_valid/);
    await expect(insert('telegram', { chat_id: '@my_channel', bot_token: TELEGRAM_TOKEN })).rejects.toThrow(/platform_configs_settings_valid/);
    const { rows } = await app.owner.query(`select billing.platform_settings_problem('telegram', '{"chat_id": "1", "bot_token": "x"}') as p`);
    expect(rows[0].p).toMatch(/^settings\.bot_token: a bot token is stored encrypted/);
    await insert('telegram', { chat_id: '42' });
  });

  test('a token cannot be stored without the encryption key, and a malformed one is never quoted', async () => {
    const tenant = await createTenant(app.owner);
    await expect(applyCatalog(app.owner, tenant.communityId, parseCatalog({ platforms: [discord()] })))
      .rejects.toThrow(new CatalogError('platforms[0].settings.bot_token', 'bot tokens are stored encrypted: set WEBHOOK_ENCRYPTION_KEY (the one the service uses)'));
    expect(await stored(tenant.communityId)).toEqual([]);
    const bad = `${DISCORD_TOKEN} `;
    try {
      parseCatalog({ platforms: [discord({ bot_token: bad })] });
      throw new Error('expected a refusal');
    } catch (err) {
      expect(err).toBeInstanceOf(CatalogError);
      expect((err as Error).message).not.toContain(DISCORD_TOKEN);
    }
  });
});

describe('no answer shows a token', () => {
  let tenant: Awaited<ReturnType<typeof createTenant>>;
  let memberId: string;
  beforeAll(async () => {
    tenant = await createTenant(app.owner);
    const file = parseCatalog({ ...JSON.parse(JSON.stringify(shopCatalog())), platforms: [discord(), telegram()],
      entitlements: [
        { key: 'vip-chat', name: 'VIP chat', benefits: [{ platform: 'discord-main', type: 'role', value: '9876' }, { platform: 'tg', type: 'chat', value: '@vip_chat' }] },
        { key: 'member-chat', name: 'Member chat', benefits: [{ platform: 'discord-main', type: 'role', value: '1111' }] },
      ] });
    const ids = await applyCatalog(app.owner, tenant.communityId, file, { encryptionKey: ENCRYPTION_KEY });
    const link = await checkout(app, { ...tenant, ids }, { tier_id: ids.tiers.gold, plan_id: ids.plans['gold-monthly'], subject: externalSubject() });
    expect(link.status).toBe(200);
    expect((await pay(link.body.url)).status).toBe(303);
    memberId = link.body.member_id;
  });

  test('the catalog export: settings without the token (absent keeps it when applied back)', async () => {
    const invite = await inviteOperator(app.owner, tenant.communityId, `owner-${Date.now()}@example.com`, 'owner');
    const signed = await signInWithLink(app.api, invite.token, '10.29.1.1');
    if (!signed.ok) throw new Error('link refused');
    const out = await createExecutor(app).run(dashboardOperation('get_catalog_file'), { key: null, session: signed.session.token, ip: '10.29.1.1' }, {});
    expect(out.problem).toBeFalsy();
    const text = typeof out.body === 'string' ? out.body : JSON.stringify(out.body);
    expect(leaks(text)).toEqual([]);
    const file = JSON.parse(text);
    expect(file.platforms).toEqual([
      { key: 'discord-main', platform: 'discord', name: 'Main server', settings: { guild_id: '1234567890123456789', public_key: PUBLIC_KEY } },
      { key: 'tg', platform: 'telegram', name: 'Announcements', settings: { chat_id: '-1001234567890' } },
    ]);
    const before = await stored(tenant.communityId);
    const again = await applyCatalog(app.owner, tenant.communityId, parseCatalog(file), { encryptionKey: ENCRYPTION_KEY });
    expect(again.changes).toEqual([]);
    expect(await stored(tenant.communityId)).toEqual(before);
  });

  test('the API, MCP and GraphQL show the benefits, never a token', async () => {
    const api = await call(app.url, 'GET', `/v1/members/${memberId}/entitlements`, { key: tenant.key });
    expect(api.status).toBe(200);
    expect(JSON.stringify(api.body)).toContain('"platform":"telegram"');
    const plans = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
    const client = await connect(app.url, tenant.key);
    let mcp: unknown;
    try {
      mcp = resultJson(await callTool(client, 'get_member_entitlements', { member_id: memberId }));
    } finally {
      await client.close();
    }
    expect(JSON.stringify(mcp)).toContain('"platform_config_id"');
    const gql = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant.key}` },
      body: JSON.stringify({ query: '{ memberEntitlements(first: 10) { nodes { id benefits } } }' }) });
    const graph = await gql.text();
    expect(graph).toContain('9876');
    expect(leaks([JSON.stringify(api.body), JSON.stringify(plans.body), JSON.stringify(mcp), graph].join('\n'))).toEqual([]);
  });

  test('an operator\'s SQL login reads the settings, not the token', async () => {
    process.env.DATABASE_URL = TEST_DB();
    const granted = await cli('sql-access', 'grant', '--community', tenant.communityId, '--json');
    expect(granted.code).toBe(0);
    const op = new pg.Pool({ connectionString: JSON.parse(granted.out).connection_string, max: 1 });
    try {
      const { rows } = await op.query('select key, settings from billing.platform_configs order by key');
      expect(rows.map((r) => r.key)).toEqual(['discord-main', 'tg']);
      expect(leaks(JSON.stringify(rows))).toEqual([]);
      await expect(op.query('select ciphertext from billing_private.platform_secrets')).rejects.toThrow(/permission denied/);
      await expect(op.query(`select billing_private.platform_secret_ciphertext('x', 'bot_token')`)).rejects.toThrow(/permission denied/);
    } finally {
      await op.end();
      await cli('sql-access', 'revoke', '--community', tenant.communityId, '--json');
    }
  });
});
