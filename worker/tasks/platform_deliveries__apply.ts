// graphile-worker task: one member's benefit delivery on Discord and Telegram (issue
// 29). Queued by the ledger's triggers (55-platform-delivery.sql) with one job key per
// member, so one job covers every change made before it starts. Under an advisory lock
// per member (two jobs of one member never act at once, so a late grant cannot undo a
// revoke), it reads the plan, makes the calls (src/platforms/delivery.ts) and records
// each benefit's delivery and every call. When a platform failed (5xx, network, a 429
// longer than the client waits), the job fails after recording, and graphile-worker
// runs it again with its backoff.
import type { Task } from 'graphile-worker';
import { PlatformSecretBox } from '../../src/domain/catalog/platform-secrets';
import { deliverMember, type PlanItem } from '../../src/platforms/delivery';
import { PlatformClients } from '../../src/platforms/platform-clients';
import { makePlatformReconcileTask } from './platform_connections__reconcile';

export interface PlatformDeliveryOptions {
  discordApiUrl: string;
  telegramApiUrl: string;
  /** Deployment-wide bot tokens, for connections without their own. */
  discordBotToken: string | null;
  telegramBotToken: string | null;
  /** WEBHOOK_ENCRYPTION_KEY: the connections' own tokens are encrypted with it. */
  encryptionKey: string | null;
  timeoutMs?: number;
  /** Guild members per page a reconciliation reads (default 1000, Discord's most). */
  reconcilePageSize?: number;
}

interface Payload { community_id: string; member_id: string }

function isPayload(p: unknown): p is Payload {
  return typeof p === 'object' && p !== null && typeof (p as Payload).community_id === 'string' && typeof (p as Payload).member_id === 'string';
}

/**
 * The delivery task and the reconciliation task (platform_connections__reconcile), which
 * share one set of clients: one rate-limit state per bot token in the process.
 */
export function makePlatformDeliveryTask(opts: PlatformDeliveryOptions): { task: Task; reconcile: Task; close(): void } {
  const clients = new PlatformClients({ discordApiUrl: opts.discordApiUrl, telegramApiUrl: opts.telegramApiUrl, timeoutMs: opts.timeoutMs });
  const box = opts.encryptionKey ? new PlatformSecretBox(opts.encryptionKey) : null;
  // The connection's own token (decrypted), else the deployment's.
  const botToken = (c: string, pcfg: string, platform: 'discord' | 'telegram', ciphertext: string | null | undefined): string | null => {
    if (ciphertext && box) {
      try {
        return box.decrypt(c, pcfg, 'bot_token', ciphertext);
      } catch {
        return null; // encrypted under another key: as if none
      }
    }
    return platform === 'discord' ? opts.discordBotToken : opts.telegramBotToken;
  };
  const task: Task = async (payload, helpers) => {
    if (!isPayload(payload)) throw new Error('platform_deliveries__apply: bad payload');
    const { community_id: c, member_id: m } = payload;
    const tokenOf = (item: PlanItem & { token?: string | null }): string | null => botToken(c, item.platform_config_id, item.platform, item.token);
    const retry = await helpers.withPgClient(async (client) => {
      await client.query(`select pg_advisory_lock(hashtextextended('deliver:' || $1 || ':' || $2, 0))`, [c, m]);
      try {
        const { rows } = await client.query<{ plan: (PlanItem & { token: string | null })[] }>(
          'select billing_private.platform_delivery_plan($1, $2) as plan', [c, m]);
        const delivery = await deliverMember(rows[0].plan, clients, tokenOf);
        if (delivery.results.length > 0 || delivery.actions.length > 0) {
          await client.query('select billing_private.platform_delivery_record($1, $2, $3, $4)',
            [c, m, JSON.stringify(delivery.results), JSON.stringify(delivery.actions)]);
        }
        return delivery.retry;
      } finally {
        await client.query(`select pg_advisory_unlock(hashtextextended('deliver:' || $1 || ':' || $2, 0))`, [c, m]);
      }
    });
    if (retry) throw new Error('a platform failed for some of this member\'s benefits; retrying later');
  };
  const reconcile = makePlatformReconcileTask(clients, (conn) => botToken(conn.community_id, conn.platform_config_id, conn.platform, conn.token),
    { pageSize: opts.reconcilePageSize });
  return { task, reconcile, close: () => clients.close() };
}
