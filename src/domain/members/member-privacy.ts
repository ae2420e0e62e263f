// The CLI's doors to a member's export and erasure (`billing members export|erase`), as
// the owner in the member's community: the same SQL as GET /v1/members/{id}/export and
// POST /v1/members/{id}/erase (db/migrations/fixtures/functions/30-member-privacy.sql).
// The CLI has no payment provider client, so its erasure refuses (409) a member with a
// live subscription at Stripe, which the API's handler would cancel there.
import type pg from 'pg';
import { ApiError } from '../../core/errors';
import { inCommunity } from '../../db/community-transaction';
import type { z } from 'zod';
import type { memberErasure, memberExport } from './member-privacy-schema';

export type MemberExport = z.infer<typeof memberExport>;
export type MemberErasure = z.infer<typeof memberErasure>;

/** The member's community: the one given, else the one holding that member id (ids are unique). */
async function communityOf(pool: pg.Pool, memberId: string, communityId: string | undefined): Promise<string> {
  if (communityId) return communityId;
  const { rows } = await pool.query<{ community_id: string }>('select community_id from billing.members where id = $1', [memberId]);
  if (rows.length !== 1) throw new ApiError('not_found', `No member ${memberId}.`);
  return rows[0].community_id;
}

export async function exportMember(pool: pg.Pool, memberId: string, communityId?: string): Promise<MemberExport> {
  const c = await communityOf(pool, memberId, communityId);
  return inCommunity(pool, c, async (client) =>
    (await client.query<{ r: MemberExport }>('select billing_api.member_export($1) as r', [{ id: memberId }])).rows[0].r);
}

export async function eraseMember(pool: pg.Pool, memberId: string, communityId?: string): Promise<MemberErasure> {
  const c = await communityOf(pool, memberId, communityId);
  return inCommunity(pool, c, async (client) =>
    (await client.query<{ r: { erasure: MemberErasure } }>('select billing_private.member_erase($1, false) as r', [memberId])).rows[0].r.erasure);
}
