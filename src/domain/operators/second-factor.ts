// Operators' second factor (issue 31 item 6): TOTP (RFC 6238) with the kept library
// otpauth, and one-use recovery codes. docs/decisions/operator-second-factor.md.
//
// - Parameters: SHA-1, 6 digits, 30-second steps (what every authenticator app reads
//   from an otpauth:// URI), a 20-byte random secret, codes accepted from one step
//   before to one step after now (clock drift), and never a step at or before the last
//   one accepted (replay: billing_private.operator_step_accept).
// - The secret is encrypted here (AES-256-GCM under WEBHOOK_ENCRYPTION_KEY, bound to
//   the community and the user, as payment and platform secrets are) and checked here:
//   the database never holds it in clear, and it is never logged or sent anywhere but
//   to the operator's own enrolment page, once.
// - Recovery codes: 10 random codes of 50 bits, shown once; only their sha256 is kept,
//   and each is spent by the database on use.
// - Every attempt passes the code throttles first (billing_private.operator_code_begin).
import crypto from 'node:crypto';
import type pg from 'pg';
import { Secret, TOTP } from 'otpauth';
import { hashKey } from '../../core/ids';
import { decryptSecret, encryptSecret, parseEncryptionKey } from '../../webhooks/crypto';

export const TOTP_DIGITS = 6;
export const TOTP_PERIOD = 30;
export const TOTP_ALGORITHM = 'SHA1';
/** Steps accepted either side of now. */
export const TOTP_WINDOW = 1;
export const TOTP_SECRET_BYTES = 20;
export const RECOVERY_CODE_COUNT = 10;

/** The secret box of operators' TOTP secrets: one ciphertext decrypts only as this user's secret. */
export class SecondFactorBox {
  private readonly key: Buffer;
  constructor(encryptionKey: string) {
    this.key = parseEncryptionKey(encryptionKey);
  }

  encrypt(communityId: string, userId: string, secretBase32: string): string {
    return encryptSecret(this.key, communityId, `operator:${userId}:totp`, secretBase32);
  }

  decrypt(communityId: string, userId: string, ciphertext: string): string {
    return decryptSecret(this.key, communityId, `operator:${userId}:totp`, ciphertext);
  }
}

/** The box of this deployment's key, or null (no key, or a malformed one): no TOTP then. */
export function secondFactorBox(encryptionKey: string | null): SecondFactorBox | null {
  if (!encryptionKey) return null;
  try {
    return new SecondFactorBox(encryptionKey);
  } catch {
    return null;
  }
}

function totp(secretBase32: string, issuer = '', label = 'operator'): TOTP {
  return new TOTP({ issuer, label, secret: Secret.fromBase32(secretBase32), algorithm: TOTP_ALGORITHM, digits: TOTP_DIGITS, period: TOTP_PERIOD });
}

/** The otpauth:// URI an authenticator app reads (issuer: the community's billing; label: the email). */
export function totpUri(secretBase32: string, issuer: string, label: string): string {
  return totp(secretBase32, issuer, label).toString();
}

/** The time step of a right code (now ± TOTP_WINDOW), or null. */
export function codeStep(secretBase32: string, code: string, timestamp = Date.now()): number | null {
  const t = totp(secretBase32);
  const delta = t.validate({ token: code, timestamp, window: TOTP_WINDOW });
  return delta === null ? null : t.counter({ timestamp }) + delta;
}

const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789'; // no 0/o, 1/l/i

/** Ten recovery codes (xxxxx-xxxxx, ~49 bits each). */
export function newRecoveryCodes(n = RECOVERY_CODE_COUNT): string[] {
  return Array.from({ length: n }, () => {
    const chars = Array.from(crypto.randomBytes(10), (b) => RECOVERY_ALPHABET[b % RECOVERY_ALPHABET.length]).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/** What the database keeps of a recovery code: the sha256 of its normalized form. */
export function recoveryHash(code: string): string {
  return hashKey(`recovery:${code.toLowerCase().replace(/[^a-z0-9]/g, '')}`);
}

/** A typed code: six digits (spaces allowed) are a TOTP code, anything else a recovery code. */
function parseCode(input: string): { totp: string } | { recovery: string } | null {
  const trimmed = input.trim().slice(0, 64);
  if (!trimmed) return null;
  const digits = trimmed.replace(/\s+/g, '');
  if (/^\d+$/.test(digits)) return digits.length === TOTP_DIGITS ? { totp: digits } : null;
  return { recovery: trimmed };
}

type Begin = { allowed: true; community_id: string; user_id: string; ciphertext: string; email: string; community_name: string }
  | { allowed: false; reason: 'signed_out' | 'no_factor' | 'rate_limited'; retry_after?: number };

export type CodeProblem = 'signed_out' | 'no_factor' | 'rate_limited' | 'wrong' | 'replayed' | 'required' | 'unavailable';

export const CODE_MESSAGES: Record<CodeProblem, string> = {
  signed_out: 'Your session has ended: sign in again.',
  no_factor: 'There is no second factor to check.',
  rate_limited: 'Too many wrong codes: wait a few minutes and try again.',
  wrong: 'That code is not right: type the 6 digits your app shows now, or one of your recovery codes.',
  replayed: 'That code was used already: wait for the next one your app shows.',
  required: 'This community requires a second factor: it cannot be turned off.',
  unavailable: 'This deployment has no WEBHOOK_ENCRYPTION_KEY, so it cannot keep or check authenticator app secrets. A recovery code still works.',
};

async function begin(api: pg.Pool, token: string, ip: string, purpose: 'sign_in' | 'confirm' | 'manage'): Promise<Begin> {
  const { rows } = await api.query<{ r: Begin }>('select billing_private.operator_code_begin($1, $2, $3) as r', [hashKey(token), ip, purpose]);
  return rows[0].r;
}

/**
 * The time step of a right TOTP code for the begun attempt; null when wrong. Throws
 * nothing about the secret: a ciphertext this deployment cannot decrypt is a wrong code.
 */
function stepOf(box: SecondFactorBox | null, b: Extract<Begin, { allowed: true }>, code: string): number | null {
  if (!box) return null;
  let secret: string;
  try {
    secret = box.decrypt(b.community_id, b.user_id, b.ciphertext);
  } catch {
    return null;
  }
  return codeStep(secret, code);
}

export interface Enrolment { secret: string; uri: string }

/** The unconfirmed secret of the signed-in operator, to show again (null: none, or no key). */
export async function pendingEnrolment(api: pg.Pool, box: SecondFactorBox | null, token: string): Promise<Enrolment | null> {
  if (!box) return null;
  const { rows } = await api.query<{ r: { community_id: string; user_id: string; ciphertext: string; email: string; community_name: string } | null }>(
    'select billing_private.operator_second_factor_pending($1) as r', [hashKey(token)]);
  const p = rows[0].r;
  if (!p) return null;
  try {
    const secret = box.decrypt(p.community_id, p.user_id, p.ciphertext);
    return { secret, uri: totpUri(secret, `${p.community_name} billing`, p.email) };
  } catch {
    return null;
  }
}

/** Starts enrolment: a new secret, kept encrypted and unconfirmed until a code from it is given. */
export async function startEnrolment(api: pg.Pool, box: SecondFactorBox | null, token: string): Promise<{ ok: true; enrolment: Enrolment } | { ok: false; reason: 'unavailable' | 'signed_out' | 'already_on' }> {
  if (!box) return { ok: false, reason: 'unavailable' };
  const info = await api.query<{ r: { community_id: string; user_id: string; email: string; community_name: string } | null }>(
    'select billing_private.operator_session_info($1) as r', [hashKey(token)]);
  const who = info.rows[0].r;
  if (!who) return { ok: false, reason: 'signed_out' };
  const secret = new Secret({ size: TOTP_SECRET_BYTES }).base32;
  const { rows } = await api.query<{ r: { ok: boolean; reason?: 'signed_out' | 'already_on' } }>(
    'select billing_private.operator_second_factor_start($1, $2) as r', [hashKey(token), box.encrypt(who.community_id, who.user_id, secret)]);
  if (!rows[0].r.ok) return { ok: false, reason: rows[0].r.reason ?? 'signed_out' };
  return { ok: true, enrolment: { secret, uri: totpUri(secret, `${who.community_name} billing`, who.email) } };
}

export type CodeResult<T> = ({ ok: true } & T) | { ok: false; reason: CodeProblem; retry_after?: number };

/** Enrolment's end: a right code from the new secret turns the factor on; the recovery codes are answered once. */
export async function confirmEnrolment(api: pg.Pool, box: SecondFactorBox | null, token: string, code: string, ip: string): Promise<CodeResult<{ recoveryCodes: string[]; ended: number }>> {
  if (!box) return { ok: false, reason: 'unavailable' };
  const parsed = parseCode(code);
  const b = await begin(api, token, ip, 'confirm');
  if (!b.allowed) return { ok: false, reason: b.reason, retry_after: b.retry_after };
  const step = parsed && 'totp' in parsed ? stepOf(box, b, parsed.totp) : null;
  if (step === null) return { ok: false, reason: 'wrong' };
  const recoveryCodes = newRecoveryCodes();
  const { rows } = await api.query<{ r: { ok: boolean; reason?: CodeProblem; ended?: number } }>(
    'select billing_private.operator_second_factor_confirm($1, $2, $3, $4) as r', [hashKey(token), ip, step, recoveryCodes.map(recoveryHash)]);
  const r = rows[0].r;
  return r.ok ? { ok: true, recoveryCodes, ended: r.ended ?? 0 } : { ok: false, reason: r.reason ?? 'signed_out' };
}

export interface CodeSession { token: string; session_id: string; community_id: string; expires_at: string; recovery_left: number }

/**
 * The part every code step shares: the throttle's turn for this session and purpose,
 * then the code parsed, and a TOTP code's time step found (null for a recovery code).
 */
async function checkCode(api: pg.Pool, box: SecondFactorBox | null, token: string, code: string, ip: string,
  purpose: 'sign_in' | 'manage'): Promise<CodeResult<{ parsed: NonNullable<ReturnType<typeof parseCode>>; step: number | null }>> {
  const parsed = parseCode(code);
  const b = await begin(api, token, ip, purpose);
  if (!b.allowed) return { ok: false, reason: b.reason, retry_after: b.retry_after };
  if (!parsed) return { ok: false, reason: 'wrong' };
  let step: number | null = null;
  if ('totp' in parsed) {
    if (!box) return { ok: false, reason: 'unavailable' };
    step = stepOf(box, b, parsed.totp);
    if (step === null) return { ok: false, reason: 'wrong' };
  }
  return { ok: true, parsed, step };
}

/**
 * The second step of a sign-in: the session that owes its code becomes a full session
 * under a new token (the caller sets the new cookie). A TOTP code or a recovery code.
 */
export async function signInWithCode(api: pg.Pool, box: SecondFactorBox | null, token: string, code: string, ip: string, newToken: string, ttl: string): Promise<CodeResult<{ session: CodeSession }>> {
  const checked = await checkCode(api, box, token, code, ip, 'sign_in');
  if (!checked.ok) return checked;
  const { parsed, step } = checked;
  const { rows } = await api.query<{ r: { ok: boolean; reason?: CodeProblem; session_id: string; community_id: string; expires_at: string; recovery_left: number } }>(
    'select billing_private.operator_sign_in_code($1, $2, $3, $4, $5, $6::interval) as r',
    [hashKey(token), ip, step, 'recovery' in parsed ? recoveryHash(parsed.recovery) : null, hashKey(newToken), ttl]);
  const r = rows[0].r;
  if (!r.ok) return { ok: false, reason: r.reason ?? 'wrong' };
  return { ok: true, session: { token: newToken, session_id: r.session_id, community_id: r.community_id, expires_at: r.expires_at, recovery_left: Number(r.recovery_left) } };
}

/** With a right code (or a recovery code): turn the factor off, or replace the recovery codes (answered once). */
export async function manageSecondFactor(api: pg.Pool, box: SecondFactorBox | null, token: string, code: string, ip: string,
  action: 'off' | 'recovery_codes'): Promise<CodeResult<{ recoveryCodes: string[] | null }>> {
  const checked = await checkCode(api, box, token, code, ip, 'manage');
  if (!checked.ok) return checked;
  const { parsed, step } = checked;
  const recoveryCodes = action === 'recovery_codes' ? newRecoveryCodes() : null;
  const { rows } = await api.query<{ r: { ok: boolean; reason?: CodeProblem } }>(
    'select billing_private.operator_second_factor_manage($1, $2, $3, $4, $5, $6) as r',
    [hashKey(token), ip, step, 'recovery' in parsed ? recoveryHash(parsed.recovery) : null, action, recoveryCodes?.map(recoveryHash) ?? null]);
  const r = rows[0].r;
  return r.ok ? { ok: true, recoveryCodes } : { ok: false, reason: r.reason ?? 'signed_out' };
}

/**
 * The last resort (the CLI, owner pool) when no owner can sign in to remove a lost
 * second factor: removes the user's factor and recovery codes and ends their sessions.
 * Null when the community has no operator with that email.
 */
export async function resetSecondFactor(owner: pg.Pool, communityId: string, email: string): Promise<{ user_id: string; email: string; had_second_factor: boolean; sessions_ended: number } | null> {
  const { rows } = await owner.query<{ user_id: string; email: string; had_second_factor: boolean; sessions_ended: number }>(
    `with u as (select community_id, id, email from billing_private.operator_users where community_id = $1 and email = lower(trim($2))),
     f as (delete from billing_private.operator_second_factors f using u where f.community_id = u.community_id and f.user_id = u.id
           returning f.confirmed_at),
     r as (delete from billing_private.operator_recovery_codes r using u where r.community_id = u.community_id and r.user_id = u.id returning 1),
     s as (update billing_private.operator_sessions s set revoked_at = now() from u
           where s.community_id = u.community_id and s.user_id = u.id and s.revoked_at is null returning 1)
     select u.id as user_id, u.email, exists (select 1 from f where f.confirmed_at is not null) as had_second_factor,
       (select count(*)::int from s) as sessions_ended, (select count(*) from r) as codes
     from u`, [communityId, email]);
  if (!rows[0]) return null;
  const { user_id, email: e, had_second_factor, sessions_ended } = rows[0];
  return { user_id, email: e, had_second_factor, sessions_ended };
}
