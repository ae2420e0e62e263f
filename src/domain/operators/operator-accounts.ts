// Operator users of the dashboard: invitations (one-time sign-in links), password
// sign-in and server-side sessions. The tables and their rules are SQL's
// (db/migrations/fixtures/15-operators.sql); only hashes of tokens are stored, and
// passwords are hashed here with Node's scrypt (no native build). Everything an
// operator does once signed in runs the registry's operations with the session as the
// credential (src/operations/executor.ts, Caller.session).
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import type pg from 'pg';
import { hashKey } from '../../core/ids';
import type { OperatorRole } from '../../core/scopes';

const scrypt = promisify(crypto.scrypt) as (pw: crypto.BinaryLike, salt: crypto.BinaryLike, len: number, opts: crypto.ScryptOptions) => Promise<Buffer>;

/** scrypt parameters (N=2^15, r=8, p=1: ~32 MiB, ~50-100 ms), stored with each hash. */
const N = 32768, R = 8, P = 1, LEN = 32;
const MAXMEM = 64 * 1024 * 1024;

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 200;

/** The key scrypt derives from a password with stored parameters 'scrypt$N$r$p$salt'. */
async function derive(password: string, params: string): Promise<Buffer | null> {
  const parts = params.split('$');
  if (parts.length !== 5 || parts[0] !== 'scrypt') return null;
  const [n, r, p] = parts.slice(1, 4).map(Number);
  return scrypt(password.normalize('NFKC'), Buffer.from(parts[4], 'base64'), LEN, { N: n, r, p, maxmem: MAXMEM });
}

/**
 * The stored form: 'scrypt$N$r$p$salt$' + sha256 of the derived key. The database
 * compares a derived key the service sends against it (operator_password_sign_in), so
 * neither the service's login nor a page ever reads a password hash.
 */
export async function hashPassword(password: string): Promise<string> {
  const params = `scrypt$${N}$${R}$${P}$${crypto.randomBytes(16).toString('base64')}`;
  const derived = (await derive(password, params))!;
  return `${params}$${crypto.createHash('sha256').update(derived).digest('base64')}`;
}

/** Parameters no user has: derived from when an email has none, so timing tells nothing. */
const DECOY = `scrypt$${N}$${R}$${P}$${crypto.randomBytes(16).toString('base64')}`;

export const SESSION_TTL = '12 hours';
export const LINK_TTL = '24 hours';

export function newSessionToken(): string {
  return `bos_${crypto.randomBytes(32).toString('base64url')}`;
}

export function newLinkToken(): string {
  return `bol_${crypto.randomBytes(32).toString('base64url')}`;
}

export interface Invitation { user_id: string; community_id: string; email: string; role: OperatorRole; expires_at: string; token: string }

/** Creates (or re-roles) an operator user and a one-time link token. Owner pool (CLI, first start). */
export async function inviteOperator(owner: pg.Pool, communityId: string, email: string, role: OperatorRole): Promise<Invitation> {
  const token = newLinkToken();
  const { rows } = await owner.query<{ r: Omit<Invitation, 'token'> }>(
    'select billing_private.operator_invite($1, $2, $3, $4, $5::interval) as r',
    [communityId, email, role, hashKey(token), LINK_TTL]);
  return { ...rows[0].r, token };
}

export function signInLink(baseUrl: string, token: string): string {
  return `${baseUrl}/dashboard/link?t=${encodeURIComponent(token)}`;
}

export interface OpenedSession { token: string; session_id: string; community_id: string; expires_at: string }

export type SignInResult = { ok: true; session: OpenedSession } | { ok: false; reason: 'invalid' | 'rate_limited'; retry_after?: number };

/** Email and password: rate limited per IP and per email before anything is verified. */
export async function signInWithPassword(api: pg.Pool, email: string, password: string, ip: string): Promise<SignInResult> {
  const throttle = await api.query<{ r: { allowed: boolean; retry_after: number } }>(
    'select billing_private.operator_sign_in_throttle($1, $2) as r', [ip, email]);
  if (!throttle.rows[0].r.allowed) return { ok: false, reason: 'rate_limited', retry_after: throttle.rows[0].r.retry_after };
  const { rows } = await api.query<{ r: { user_id: string; params: string }[] }>(
    'select billing_private.operator_password_candidates($1) as r', [email]);
  if (rows[0].r.length === 0) await derive(password, DECOY);
  const token = newSessionToken();
  for (const c of rows[0].r) {
    const derived = await derive(password, c.params);
    if (!derived) continue;
    const opened = await api.query<{ r: Omit<OpenedSession, 'token'> | null }>(
      'select billing_private.operator_password_sign_in($1, $2, $3, $4::interval) as r',
      [c.user_id, derived.toString('base64'), hashKey(token), SESSION_TTL]);
    if (opened.rows[0].r) return { ok: true, session: { ...opened.rows[0].r, token } };
  }
  return { ok: false, reason: 'invalid' };
}

/** Spends a one-time link; null when it is unknown, used or expired. */
export async function signInWithLink(api: pg.Pool, linkToken: string, ip: string): Promise<SignInResult> {
  const throttle = await api.query<{ r: { allowed: boolean; retry_after: number } }>(
    'select billing_private.operator_sign_in_throttle($1, null) as r', [ip]);
  if (!throttle.rows[0].r.allowed) return { ok: false, reason: 'rate_limited', retry_after: throttle.rows[0].r.retry_after };
  const token = newSessionToken();
  const { rows } = await api.query<{ r: Omit<OpenedSession, 'token'> | null }>(
    'select billing_private.operator_link_redeem($1, $2, $3::interval) as r', [hashKey(linkToken), hashKey(token), SESSION_TTL]);
  const r = rows[0].r;
  return r ? { ok: true, session: { ...r, token } } : { ok: false, reason: 'invalid' };
}

export interface SessionInfo {
  session_id: string; community_id: string; community_name: string; user_id: string;
  email: string; role: OperatorRole; has_password: boolean; scopes: string[]; expires_at: string;
}

export async function sessionInfo(api: pg.Pool, token: string): Promise<SessionInfo | null> {
  const { rows } = await api.query<{ r: SessionInfo | null }>('select billing_private.operator_session_info($1) as r', [hashKey(token)]);
  return rows[0].r;
}

export async function signOut(api: pg.Pool, token: string): Promise<void> {
  await api.query('select billing_private.operator_session_close($1)', [hashKey(token)]);
}

export async function setPassword(api: pg.Pool, token: string, password: string): Promise<boolean> {
  const { rows } = await api.query<{ r: boolean | null }>('select billing_private.operator_set_password($1, $2) as r',
    [hashKey(token), await hashPassword(password)]);
  return rows[0].r === true;
}
