// Reconciliation (issue 29 item 2): reads what a platform holds and repairs drift from
// the ledger in both directions, through the delivery path where a member is known.
// Discord: the guild's members are paged (GET /guilds/{id}/members, `after` the last
// user id) and each page's benefit roles compared with the ledger; each channel
// benefit's member overwrites are read (GET /channels/{id}). Telegram cannot list a
// chat's members: members who once had a chat benefit and have it no more are looked
// up one by one (getChatMember). What the ledger says is missing or held without
// entitlement is handed to billing_private.platform_reconcile_observed, which marks the
// member's delivery rows and queues the member's delivery job (the job acts under the
// member's lock, as for any change); a benefit held by a platform user linked to no
// member is removed here and logged in billing.platform_actions. Only benefit values
// are ever touched, never other roles, and bots are left alone. The calls go through
// the kept clients, which wait out each route's rate limit.
// docs/decisions/platform-reconcile.md.
import { Routes, type APIChannel, type APIGuildMember, type APIOverwrite } from 'discord-api-types/v10';
import { type ActionRecord } from './delivery';
import { type CallResult, discordFailure, grammyError, PlatformClients, VIEW_CHANNEL, withTelegramFlood } from './platform-clients';

/** What reconcile needs of a database connection (a pg client or pool: the owner or billing_worker). */
export interface ReconcileDb {
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

export interface ReconcileConnection {
  community_id: string;
  platform_config_id: string;
  platform: 'discord' | 'telegram';
  settings: Record<string, string>;
  /** The bot token's ciphertext, or null (see tokenOf). */
  token: string | null;
  benefits: { type: string; value: string }[];
}

export interface ReconcileSummary {
  community_id: string;
  platform_config_id: string;
  platform: 'discord' | 'telegram';
  /** Platform users (Discord guild members, Telegram former members) compared with the ledger. */
  checked: number;
  pages: number;
  /** Benefits the ledger gives and the platform did not hold: the member's delivery queued. */
  missing: number;
  /** Benefits a linked member held without entitlement: the member's delivery queued to remove them. */
  held_without_entitlement: number;
  /** Benefits held by platform users linked to no member: removed here. */
  removed_unlinked: number;
  members_queued: number;
  /** Why the connection was not (fully) reconciled, in words an operator can act on. */
  errors: string[];
}

export interface ReconcileOptions {
  /** Guild members per page (Discord allows 1 to 1000; default 1000). */
  pageSize?: number;
  /** Called after each page or lookup batch with the summary so far. */
  progress?: (s: ReconcileSummary) => void;
}

interface Observed { missing: number; held_without_entitlement: number; members_queued: number; unlinked: { uid: string; value: string }[] }

const TELEGRAM_CHAT = /^(-?[1-9][0-9]{0,15}|@[A-Za-z][A-Za-z0-9_]{4,31})$/;

/** The connections to reconcile: one community's, or every community's (null). */
export async function reconcileTargets(db: ReconcileDb, communityId: string | null): Promise<{ community_id: string; platform_config_id: string }[]> {
  const { rows } = await db.query<{ community_id: string; platform_config_id: string }>(
    'select community_id, platform_config_id from billing_private.platform_reconcile_targets($1)', [communityId]);
  return rows;
}

/** Reconciles one connection; a platform's refusal or failure ends it early, recorded in `errors`. */
export async function reconcileConnection(db: ReconcileDb, clients: PlatformClients, tokenOf: (c: ReconcileConnection) => string | null,
  communityId: string, platformConfigId: string, opts: ReconcileOptions = {}): Promise<ReconcileSummary | null> {
  const { rows } = await db.query<{ c: ReconcileConnection | null }>(
    'select billing_private.platform_reconcile_connection($1, $2) as c', [communityId, platformConfigId]);
  const conn = rows[0]?.c;
  if (!conn) return null;
  const summary: ReconcileSummary = {
    community_id: communityId, platform_config_id: platformConfigId, platform: conn.platform,
    checked: 0, pages: 0, missing: 0, held_without_entitlement: 0, removed_unlinked: 0, members_queued: 0, errors: [],
  };
  const token = tokenOf(conn);
  if (token === null) {
    summary.errors.push(`No bot token for this ${conn.platform} connection: set settings.bot_token in the catalog (or ${conn.platform === 'discord' ? 'DISCORD_BOT_TOKEN' : 'TELEGRAM_BOT_TOKEN'}).`);
    return summary;
  }
  const observe = async (type: string, values: string[], complete: boolean, observed: { uid: string; held: string[] }[]): Promise<Observed> => {
    const { rows: [r] } = await db.query<{ r: Observed }>(
      'select billing_private.platform_reconcile_observed($1, $2, $3, $4, $5, $6) as r',
      [communityId, platformConfigId, type, values, complete, JSON.stringify(observed)]);
    summary.missing += r.r.missing;
    summary.held_without_entitlement += r.r.held_without_entitlement;
    summary.members_queued += r.r.members_queued;
    return r.r;
  };
  const log = async (actions: ActionRecord[]) => {
    if (actions.length > 0) await db.query('select billing_private.platform_reconcile_log($1, $2)', [communityId, JSON.stringify(actions)]);
  };
  try {
    if (conn.platform === 'discord') await reconcileDiscord(conn, clients, token, summary, observe, log, opts);
    else await reconcileTelegram(db, conn, clients, token, summary, observe, opts);
  } catch (err) {
    summary.errors.push(err instanceof ReconcileStop ? err.message : `Reconciliation failed: ${(err as Error).message}`);
  }
  return summary;
}

/** A platform refused or failed: this connection's reconciliation stops with this reason. */
class ReconcileStop extends Error {}

type Observe = (type: string, values: string[], complete: boolean, observed: { uid: string; held: string[] }[]) => Promise<Observed>;

async function reconcileDiscord(conn: ReconcileConnection, clients: PlatformClients, token: string, summary: ReconcileSummary,
  observe: Observe, log: (a: ActionRecord[]) => Promise<void>, opts: ReconcileOptions): Promise<void> {
  const rest = clients.discordRest(token);
  const guild = conn.settings.guild_id;
  const call = async <T>(what: string, f: () => Promise<unknown>): Promise<T> => {
    try {
      return await f() as T;
    } catch (err) {
      const r = discordFailure(err, false);
      throw new ReconcileStop(`${what}: ${'error' in r ? r.error : 'failed'}`);
    }
  };
  const pageSize = Math.min(1000, Math.max(1, opts.pageSize ?? 1000));
  const reason = 'Reconciliation: held without entitlement';
  // A removal from a user linked to no member, as the log records it; already gone is done.
  const remove = async (action: string, target: string, f: () => Promise<unknown>): Promise<ActionRecord> => {
    const record = { platform_config_id: conn.platform_config_id, action, target };
    try {
      await f();
      summary.removed_unlinked++;
      return { ...record, outcome: 'ok', status_code: null, error: null };
    } catch (err) {
      // 10009 Unknown Overwrite: a channel overwrite already gone.
      const r: CallResult = (err as { code?: unknown }).code === 10009 ? { outcome: 'gone' } : discordFailure(err, true);
      if (r.outcome === 'retry' || r.outcome === 'action_required') return { ...record, outcome: r.outcome, status_code: r.status, error: r.error };
      return { ...record, outcome: 'ok', status_code: null, error: null };
    }
  };

  const roles = conn.benefits.filter((b) => b.type === 'role').map((b) => b.value);
  if (roles.length > 0) {
    let after = '0';
    for (;;) {
      const page = await call<APIGuildMember[]>('Listing the server\'s members (the bot needs the Server Members intent)',
        () => rest.get(Routes.guildMembers(guild), { query: new URLSearchParams({ limit: String(pageSize), after }) }));
      summary.pages++;
      const people = page.filter((m) => m.user && !m.user.bot);
      summary.checked += people.length;
      const seen = await observe('role', roles, false, people.map((m) => ({ uid: m.user.id, held: m.roles.filter((r) => roles.includes(r)) })));
      const actions: ActionRecord[] = [];
      for (const u of seen.unlinked) {
        actions.push(await remove('reconcile_remove_role', u.value, () => rest.delete(Routes.guildMemberRole(guild, u.uid, u.value), { reason })));
      }
      await log(actions);
      opts.progress?.(summary);
      if (page.length < pageSize) break;
      after = page[page.length - 1].user.id;
    }
  }

  for (const channel of conn.benefits.filter((b) => b.type === 'channel').map((b) => b.value)) {
    const ch = await call<APIChannel & { permission_overwrites?: APIOverwrite[] }>(`Reading channel ${channel}`, () => rest.get(Routes.channel(channel)));
    summary.pages++;
    const members = (ch.permission_overwrites ?? []).filter((o) => Number(o.type) === 1);
    const viewing = members.filter((o) => (BigInt(o.allow) & BigInt(VIEW_CHANNEL)) !== 0n);
    summary.checked += members.length;
    const seen = await observe('channel', [channel], true, viewing.map((o) => ({ uid: o.id, held: [channel] })));
    const actions: ActionRecord[] = [];
    for (const u of seen.unlinked) {
      // Only an overwrite of the shape a delivery makes (View Channel allowed, nothing
      // else): one an admin made for another reason is left alone.
      const o = viewing.find((v) => v.id === u.uid)!;
      if (BigInt(o.allow) !== BigInt(VIEW_CHANNEL) || BigInt(o.deny) !== 0n) continue;
      actions.push(await remove('reconcile_remove_channel', channel, () => rest.delete(Routes.channelPermission(channel, u.uid), { reason })));
    }
    await log(actions);
    opts.progress?.(summary);
  }
}

async function reconcileTelegram(db: ReconcileDb, conn: ReconcileConnection, clients: PlatformClients, token: string, summary: ReconcileSummary,
  observe: Observe, opts: ReconcileOptions): Promise<void> {
  const api = clients.telegramApi(token);
  const batch = Math.min(1000, Math.max(1, opts.pageSize ?? 200));
  for (const value of [...new Set(conn.benefits.filter((b) => b.type === 'chat').map((b) => b.value))]) {
    const chat = TELEGRAM_CHAT.test(value) ? value : conn.settings.chat_id;
    let after: string | null = null;
    for (;;) {
      const { rows: [page] }: { rows: { r: { member_id: string; uid: string }[] }[] } = await db.query<{ r: { member_id: string; uid: string }[] }>(
        'select billing_private.platform_reconcile_former($1, $2, $3, $4, $5, $6) as r',
        [conn.community_id, conn.platform_config_id, 'chat', value, after, batch]);
      const former: { member_id: string; uid: string }[] = page.r;
      if (former.length === 0) break;
      summary.pages++;
      const observed: { uid: string; held: string[] }[] = [];
      for (const f of former) {
        summary.checked++;
        try {
          const m = await withTelegramFlood(() => api.getChatMember(chat, Number(f.uid)));
          const inChat = m.status === 'member' || (m.status === 'restricted' && m.is_member);
          observed.push({ uid: f.uid, held: inChat ? [value] : [] });
        } catch (err) {
          const tg = grammyError(err);
          if (tg && tg.error_code === 400 && /user not found|PARTICIPANT_ID_INVALID|USER_NOT_PARTICIPANT/i.test(tg.description)) continue;
          const why = tg ? tg.description : 'Telegram could not be reached';
          throw new ReconcileStop(`Looking members up in chat ${chat}: ${why}`);
        }
      }
      await observe('chat', [value], false, observed);
      opts.progress?.(summary);
      after = former[former.length - 1].member_id;
      if (former.length < batch) break;
    }
  }

}

/** Reconciles the connections of one community (or of all: null), one after another. */
export async function reconcile(db: ReconcileDb, clients: PlatformClients, tokenOf: (c: ReconcileConnection) => string | null,
  communityId: string | null, opts: ReconcileOptions = {}): Promise<ReconcileSummary[]> {
  const out: ReconcileSummary[] = [];
  for (const t of await reconcileTargets(db, communityId)) {
    const s = await reconcileConnection(db, clients, tokenOf, t.community_id, t.platform_config_id, opts);
    if (s) out.push(s);
  }
  return out;
}
