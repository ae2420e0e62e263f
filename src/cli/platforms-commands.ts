// billing platforms reconcile --community ID: reads each platform connection's state
// (Discord guild members and channel overwrites, Telegram chat members who lost a chat
// benefit) and repairs drift from the ledger, as the worker's hourly cron does
// (src/platforms/reconcile.ts, docs/decisions/platform-reconcile.md). Repairs of members
// are queued as their delivery jobs (the worker makes the calls); a benefit held by a
// platform user linked to no member is removed here. Progress goes to stderr.
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_DISCORD_API_URL, DEFAULT_TELEGRAM_API_URL } from '../core/config';
import { resolveEncryptionKey } from '../db/encryption-key';
import { PlatformSecretBox } from '../domain/catalog/platform-secrets';
import { telegramWebhookSecret } from '../domain/catalog/telegram-webhook-secret';
import { PlatformClients } from '../platforms/platform-clients';
import { reconcile, type ReconcileSummary } from '../platforms/reconcile';
import { defineCommand, defineGroup, positiveInteger, requireString } from './command';

interface ReconcileResult {
  community_id: string;
  connections: ReconcileSummary[];
  totals: { checked: number; missing: number; held_without_entitlement: number; removed_unlinked: number; members_queued: number; errors: number };
}

function report(r: ReconcileResult): string {
  if (r.connections.length === 0) return `No platform connection with benefits in community ${r.community_id}: nothing to reconcile.`;
  const lines = [`Reconciled ${r.connections.length} platform connection${r.connections.length === 1 ? '' : 's'} of community ${r.community_id}:`];
  for (const c of r.connections) {
    lines.push(`  ${c.platform_config_id} (${c.platform}): ${c.checked} checked, ${c.missing} missing (delivery queued), `
      + `${c.held_without_entitlement} held without entitlement (removal queued), ${c.removed_unlinked} removed from unlinked users`);
    for (const e of c.errors) lines.push(`    not finished: ${e}`);
  }
  const t = r.totals;
  lines.push(`Repairs: ${t.missing + t.held_without_entitlement + t.removed_unlinked} (${t.members_queued} members' deliveries queued for the worker).`);
  return lines.join('\n');
}

interface ConnectResult {
  platform_config_id: string;
  platform: 'discord' | 'telegram';
  /** Telegram: the webhook set; Discord: the Interactions Endpoint URL to enter in the Developer Portal. */
  url: string;
  /** Discord: the commands registered; Telegram: the updates asked for. */
  registered: string[];
  /** Discord with a client secret: the redirect to add to the application's OAuth2 page. */
  oauth2_redirect: string | null;
}

/** The service's key, as the service has it (from the environment or its data directory); never generated here. */
function serviceKey(ctx: { config: import('../core/config').Config; log: (line: string) => void }): string | null {
  const keyFile = path.join(ctx.config.dataDir, 'webhook-encryption.key');
  return ctx.config.webhookEncryptionKey || (fs.existsSync(keyFile) ? resolveEncryptionKey(ctx.config, ctx.log) : null);
}

/** The /link command members use with a link code (src/linking/linking-routes.ts answers it). */
const LINK_COMMAND = {
  name: 'link', type: 1, description: 'Link your Discord account to your membership with a link code',
  options: [{ type: 3, name: 'code', description: 'The link code the community gave you', required: true }],
};

const connect = defineCommand({
  name: 'connect',
  summary: 'points a connection\'s bot at the service: Telegram webhook (with its secret), Discord /link command',
  options: {
    community: { type: 'string', required: true, value: 'ID', description: 'community id' },
    platform: { type: 'string', required: true, value: 'KEY', description: 'the connection\'s key in the catalog (platforms[].key)' },
    'base-url': { type: 'string', value: 'URL', description: 'the service\'s public https URL (default PUBLIC_BASE_URL)' },
  },
  async run(ctx, input): Promise<ConnectResult> {
    const community = requireString(input, 'community');
    const key = requireString(input, 'platform');
    const base = (typeof input.options['base-url'] === 'string' ? input.options['base-url'] : ctx.config.publicBaseUrl)?.replace(/\/+$/, '');
    if (!base || !/^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(base)) throw new Error('--base-url (or PUBLIC_BASE_URL): the service\'s public URL, which the platform calls, e.g. https://billing.example.com');
    const db = await ctx.ownerPool();
    const { rows: [conn] } = await db.query<{ id: string; platform: 'discord' | 'telegram'; settings: Record<string, string>; token: string | null; secret: boolean }>(
      `select pc.id, pc.platform, pc.settings,
         (select s.ciphertext from billing_private.platform_secrets s where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'bot_token') as token,
         exists (select 1 from billing_private.platform_secrets s where s.community_id = pc.community_id and s.platform_config_id = pc.id and s.name = 'client_secret') as secret
       from billing.platform_configs pc where pc.community_id = $1 and pc.key = $2`, [community, key]);
    if (!conn) throw new Error(`no platform connection "${key}" in community ${community}`);
    const serviceKeyValue = serviceKey(ctx);
    let token = conn.platform === 'discord' ? ctx.config.discordBotToken : ctx.config.telegramBotToken;
    if (conn.token) {
      if (!serviceKeyValue) throw new Error('the bot token is stored encrypted: run with the service\'s WEBHOOK_ENCRYPTION_KEY');
      token = new PlatformSecretBox(serviceKeyValue).decrypt(community, conn.id, 'bot_token', conn.token);
    }
    if (!token) throw new Error(`connection "${key}" has no bot token (settings.bot_token in the catalog, or ${conn.platform === 'discord' ? 'DISCORD_BOT_TOKEN' : 'TELEGRAM_BOT_TOKEN'})`);
    const clients = new PlatformClients({
      discordApiUrl: ctx.config.discordApiUrl || DEFAULT_DISCORD_API_URL,
      telegramApiUrl: ctx.config.telegramApiUrl || DEFAULT_TELEGRAM_API_URL,
    });
    try {
      if (conn.platform === 'telegram') {
        if (!serviceKeyValue) throw new Error('the webhook\'s secret is derived from WEBHOOK_ENCRYPTION_KEY: run with the service\'s key');
        const url = `${base}/platforms/telegram/${conn.id}/updates`;
        await clients.telegramApi(token).setWebhook(url, {
          secret_token: telegramWebhookSecret(serviceKeyValue, community, conn.id), allowed_updates: ['message'],
        });
        return { platform_config_id: conn.id, platform: 'telegram', url, registered: ['message'], oauth2_redirect: null };
      }
      const applicationId = conn.settings.client_id;
      if (!applicationId) throw new Error(`connection "${key}" needs settings.client_id (the application id, from the Developer Portal) to register its /link command`);
      const { Routes } = await import('discord-api-types/v10');
      await clients.discordRest(token).put(Routes.applicationCommands(applicationId), { body: [LINK_COMMAND] });
      return {
        platform_config_id: conn.id, platform: 'discord', url: `${base}/platforms/discord/${conn.id}/interactions`, registered: ['/link'],
        oauth2_redirect: conn.secret ? `${base}/platforms/discord/oauth/callback` : null,
      };
    } finally {
      clients.close();
    }
  },
  print: (r: ConnectResult) => r.platform === 'telegram'
    ? `Telegram webhook set for ${r.platform_config_id}: ${r.url} (with its secret token; updates: ${r.registered.join(', ')}).`
    : [`Discord command ${r.registered.join(', ')} registered for ${r.platform_config_id}.`,
      `Set the application's Interactions Endpoint URL (Developer Portal, General Information) to: ${r.url}`,
      ...(r.oauth2_redirect ? [`Add this OAuth2 redirect (Developer Portal, OAuth2): ${r.oauth2_redirect}`] : [])].join('\n'),
});

export default defineGroup({
  name: 'platforms',
  summary: 'platform connections (Discord, Telegram)',
  commands: [connect, defineCommand({
    name: 'reconcile',
    summary: "reads the community's Discord servers and Telegram chats and repairs drift from the ledger",
    options: {
      community: { type: 'string', required: true, value: 'ID', description: 'community id' },
      'page-size': { type: 'string', value: 'N', description: 'Discord guild members per page (1 to 1000, default 1000)' },
    },
    async run(ctx, input): Promise<ReconcileResult> {
      const community = requireString(input, 'community');
      const pageSize = typeof input.options['page-size'] === 'string' ? Math.min(1000, positiveInteger(input.options['page-size'], '--page-size')) : undefined;
      const db = await ctx.ownerPool();
      const { rowCount } = await db.query('select 1 from billing.communities where id = $1', [community]);
      if (!rowCount) throw new Error(`no community ${community}`);
      // Stored bot tokens are read with the service's key (never generated here).
      const config = ctx.config;
      const key = serviceKey(ctx);
      const box = key ? new PlatformSecretBox(key) : null;
      const clients = new PlatformClients({
        discordApiUrl: config.discordApiUrl || DEFAULT_DISCORD_API_URL,
        telegramApiUrl: config.telegramApiUrl || DEFAULT_TELEGRAM_API_URL,
      });
      try {
        const connections = await reconcile(db, clients, (conn) => {
          if (conn.token && box) {
            try {
              return box.decrypt(conn.community_id, conn.platform_config_id, 'bot_token', conn.token);
            } catch {
              return null;
            }
          }
          return conn.platform === 'discord' ? config.discordBotToken : config.telegramBotToken;
        }, community, {
          pageSize,
          progress: (s) => ctx.log(`${s.platform_config_id} (${s.platform}): ${s.checked} checked, `
            + `${s.missing + s.held_without_entitlement + s.removed_unlinked} repairs so far`),
        });
        const sum = (k: keyof ReconcileResult['totals'] & keyof ReconcileSummary) => connections.reduce((n, c) => n + (c[k] as number), 0);
        return {
          community_id: community, connections,
          totals: {
            checked: sum('checked'), missing: sum('missing'), held_without_entitlement: sum('held_without_entitlement'),
            removed_unlinked: sum('removed_unlinked'), members_queued: sum('members_queued'),
            errors: connections.reduce((n, c) => n + c.errors.length, 0),
          },
        };
      } finally {
        clients.close();
      }
    },
    print: (r: ReconcileResult) => report(r),
  })],
});
