// Operator users of the dashboard: invitations (one-time sign-in links), password
// sign-in and server-side sessions. The tables and their rules are SQL's
// (db/migrations/fixtures/*/15-operators.sql); only hashes of tokens are stored, and
// passwords are hashed here with Node's scrypt (no native build). Everything an
// operator does once signed in runs the registry's operations with the session as the
// credential (src/operations/executor.ts, Caller.session).
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import type pg from 'pg';
import type { ZxcvbnFactory } from '@zxcvbn-ts/core';
import { hashKey } from '../../core/ids';
import type { OperatorRole } from '../../core/scopes';

const scrypt = promisify(crypto.scrypt) as (pw: crypto.BinaryLike, salt: crypto.BinaryLike, len: number, opts: crypto.ScryptOptions) => Promise<Buffer>;

/** scrypt parameters (N=2^15, r=8, p=1: ~32 MiB, ~50-100 ms), stored with each hash. */
const N = 32768, R = 8, P = 1, LEN = 32;
const MAXMEM = 64 * 1024 * 1024;

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 200;
/** zxcvbn's score (0-4) a new password needs: 3 is "safely unguessable" (~10^10 guesses). */
export const PASSWORD_MIN_SCORE = 3;

let strength: ZxcvbnFactory | null = null;

/**
 * zxcvbn with its dictionaries, loaded with the first password checked: decompressing
 * them is a tenth of a second that a start of the service should not wait for.
 */
function passwordStrength(): ZxcvbnFactory {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { ZxcvbnFactory: Factory } = require('@zxcvbn-ts/core') as typeof import('@zxcvbn-ts/core');
  const common = require('@zxcvbn-ts/language-common') as typeof import('@zxcvbn-ts/language-common');
  const en = require('@zxcvbn-ts/language-en') as typeof import('@zxcvbn-ts/language-en');
  /* eslint-enable @typescript-eslint/no-require-imports */
  return new Factory({
    dictionary: { ...common.dictionary, ...en.dictionary },
    graphs: common.adjacencyGraphs,
    translations: en.translations,
  });
}

/**
 * Why a new password is refused, or null: length, control characters (NUL, newlines,
 * ...) and unpaired surrogates, then zxcvbn's estimate with the common and English
 * dictionaries and the user's own email and community name as known words.
 */
export function passwordProblem(password: string, userInputs: string[] = []): string | null {
  if (password.length < PASSWORD_MIN || password.length > PASSWORD_MAX) return `The password needs ${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`;
  if (/[\p{Cc}\p{Cs}]/u.test(password)) return 'The password may not contain control characters.';
  strength ??= passwordStrength();
  const inputs = userInputs.flatMap((u) => [u, ...u.split(/[^\p{L}\p{N}]+/u)]).filter((u) => u.length >= 3);
  const result = strength.check(password, inputs);
  if (result.score >= PASSWORD_MIN_SCORE) return null;
  const hint = [result.feedback.warning, ...result.feedback.suggestions].filter(Boolean).join(' ');
  return `This password is too easy to guess${hint ? `: ${hint}` : '.'} Longer passphrases of unrelated words work well.`;
}

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
/** A link mailed to an operator whose right password came from a new address while the account was under attack. */
export const MAILED_LINK_TTL = '15 minutes';

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

/** code_pending: the user has a second factor, and the session is no credential until its code is given (second-factor.ts). */
export interface OpenedSession { token: string; session_id: string; community_id: string; expires_at: string; code_pending?: boolean }

export type SignInResult = { ok: true; session: OpenedSession } | { ok: false; reason: 'invalid' | 'rate_limited' | 'link_required'; retry_after?: number };

type Throttle = { allowed: boolean; reason?: 'rate_limited' | 'link_required'; retry_after: number };

/** The address (req.ip) and account throttles of billing_private.operator_sign_in_throttle. */
async function throttle(api: pg.Pool, ip: string, email: string | null): Promise<SignInResult | null> {
  const { rows } = await api.query<{ r: Throttle }>('select billing_private.operator_sign_in_throttle($1, $2) as r', [ip, email]);
  const r = rows[0].r;
  return r.allowed ? null : { ok: false, reason: r.reason ?? 'rate_limited', retry_after: r.retry_after };
}

async function succeeded(api: pg.Pool, sessionId: string, ip: string, email: string | null): Promise<void> {
  await api.query('select billing_private.operator_sign_in_succeeded($1, $2, $3)', [sessionId, ip, email]);
}

/** Sends a one-time sign-in link token to an operator's own address (the dashboard's, over SMTP_URL). */
export type LinkMailer = (mail: { to: string; communityName: string; token: string }) => Promise<void>;

/**
 * Email and password: throttled per address, per account and address, and per account
 * before anything is verified (failures only: a success gives its tokens back). A wrong
 * password from one address never locks the account for another; when the account as a
 * whole has had too many failures, only addresses it signed in from before may try a
 * password, the others get link_required. Then, given a mailer, the password is still
 * checked, and a right one has a one-time link mailed to the account's own address
 * (mailLinkIfRight): the answer is link_required either way.
 */
export async function signInWithPassword(api: pg.Pool, email: string, password: string, ip: string, mailLink?: LinkMailer): Promise<SignInResult> {
  const refused = await throttle(api, ip, email);
  if (refused && !refused.ok && refused.reason === 'link_required' && mailLink) await mailLinkIfRight(api, email, password, mailLink);
  if (refused) return refused;
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
    if (opened.rows[0].r) {
      await succeeded(api, opened.rows[0].r.session_id, ip, email);
      return { ok: true, session: { ...opened.rows[0].r, token } };
    }
  }
  return { ok: false, reason: 'invalid' };
}

/**
 * The same work for a right and a wrong password (a derivation per account, one SQL
 * call each); the mail is sent after the answer, so its time tells nothing either.
 * billing_private.operator_mailed_link checks the password and sends at most one link
 * per account every 10 minutes.
 */
async function mailLinkIfRight(api: pg.Pool, email: string, password: string, mailLink: LinkMailer): Promise<void> {
  const { rows } = await api.query<{ r: { user_id: string; params: string }[] }>(
    'select billing_private.operator_password_candidates($1) as r', [email]);
  if (rows[0].r.length === 0) await derive(password, DECOY);
  for (const c of rows[0].r) {
    const derived = await derive(password, c.params);
    if (!derived) continue;
    const token = newLinkToken();
    const sent = await api.query<{ r: { email: string; community_name: string } | null }>(
      'select billing_private.operator_mailed_link($1, $2, $3, $4::interval) as r',
      [c.user_id, derived.toString('base64'), hashKey(token), MAILED_LINK_TTL]);
    const to = sent.rows[0].r;
    if (to) setImmediate(() => { mailLink({ to: to.email, communityName: to.community_name, token }).catch(() => {}); });
  }
}

/** Spends a one-time link; null when it is unknown, used or expired. */
export async function signInWithLink(api: pg.Pool, linkToken: string, ip: string): Promise<SignInResult> {
  const refused = await throttle(api, ip, null);
  if (refused) return refused;
  const token = newSessionToken();
  const { rows } = await api.query<{ r: Omit<OpenedSession, 'token'> | null }>(
    'select billing_private.operator_link_redeem($1, $2, $3::interval) as r', [hashKey(linkToken), hashKey(token), SESSION_TTL]);
  const r = rows[0].r;
  if (!r) return { ok: false, reason: 'invalid' };
  // The address a link was used from is known to the account from now on.
  await succeeded(api, r.session_id, ip, null);
  return { ok: true, session: { ...r, token } };
}

export interface SessionInfo {
  session_id: string; community_id: string; community_name: string; user_id: string;
  email: string; role: OperatorRole; has_password: boolean; scopes: string[]; expires_at: string;
  /** The user's second factor is on. */
  second_factor: boolean;
  /** What the session owes before it is a credential: its sign-in's code, or enrolment (the community requires a second factor). */
  needs: 'code' | 'enrolment' | null;
}

/** Who a live session is; seen (a page request) records its last use, address and browser. */
export async function sessionInfo(api: pg.Pool, token: string, seen?: { ip: string; userAgent?: string }): Promise<SessionInfo | null> {
  const { rows } = await api.query<{ r: SessionInfo | null }>('select billing_private.operator_session_info($1, $2, $3) as r',
    [hashKey(token), seen?.ip ?? null, seen?.userAgent?.slice(0, 256) ?? null]);
  return rows[0].r;
}

/** A live session as the sessions lists show it (address cut to its network unless it is the operator's own). */
export interface SessionRow {
  id: string; user_id: string; email: string | null; current: boolean; code_pending: boolean;
  created_at: string; last_seen_at: string; expires_at: string; address: string | null; browser: string | null;
}

/** The signed-in operator's own live sessions. */
export async function ownSessions(api: pg.Pool, token: string): Promise<SessionRow[]> {
  const { rows } = await api.query<{ r: SessionRow[] | null }>('select billing_private.operator_own_sessions($1) as r', [hashKey(token)]);
  return rows[0].r ?? [];
}

/** Ends one of the signed-in operator's sessions, or (null) all of them, this one too. The number ended. */
export async function endOwnSessions(api: pg.Pool, token: string, sessionId: string | null): Promise<number> {
  const { rows } = await api.query<{ n: number }>('select billing_private.operator_end_own_sessions($1, $2) as n', [hashKey(token), sessionId]);
  return rows[0].n;
}

export async function signOut(api: pg.Pool, token: string): Promise<void> {
  await api.query('select billing_private.operator_session_close($1)', [hashKey(token)]);
}

export type PasswordChange = { ok: true; ended: number }
  | { ok: false; reason: 'weak' | 'wrong_password' | 'rate_limited' | 'signed_out'; message: string };

/**
 * The signed-in operator sets a password: strong enough (passwordProblem), and, when
 * they have one already, only with the current one (throttled like sign-in failures of
 * this account and address). Every other session of theirs ends.
 */
export async function changePassword(api: pg.Pool, token: string, input: { current?: string | null; next: string; ip: string; userInputs?: string[] }): Promise<PasswordChange> {
  const problem = passwordProblem(input.next, input.userInputs);
  if (problem) return { ok: false, reason: 'weak', message: problem };
  const { rows: [p] } = await api.query<{ params: string | null }>('select billing_private.operator_session_password_params($1) as params', [hashKey(token)]);
  let derived: string | null = null;
  if (p.params) {
    const current = typeof input.current === 'string' ? input.current.slice(0, PASSWORD_MAX) : '';
    derived = current ? (await derive(current, p.params))?.toString('base64') ?? null : null;
  }
  const { rows } = await api.query<{ r: { ok: boolean; reason?: 'wrong_password' | 'rate_limited' | 'signed_out'; ended?: number } }>(
    'select billing_private.operator_change_password($1, $2, $3, $4) as r', [hashKey(token), derived, await hashPassword(input.next), input.ip]);
  const r = rows[0].r;
  if (r.ok) return { ok: true, ended: r.ended ?? 0 };
  const reason = r.reason ?? 'signed_out';
  const message = reason === 'wrong_password' ? 'Your current password is not right.'
    : reason === 'rate_limited' ? 'Too many wrong current passwords: try again in a few minutes.' : 'Your session has ended: sign in again.';
  return { ok: false, reason, message };
}

/** A first password (a user who has none yet, signed in with a link); false when refused. */
export async function setPassword(api: pg.Pool, token: string, password: string, ip = 'unknown'): Promise<boolean> {
  return (await changePassword(api, token, { next: password, ip })).ok;
}
