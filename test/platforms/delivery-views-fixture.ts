// A community whose member has benefits in every delivery state, for the tests of what
// people see of deliveries (API retry, dashboard, portal, GraphQL). The rows are what
// the delivery job records (billing_private.platform_delivery_record); the job the
// grant queues is removed in the same transaction, so no delivery worker of another
// test file (one database) runs it and overwrites them.
import type pg from 'pg';
import { PlatformSecretBox, storePlatformSecret } from '../../src/domain/catalog/platform-secrets';
import { createTenant, Tenant } from '../support/app';
import { ENCRYPTION_KEY } from '../support/webhooks';

export interface DeliveryWorld {
  tenant: Tenant;
  discord: string;
  telegram: string;
  memberId: string;
  tierId: string;
  /** The errors recorded, by benefit value. */
  errors: { role: string; chat: string };
}

export const TOKEN = 'SecretBotTokenOfTheDiscordConnection.abc.xyz0123456789';

export async function deliveryWorld(owner: pg.Pool): Promise<DeliveryWorld> {
  const tenant = await createTenant(owner);
  const c = tenant.communityId;
  const client = await owner.connect();
  try {
    await client.query('begin');
    const pcfg = async (key: string, platform: string, name: string, settings: Record<string, string>) => (await client.query<{ id: string }>(
      `insert into billing.platform_configs (community_id, key, platform, name, settings) values ($1, $2, $3, $4, $5) returning id`,
      [c, key, platform, name, settings])).rows[0].id;
    const discord = await pcfg('main', 'discord', 'Main server', { guild_id: '111222333444555666' });
    const telegram = await pcfg('chat', 'telegram', 'Members chat', { chat_id: '-1001234567890' });
    const one = async (sql: string, values: unknown[]) => (await client.query<{ id: string }>(sql, values)).rows[0]?.id;
    const tierId = await one(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold') returning id`, [c]);
    const ent = await one(`insert into billing.entitlements (community_id, key, name) values ($1, 'gold', 'Gold access') returning id`, [c]);
    await client.query(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)`, [c, tierId, ent]);
    for (const [p, type, value] of [[discord, 'role', '900000000000000001'], [discord, 'channel', '900000000000000002'], [telegram, 'chat', '-1001234567890']]) {
      await client.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value) values ($1, $2, $3, $4, $5)`,
        [c, ent, p, type, value]);
    }
    const memberId = await one(`insert into billing.members (community_id) values ($1) returning id`, [c]);
    await client.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid) values ($1, $2, 'discord', '555000111')`, [c, memberId]);
    await client.query(`insert into billing.grants (community_id, member_id, tier_id, created_at) values ($1, $2, $3, now())`, [c, memberId, tierId]);
    await client.query(`delete from graphile_worker._private_jobs where key = $1`, [`deliver:${c}:${memberId}`]);
    const errors = {
      role: 'Discord refused: the role is above the bot\'s role. Drag the bot\'s role above it (Server Settings → Roles).',
      chat: 'The member has not linked a Telegram account: they link it with a link code (delivery follows at once).',
    };
    await client.query(`select billing_private.platform_delivery_record($1, $2, $3, $4)`, [c, memberId, JSON.stringify([
      { platform_config_id: discord, type: 'role', value: '900000000000000001', want: 'present', status: 'action_required', applied_uid: null, error: errors.role, state: {} },
      { platform_config_id: discord, type: 'channel', value: '900000000000000002', want: 'present', status: 'delivered', applied_uid: '555000111', error: null, state: {} },
      { platform_config_id: telegram, type: 'chat', value: '-1001234567890', want: 'present', status: 'action_required', applied_uid: null, error: errors.chat, state: {} },
    ]), JSON.stringify([
      { platform_config_id: discord, action: 'add_channel_overwrite', target: 'channel 900000000000000002 user 555000111', outcome: 'ok', status_code: 204, error: null },
      { platform_config_id: discord, action: 'add_role', target: 'role 900000000000000001 user 555000111', outcome: 'action_required', status_code: 403, error: errors.role },
    ])]);
    await client.query('commit');
    await storePlatformSecret(owner, new PlatformSecretBox(ENCRYPTION_KEY), c, discord, 'bot_token', TOKEN);
    // A token given queues the connection's members (55-platform-delivery.sql): this world
    // starts with the deliveries recorded above and no job.
    await owner.query(`delete from graphile_worker._private_jobs where key = $1`, [`deliver:${c}:${memberId}`]);
    return { tenant, discord, telegram, memberId, tierId, errors };
  } catch (err) {
    await client.query('rollback');
    throw err;
  } finally {
    client.release();
  }
}

/** The member's delivery job, if one is queued (not yet taken by a worker). */
export async function queuedJob(owner: pg.Pool, w: DeliveryWorld): Promise<{ run_at: Date; attempts: number } | null> {
  const { rows } = await owner.query<{ run_at: Date; attempts: number }>(
    `select run_at, attempts from graphile_worker._private_jobs where key = $1`, [`deliver:${w.tenant.communityId}:${w.memberId}`]);
  return rows[0] ?? null;
}
