// One member's benefit delivery (issue 29): given what the ledger says the member
// should hold on each platform and what the platform was last made to hold
// (billing_private.platform_delivery_plan), make the calls that bring the platform in
// line and say what each benefit's delivery now is. State based, so at least once and
// idempotent: granting a role twice, or removing one already gone, changes nothing;
// a Telegram invite already made is reused, not made again.
import { Routes } from 'discord-api-types/v10';
import { CallResult, discordFailure, PlatformClients, telegramFailure, VIEW_CHANNEL, withTelegramFlood } from './platform-clients';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'action_required';

/** One benefit of the plan (see platform_delivery_plan). */
export interface PlanItem {
  platform_config_id: string;
  platform: 'discord' | 'telegram';
  settings: Record<string, string>;
  type: string;
  value: string;
  want: 'present' | 'absent';
  /** Names of the entitlements giving it (the audit-log reason), null when absent. */
  entitlements: string | null;
  status: DeliveryStatus | null;
  applied_uid: string | null;
  state: Record<string, unknown>;
  attempts: number;
  /** The member's identity on the platform now. */
  uid: string | null;
  community_name: string;
}

export interface ItemResult {
  platform_config_id: string;
  type: string;
  value: string;
  want: 'present' | 'absent';
  status: DeliveryStatus;
  applied_uid: string | null;
  error: string | null;
  state: Record<string, unknown>;
}

export interface ActionRecord {
  platform_config_id: string;
  action: string;
  target: string;
  outcome: 'ok' | 'retry' | 'action_required';
  status_code: number | null;
  error: string | null;
}

export interface MemberDelivery {
  results: ItemResult[];
  actions: ActionRecord[];
  /** A platform or the network failed: the job should run again later. */
  retry: boolean;
}

/** The benefit types each platform carries out. */
export const BENEFIT_TYPES: Record<PlanItem['platform'], readonly string[]> = {
  discord: ['role', 'channel'],
  telegram: ['chat'],
};

// A Telegram chat named by its id or @channelname (the catalog's rule, billing.benefit_problem).
const TELEGRAM_CHAT = /^(-?[1-9][0-9]{0,15}|@[A-Za-z][A-Za-z0-9_]{4,31})$/;

/** How long a Telegram invite link stays usable. */
const INVITE_TTL_S = 7 * 24 * 3600;

interface Actor {
  grant(item: PlanItem, uid: string): Promise<{ result: CallResult; state?: Record<string, unknown> }>;
  revoke(item: PlanItem, uid: string): Promise<CallResult>;
}

/** Brings one member's benefits in line. token(item): the connection's bot token, or null. */
export async function deliverMember(items: PlanItem[], clients: PlatformClients, token: (item: PlanItem) => string | null): Promise<MemberDelivery> {
  const out: MemberDelivery = { results: [], actions: [], retry: false };
  const removed: { item: PlanItem; result: ItemResult }[] = [];
  for (const item of items) {
    const result = await deliverItem(item, clients, token(item), out);
    if (result) out.results.push(result);
    if (result && item.want === 'absent' && item.applied_uid !== null && result.status === 'delivered') removed.push({ item, result });
  }
  await kickOnRevoke(items, removed, clients, token, out);
  return out;
}

/**
 * A Discord connection with settings.kick_on_revoke "true": a member whose last benefit
 * on it was just removed (nothing on the connection is still wanted) is removed from the
 * guild too. When the kick fails, the removed benefits stay recorded as held (failed or
 * action_required), so the next run removes them again and kicks again.
 */
async function kickOnRevoke(items: PlanItem[], removed: { item: PlanItem; result: ItemResult }[], clients: PlatformClients,
  token: (item: PlanItem) => string | null, out: MemberDelivery): Promise<void> {
  const byTarget = new Map<string, { item: PlanItem; uid: string; results: ItemResult[] }>();
  for (const { item, result } of removed) {
    if (item.platform !== 'discord' || item.settings.kick_on_revoke !== 'true') continue;
    if (items.some((i) => i.platform_config_id === item.platform_config_id && i.want === 'present')) continue;
    const key = `${item.platform_config_id}:${item.applied_uid}`;
    const entry = byTarget.get(key) ?? { item, uid: item.applied_uid!, results: [] };
    entry.results.push(result);
    byTarget.set(key, entry);
  }
  for (const { item, uid, results } of byTarget.values()) {
    const bot = token(item);
    if (bot === null) continue; // the removal above needed it: not reached
    let r: CallResult;
    try {
      await clients.discordRest(bot).delete(Routes.guildMember(item.settings.guild_id, uid), { reason: 'Membership ended: entitlement revoked (kick_on_revoke)' });
      r = { outcome: 'ok' };
    } catch (err) {
      r = discordFailure(err, true);
      if (r.outcome === 'action_required' && r.status === 403) {
        r = { ...r, error: 'Discord refused to remove the member from the server (kick_on_revoke): the bot needs Kick Members and a role above the member\'s highest role.' };
      }
    }
    if (r.outcome === 'retry') out.retry = true;
    out.actions.push({
      platform_config_id: item.platform_config_id, action: 'kick_member', target: item.settings.guild_id,
      outcome: r.outcome === 'gone' ? 'ok' : r.outcome, status_code: 'status' in r ? r.status : null, error: 'error' in r ? r.error : null,
    });
    if (r.outcome === 'retry' || r.outcome === 'action_required') {
      for (const result of results) {
        Object.assign(result, { status: r.outcome === 'retry' ? 'failed' : 'action_required', applied_uid: uid, error: r.error });
      }
    }
  }
}

async function deliverItem(item: PlanItem, clients: PlatformClients, token: string | null, out: MemberDelivery): Promise<ItemResult | null> {
  const base = { platform_config_id: item.platform_config_id, type: item.type, value: item.value, want: item.want };
  const done = (status: DeliveryStatus, applied_uid: string | null, error: string | null, state: Record<string, unknown> = item.state): ItemResult =>
    ({ ...base, status, applied_uid, error, state });
  const held = item.applied_uid;
  // Nothing to do: delivered to the identity the member has now, or removed.
  if (item.want === 'present' && item.status === 'delivered' && held !== null && held === item.uid) return null;
  if (item.want === 'absent' && held === null) return done('delivered', null, null, {});

  if (!BENEFIT_TYPES[item.platform].includes(item.type)) {
    return done('action_required', held, `A ${item.platform} connection cannot deliver a benefit of type "${item.type}" (it can: ${BENEFIT_TYPES[item.platform].join(', ')}).`);
  }
  if (token === null) {
    return done('action_required', held, `No bot token for this ${item.platform} connection: set settings.bot_token in the catalog (or ${item.platform === 'discord' ? 'DISCORD_BOT_TOKEN' : 'TELEGRAM_BOT_TOKEN'}).`);
  }
  const actor = item.platform === 'discord' ? discordActor(clients, token) : telegramActor(clients, token);
  const log = (action: string, target: string, r: CallResult) => {
    if (r.outcome === 'retry') out.retry = true;
    out.actions.push({
      platform_config_id: item.platform_config_id, action, target,
      outcome: r.outcome === 'gone' ? 'ok' : r.outcome,
      status_code: 'status' in r ? r.status : null, error: 'error' in r ? r.error : null,
    });
  };
  const kind = item.type;

  // Taken away from the user the platform holds it for: the benefit went, or the
  // member's identity changed (unlinked, or another account).
  if (held !== null && (item.want === 'absent' || held !== item.uid)) {
    const r = await actor.revoke(item, held);
    log(`remove_${kind}`, item.value, r);
    if (r.outcome === 'retry' || r.outcome === 'action_required') {
      return done(r.outcome === 'retry' ? 'failed' : 'action_required', held, r.error);
    }
    if (item.want === 'absent') return done('delivered', null, null, {});
  }
  if (item.uid === null) {
    const name = item.platform === 'discord' ? 'Discord' : 'Telegram';
    return done('action_required', null, `The member has not linked a ${name} account: they link it with a link code (delivery follows at once).`, {});
  }
  const granted = await actor.grant({ ...item, state: held === null ? item.state : {} }, item.uid);
  const r = granted.result;
  log(`add_${kind}`, item.value, r);
  if (r.outcome === 'retry' || r.outcome === 'action_required') {
    return done(r.outcome === 'retry' ? 'failed' : 'action_required', null, r.error, granted.state ?? {});
  }
  return done('delivered', item.uid, null, granted.state ?? {});
}

function discordActor(clients: PlatformClients, token: string): Actor {
  const rest = clients.discordRest(token);
  const reason = (item: PlanItem, what: string) => `${item.entitlements ?? 'Membership'}: ${what}`.slice(0, 512);
  return {
    async grant(item, uid) {
      try {
        if (item.type === 'role') {
          await rest.put(Routes.guildMemberRole(item.settings.guild_id, uid, item.value), { reason: reason(item, 'entitlement granted') });
        } else {
          await rest.put(Routes.channelPermission(item.value, uid), {
            body: { type: 1, allow: VIEW_CHANNEL, deny: 0 }, reason: reason(item, 'entitlement granted'),
          });
        }
        return { result: { outcome: 'ok' } };
      } catch (err) {
        return { result: discordFailure(err, false) };
      }
    },
    async revoke(item, uid) {
      try {
        if (item.type === 'role') {
          await rest.delete(Routes.guildMemberRole(item.settings.guild_id, uid, item.value), { reason: 'Membership ended: entitlement revoked' });
        } else {
          await rest.delete(Routes.channelPermission(item.value, uid), { reason: 'Membership ended: entitlement revoked' });
        }
        return { outcome: 'ok' };
      } catch (err) {
        // A channel overwrite that is not there is 404 Unknown Overwrite (10009): done.
        if (item.type === 'channel' && (err as { code?: unknown }).code === 10009) return { outcome: 'gone' };
        return discordFailure(err, true);
      }
    },
  };
}

function telegramActor(clients: PlatformClients, token: string): Actor {
  const api = clients.telegramApi(token);
  const chatOf = (item: PlanItem) => (TELEGRAM_CHAT.test(item.value) ? item.value : item.settings.chat_id);
  return {
    // A one-use invite link (made once, kept in the delivery's state for retries) sent
    // by the bot to the member.
    async grant(item, uid) {
      let state = item.state;
      try {
        const now = Math.floor(Date.now() / 1000);
        let link = typeof state.invite_link === 'string' && Number(state.expires_at) > now + 3600 ? state.invite_link : null;
        if (link === null) {
          const expires = now + INVITE_TTL_S;
          const made = await withTelegramFlood(() => api.createChatInviteLink(chatOf(item), { member_limit: 1, expire_date: expires, name: item.value.slice(0, 32) }));
          link = made.invite_link;
          state = { invite_link: link, expires_at: expires };
        }
        const text = `${item.community_name}: your access to ${item.entitlements ?? 'the community'} is ready. Join the chat with this one-time link: ${link}`;
        await withTelegramFlood(() => api.sendMessage(Number(uid), text));
        return { result: { outcome: 'ok' }, state: { ...state, sent: true } };
      } catch (err) {
        return { result: telegramFailure(err, false), state };
      }
    },
    // Out of the chat without a lasting ban: ban, then unban only if banned.
    async revoke(item, uid) {
      try {
        await withTelegramFlood(() => api.banChatMember(chatOf(item), Number(uid)));
        await withTelegramFlood(() => api.unbanChatMember(chatOf(item), Number(uid), { only_if_banned: true }));
        return { outcome: 'ok' };
      } catch (err) {
        return telegramFailure(err, true);
      }
    },
  };
}
