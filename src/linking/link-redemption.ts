// Redeeming a link code for a platform user who sent it to the community's bot (issue 29
// item 3). The request is authenticated by the platform (Discord's signature, Telegram's
// secret), not by an API key, and acts for the community that owns the connection named
// in its URL: the transaction's community is set to that one, and the SQL
// (billing.platform_link_redeem -> billing.link_code_apply, 80-checkout.sql) runs under
// its tenant policies, recording the identity exactly as POST /v1/link-codes/redeem does.
import type pg from 'pg';
import { inCommunity, retryConflicts } from '../db/community-transaction';
import type { PlatformReader } from '../domain/catalog/platform-secrets';

export type LinkPlatform = 'discord' | 'telegram';

export type LinkOutcome = 'linked' | 'unknown' | 'used' | 'expired' | 'wrong_platform' | 'identity_taken'
  | 'member_has_identity' | 'no_connection';

/** The connection an inbound request names, and what authenticates it; null when none of that platform. */
export async function inboundConnection(pool: pg.Pool, platformConfigId: string, platform: LinkPlatform): Promise<{ communityId: string; publicKey: string | null } | null> {
  // Ids are made by billing.gen_id; anything else (NUL and all) names no connection.
  if (!/^pcfg_[0-9a-f]{26}$/.test(platformConfigId)) return null;
  const { rows } = await pool.query<{ community_id: string; public_key: string | null }>(
    'select community_id, public_key from billing_private.platform_config_inbound($1, $2)', [platformConfigId, platform]);
  return rows[0] ? { communityId: rows[0].community_id, publicKey: rows[0].public_key } : null;
}

/** What a member sends as a code: link codes are 10 hex digits; anything else is not one (and never reaches SQL). */
export function codeText(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const code = value.trim();
  return /^[A-Za-z0-9_-]{1,64}$/.test(code) ? code : null;
}

/** A platform username worth keeping beside the identity: printable, bounded; otherwise none. */
export function usernameText(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) return null;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value)) return null;
  return value;
}

export interface LinkRequest {
  communityId: string;
  platformConfigId: string;
  platform: LinkPlatform;
  platformUid: string;
  code: string | null;
  username: string | null;
}

export interface LinkResult {
  outcome: LinkOutcome;
  /** Set when linked: the member the identity joined. Never shown to the platform user. */
  memberId: string | null;
  /** Linked now (false when the identity was already this member's). */
  newIdentity: boolean;
}

/**
 * Redeems in one transaction of the connection's community. `during` runs in the same
 * transaction afterwards (e.g. reading the bot token to reply with).
 */
export async function redeemForPlatformUser<T>(pool: pg.Pool, req: LinkRequest,
  during: (db: PlatformReader) => Promise<T>): Promise<{ result: LinkResult; extra: T }> {
  return retryConflicts(() => inCommunity(pool, req.communityId, async (client) => {
    let result: LinkResult = { outcome: 'unknown', memberId: null, newIdentity: false };
    if (req.code !== null) {
      const { rows } = await client.query<{ r: { outcome: LinkOutcome; member_id?: string; new_identity?: boolean } }>(
        'select billing.platform_link_redeem($1, $2, $3, $4, $5) as r',
        [req.platformConfigId, req.platform, req.platformUid, req.code, req.username]);
      const r = rows[0].r;
      result = { outcome: r.outcome, memberId: r.outcome === 'linked' ? r.member_id ?? null : null, newIdentity: r.new_identity === true };
    }
    const extra = await during({ communityId: req.communityId, query: client.query.bind(client) as PlatformReader['query'] });
    return { result, extra };
  }));
}

/** What the member is told, per outcome: why not, never whose code or which member. */
export function linkMessage(outcome: LinkOutcome, platform: LinkPlatform): string {
  const name = platform === 'discord' ? 'Discord' : 'Telegram';
  switch (outcome) {
    case 'linked': return `Your ${name} account is now linked to your membership.`;
    case 'expired': return 'That link code has expired (codes last ten minutes). Ask for a new one.';
    case 'used': return 'That link code was already used, or a newer code replaced it. Ask for a new one.';
    case 'wrong_platform': return `That link code is not for ${name}. Ask for a code for ${name}.`;
    case 'identity_taken': return `This ${name} account is already linked to another membership.`;
    case 'member_has_identity': return `That membership is already linked to another ${name} account.`;
    case 'unknown':
    case 'no_connection':
      return 'That link code is not valid. Check it, or ask for a new one.';
  }
}

/**
 * Called after a redemption that linked a new identity has committed. Delivery (issue 29
 * item 2, src/platforms/ delivery) plugs in here: linking an identity to a member with
 * access triggers delivery at once. A failure is logged and changes nothing of the answer.
 */
export interface IdentityLinked { communityId: string; memberId: string; platform: LinkPlatform; platformConfigId: string }
export type OnIdentityLinked = (linked: IdentityLinked) => Promise<void> | void;
