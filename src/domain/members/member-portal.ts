// The member portal of the sandbox provider: a portal URL (ten minutes, one use) opened in time
// becomes a member portal session (one hour, cookie), a credential the database fences
// to the member (db/migrations/fixtures/*/82-member-portal.sql). The portal's pages run
// the API's operations with it (src/operations/executor.ts, Caller.session).
import crypto from 'node:crypto';
import type pg from 'pg';
import { hashKey } from '../../core/ids';

export type PortalOpen = { status: 'open'; token: string; community_id: string; member_id: string } | { status: 'expired' } | { status: 'used' } | null;

export async function openMemberPortal(api: pg.Pool, portalId: string, accessToken: string): Promise<PortalOpen> {
  const token = `bmp_${crypto.randomBytes(32).toString('base64url')}`;
  const access = crypto.createHash('sha256').update(accessToken, 'utf8').digest();
  const { rows } = await api.query<{ r: PortalOpen }>('select billing_private.member_portal_open($1, $2, $3) as r', [portalId, access, hashKey(token)]);
  const r = rows[0].r;
  return r && r.status === 'open' ? { ...r, token } : r;
}

export interface MemberPortalInfo { community_id: string; community_name: string; member_id: string; provider: string | null; return_url: string | null; expires_at: string; portal_session_id: string }

export async function memberPortalInfo(api: pg.Pool, token: string): Promise<MemberPortalInfo | null> {
  const { rows } = await api.query<{ r: MemberPortalInfo | null }>('select billing_private.member_portal_info($1) as r', [hashKey(token)]);
  return rows[0].r;
}
