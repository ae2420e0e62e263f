// Operator actions that the spec leaves to a dashboard: communities and keys. They
// run as the owner role (the operator CLI and npm start's first-run setup).
import crypto from 'node:crypto';
import type pg from 'pg';
import { hashKey } from '../../core/ids';
import { SCOPES, Scope } from '../../core/scopes';

export async function createCommunity(pool: pg.Pool, name: string): Promise<{ id: string }> {
  const { rows } = await pool.query<{ id: string }>('insert into billing.communities (name) values ($1) returning id', [name]);
  return rows[0];
}

/** The seller's fields its invoices print (docs/decisions/invoice-pdf.md): a field given as null is cleared, one left out kept. */
export interface CommunityLegal {
  legal_name?: string | null;
  address_lines?: string[] | null;
  country?: string | null;
  tax_id?: string | null;
}

/** Sets the community's legal fields (the table's CHECK refuses what does not fit); answers them all. */
export async function setCommunityLegal(pool: pg.Pool, communityId: string, legal: CommunityLegal): Promise<Required<CommunityLegal> & { id: string }> {
  const { rows } = await pool.query<Required<CommunityLegal> & { id: string }>(
    `update billing.communities set
       legal_name = case when $2 then $3 else legal_name end,
       address_lines = case when $4 then $5::text[] else address_lines end,
       country = case when $6 then $7 else country end,
       tax_id = case when $8 then $9 else tax_id end
     where id = $1
     returning id, legal_name, coalesce(address_lines, '{}') as address_lines, country, tax_id`,
    [communityId, legal.legal_name !== undefined, legal.legal_name ?? null, legal.address_lines !== undefined, legal.address_lines ?? null,
      legal.country !== undefined, legal.country ?? null, legal.tax_id !== undefined, legal.tax_id ?? null]);
  if (!rows[0]) throw new Error(`no community ${communityId}`);
  return rows[0];
}

/**
 * The community's mail sender (docs/decisions/mail-outbox.md): display name and reply-to;
 * undefined leaves one as it is, '' clears it. The database checks both (23514).
 */
export async function setCommunityMail(pool: pg.Pool, communityId: string, senderName: string | undefined, replyTo: string | undefined):
  Promise<{ id: string; mail_sender_name: string | null; mail_reply_to: string | null } | null> {
  const { rows } = await pool.query<{ id: string; mail_sender_name: string | null; mail_reply_to: string | null }>(
    `update billing.communities set
       mail_sender_name = case when $2::boolean then nullif($3, '') else mail_sender_name end,
       mail_reply_to = case when $4::boolean then nullif($5, '') else mail_reply_to end
     where id = $1 returning id, mail_sender_name, mail_reply_to`,
    [communityId, senderName !== undefined, senderName?.trim() ?? '', replyTo !== undefined, replyTo?.trim() ?? '']);
  return rows[0] ?? null;
}

/**
 * How many days the community's audit log is kept (docs/decisions/audit-log.md): 30 to
 * 3650, 365 by default; the hourly purge deletes older lines. The change is itself audited.
 */
export async function setAuditRetention(pool: pg.Pool, communityId: string, days: number): Promise<{ id: string; audit_retention_days: number } | null> {
  const { rows } = await pool.query<{ id: string; audit_retention_days: number }>(
    'update billing.communities set audit_retention_days = $2 where id = $1 returning id, audit_retention_days', [communityId, days]);
  return rows[0] ?? null;
}

export function parseScopes(list: string): Scope[] {
  if (list.trim() === 'all') return [...SCOPES];
  const scopes = list.split(',').map((s) => s.trim()).filter(Boolean);
  if (scopes.length === 0) throw new Error('--scopes needs at least one scope, or "all"');
  for (const s of scopes) {
    if (!(SCOPES as readonly string[]).includes(s)) throw new Error(`unknown scope "${s}"; known: ${SCOPES.join(', ')}`);
  }
  return [...new Set(scopes)] as Scope[];
}

const ALPHANUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomAlnum(n: number): string {
  const bytes = crypto.randomBytes(n);
  return Array.from(bytes, (b) => ALPHANUM[b % ALPHANUM.length]).join('');
}

export interface CreatedKey { id: string; key: string; prefix: string; scopes: Scope[] }

/** A key is bk_<8-char prefix>_<256 random bits>; only its SHA-256 and prefix are stored. */
export function newKey(): { key: string; prefix: string; key_hash: string } {
  const prefix = `bk_${randomAlnum(8)}`;
  const key = `${prefix}_${crypto.randomBytes(32).toString('base64url')}`;
  return { key, prefix, key_hash: hashKey(key) };
}

export async function createKey(pool: pg.Pool, communityId: string, scopes: Scope[], name?: string): Promise<CreatedKey> {
  const { key, prefix } = newKey();
  const { rows } = await pool.query<{ id: string }>(
    `insert into billing_private.api_keys (community_id, name, prefix, key_hash, scopes)
     select c.id, $2, $3, $4, $5 from billing.communities c where c.id = $1 returning id`,
    [communityId, name ?? null, prefix, hashKey(key), scopes],
  );
  if (!rows[0]) throw new Error(`no community ${communityId}`);
  return { id: rows[0].id, key, prefix, scopes };
}

export async function revokeKey(pool: pg.Pool, keyId: string): Promise<{ id: string; revoked_at: string }> {
  const { rows } = await pool.query<{ id: string; revoked_at: string }>(
    `update billing_private.api_keys set revoked_at = coalesce(revoked_at, now())
     where id = $1 returning id, billing.iso(revoked_at) as revoked_at`, [keyId]);
  if (!rows[0]) throw new Error(`no key ${keyId}`);
  return rows[0];
}
