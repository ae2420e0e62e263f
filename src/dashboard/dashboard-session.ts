// The dashboard's session plumbing: the session cookie (httpOnly, SameSite=Lax,
// Secure in production, path /dashboard), CSRF tokens and the caller a signed-in
// request runs operations as. Who the session is and what it may do is the
// database's (billing_private.session_credential / operator_session_info).
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { SESSION_TOKEN_PATTERN } from '../core/ids';
import { sessionInfo, SessionInfo } from '../domain/operators/operator-accounts';
import type { Caller } from '../operations/executor';
import { callerOf } from '../web/express-io';

export const SESSION_COOKIE = 'billing_session';
/** Double-submit token of the sign-in forms (before a session exists). */
export const PRE_CSRF_COOKIE = 'billing_signin_csrf';

import { cookies } from '../web/cookies';

export { cookies };

function cookieLine(config: Config, name: string, value: string, maxAgeSeconds: number): string {
  return `${name}=${encodeURIComponent(value)}; Path=/dashboard; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${config.production ? '; Secure' : ''}`;
}

export function setSessionCookie(res: Response, config: Config, token: string): void {
  res.append('Set-Cookie', cookieLine(config, SESSION_COOKIE, token, 12 * 3600));
}

export function clearSessionCookie(res: Response, config: Config): void {
  res.append('Set-Cookie', cookieLine(config, SESSION_COOKIE, '', 0));
}

/** The sign-in forms' CSRF token: a random value in a cookie and in the form, compared. */
export function preSessionCsrf(req: Request, res: Response, config: Config): string {
  const existing = cookies(req)[PRE_CSRF_COOKIE];
  if (existing && /^[A-Za-z0-9_-]{32}$/.test(existing)) return existing;
  const token = crypto.randomBytes(24).toString('base64url');
  res.append('Set-Cookie', cookieLine(config, PRE_CSRF_COOKIE, token, 3600));
  return token;
}

export function preSessionCsrfValid(req: Request): boolean {
  const sent = (req.body as Record<string, unknown> | undefined)?.csrf;
  const kept = cookies(req)[PRE_CSRF_COOKIE];
  return typeof sent === 'string' && !!kept && safeEqual(sent, kept);
}

/** A signed-in form's CSRF token: derived from the session token (which the page never shows). */
export function csrfFor(sessionToken: string): string {
  return crypto.createHash('sha256').update(`csrf:${sessionToken}`).digest('base64url');
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a), y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/** What a session that owes something may reach: the first is where a GET elsewhere is sent. */
const STAGE_PATHS: Record<'code' | 'enrolment', string[]> = {
  code: ['/second-factor', '/sign-out'],
  enrolment: ['/account/second-factor', '/account/second-factor/start', '/account/second-factor/confirm', '/sign-out'],
};

export interface Signed {
  token: string;
  info: SessionInfo;
  csrf: string;
  caller: Caller;
  can(scope: string): boolean;
}

declare module 'express-serve-static-core' {
  interface Request { signed?: Signed }
}

/**
 * Loads the session of the cookie, or sends the sign-in page's address. POSTs must
 * carry the session's CSRF token. The scopes here only choose what the pages offer:
 * the database refuses whatever the role lacks.
 */
export function requireSession(api: pg.Pool) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const token = cookies(req)[SESSION_COOKIE];
    const info = token && SESSION_TOKEN_PATTERN.test(token)
      ? await sessionInfo(api, token, { ip: req.ip ?? 'unknown', userAgent: req.get('user-agent') }) : null;
    if (!token || !info) {
      if (req.method === 'GET') return void res.redirect(303, `/dashboard/sign-in?next=${encodeURIComponent(req.originalUrl)}`);
      return void res.status(401).type('html').send('<!doctype html><title>Signed out</title><p>Your session has ended. <a href="/dashboard/sign-in">Sign in</a>.</p>');
    }
    const csrf = csrfFor(token);
    if (req.method === 'POST') {
      const sent = (req.body as Record<string, unknown> | undefined)?.csrf;
      if (typeof sent !== 'string' || !safeEqual(sent, csrf)) {
        return void res.status(403).type('html').send('<!doctype html><title>Refused</title><p>This form has expired or did not come from this dashboard (CSRF check). <a href="/dashboard">Back</a>.</p>');
      }
    }
    // A session that still owes its sign-in's code, or enrolment in a second factor the
    // community requires, reaches only those pages (the database refuses it as a
    // credential meanwhile: billing_private.operator_session_needs).
    if (info.needs) {
      const allowed = STAGE_PATHS[info.needs];
      if (!allowed.includes(req.path)) {
        if (req.method === 'GET') return void res.redirect(303, `/dashboard${allowed[0]}`);
        return void res.status(403).type('html').send(`<!doctype html><title>Refused</title><p>${info.needs === 'code' ? 'Give your second factor\'s code first' : 'This community requires a second factor: set yours up first'}. <a href="/dashboard${allowed[0]}">Continue</a>.</p>`);
      }
    }
    req.signed = {
      token, info, csrf,
      caller: { ...callerOf(req), key: null, session: token },
      can: (scope) => info.scopes.includes(scope),
    };
    next();
  };
}
