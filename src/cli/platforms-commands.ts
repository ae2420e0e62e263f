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

export default defineGroup({
  name: 'platforms',
  summary: 'platform connections (Discord, Telegram)',
  commands: [defineCommand({
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
      const keyFile = path.join(config.dataDir, 'webhook-encryption.key');
      const key = config.webhookEncryptionKey || (fs.existsSync(keyFile) ? resolveEncryptionKey(config, ctx.log) : null);
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
