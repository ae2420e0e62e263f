// Platform connections configured from the dashboard's Platforms page (issue 29 item 1),
// as `billing catalog apply` configures them from platforms[]: a connection's key,
// platform, name and settings (checked by the database: billing.platform_settings_problem
// names the field), and its write-only secrets, the bot token and (Discord) the OAuth2
// client secret. Handlers, because a secret is checked here (the formats of
// catalog-file.ts, messages that never quote it) and encrypted here
// (PlatformSecretBox, WEBHOOK_ENCRYPTION_KEY): the database receives its ciphertext
// only, through billing_private.platform_secret_set. No answer holds a secret.
// Dashboard operations (src/operations/index.ts), scope keys:write: the operator-only
// scope admins and owners hold, never a viewer, never an API key
// (docs/decisions/platform-config-dashboard.md).
import { z } from 'zod';
import { ApiError } from '../../core/errors';
import { defineOperation, type OpContext, Operation } from '../operation';
import { BOT_TOKEN, CLIENT_SECRET } from './catalog-file';
import { PlatformSecretBox, type PlatformSecretName } from './platform-secrets';

export const platformSettings = z.record(z.string(), z.string().max(200)).describe('Discord: guild_id, client_id, public_key, kick_on_revoke ("true"/"false"); Telegram: chat_id. Replaced whole.');
export const platformSecret = (what: string) => z.string().max(500).nullable().optional()
  .describe(`${what}: a string sets or replaces it, null removes it, absent keeps the stored one. Write-only.`);

export const platformConnection = z.object({
  id: z.string(), key: z.string(), platform: z.enum(['discord', 'telegram']), name: z.string().nullable(),
  settings: z.record(z.string(), z.string()), bot_token_set: z.boolean(), client_secret_set: z.boolean(),
});

interface Saved { id: string; key: string; platform: 'discord' | 'telegram'; name: string | null; settings: Record<string, string> }

const invalid = (param: string, detail: string) => new ApiError('invalid_request', detail, { status: 422, extra: { param } });

/** A secret as given (format checked, never quoted), or null to remove, or undefined to keep. */
function checkSecret(platform: 'discord' | 'telegram', name: PlatformSecretName, value: unknown): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (name === 'client_secret' && platform !== 'discord') throw invalid(name, 'Only a Discord connection has an OAuth2 client secret.');
  const rule = name === 'bot_token' ? BOT_TOKEN[platform] : CLIENT_SECRET;
  const expected = rule.expected.replace(/ or null$/, '');
  if (typeof value !== 'string' || !rule.pattern.test(value)) throw invalid(name, `${expected[0].toUpperCase()}${expected.slice(1)}.`);
  return value;
}

export async function savePlatformConnection(ctx: OpContext, input: Record<string, unknown>): Promise<unknown> {
  const { bot_token: botToken, client_secret: clientSecret, ...config } = input;
  const conn = await ctx.call<Saved>('platform_config_save', config);
  const secrets = [['bot_token', checkSecret(conn.platform, 'bot_token', botToken)],
    ['client_secret', checkSecret(conn.platform, 'client_secret', clientSecret)]] as const;
  for (const [name, value] of secrets) {
    if (value === undefined) continue;
    let ciphertext: string | null = null;
    if (value !== null) {
      if (!ctx.config.webhookEncryptionKey) {
        throw new ApiError('service_unavailable', `${name === 'bot_token' ? 'Bot tokens' : 'Client secrets'} are stored encrypted and this deployment has no WEBHOOK_ENCRYPTION_KEY.`, { extra: { param: name } });
      }
      ciphertext = new PlatformSecretBox(ctx.config.webhookEncryptionKey).encrypt(ctx.communityId, conn.id, name, value);
    }
    await ctx.query('select billing_private.platform_secret_set($1, $2, $3)', [conn.id, name, ciphertext]);
  }
  const { rows } = await ctx.query<{ b: boolean; c: boolean }>(
    `select billing_private.platform_secret_ciphertext($1, 'bot_token') is not null as b,
            billing_private.platform_secret_ciphertext($1, 'client_secret') is not null as c`, [conn.id]);
  return { ...conn, bot_token_set: rows[0].b, client_secret_set: rows[0].c };
}

export const platformConfigDashboardOperations: Operation[] = [
  defineOperation({
    name: 'list_platform_configs',
    method: 'GET',
    path: '/dashboard/platforms/configs',
    scope: 'plans:read',
    tag: 'Platforms',
    summary: 'Each platform connection with its settings and whether each secret is stored (never a secret)',
    response: z.object({ data: z.array(platformConnection) }),
    sql: 'platform_configs_list',
  }),
  defineOperation({
    name: 'create_platform_connection',
    method: 'POST',
    path: '/dashboard/platforms/configs',
    scope: 'keys:write',
    tag: 'Platforms',
    summary: 'Add a Discord server or Telegram chat connection, with its bot token (and Discord client secret) if given',
    body: z.object({
      key: z.string().max(100),
      platform: z.enum(['discord', 'telegram']),
      name: z.string().max(200).nullable().optional(),
      settings: platformSettings.optional(),
      bot_token: platformSecret('The bot token'),
      client_secret: platformSecret('The Discord application\'s OAuth2 client secret'),
    }),
    response: platformConnection,
    status: 201,
    handler: savePlatformConnection,
  }),
  defineOperation({
    name: 'update_platform_connection',
    method: 'POST',
    path: '/dashboard/platforms/configs/{id}',
    scope: 'keys:write',
    tag: 'Platforms',
    summary: 'Change a connection\'s name and settings, and set, replace or remove its secrets (its key and platform stay)',
    params: z.object({ id: z.string().min(1).max(100) }),
    body: z.object({
      name: z.string().max(200).nullable().optional(),
      settings: platformSettings.optional(),
      bot_token: platformSecret('The bot token'),
      client_secret: platformSecret('The Discord application\'s OAuth2 client secret'),
    }),
    response: platformConnection,
    handler: savePlatformConnection,
  }),
];
