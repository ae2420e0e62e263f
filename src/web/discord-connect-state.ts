// The state of a "Connect Discord" authorization (docs/decisions/discord-connect.md),
// shared by the pages that start one (the sandbox checkout page through
// src/linking/discord-connect.ts, the member portal) and the one callback that finishes
// it: a random nonce sent to Discord as `state` and kept, with where the buyer came from,
// in an httpOnly SameSite=Lax cookie signed with a key derived from
// WEBHOOK_ENCRYPTION_KEY. A callback from another browser, or with another state, has
// no cookie that matches.
import crypto from 'node:crypto';
import type { Request, Response } from 'express';
import { baseUrlFor, type Config } from '../core/config';
import { cookies } from './cookies';

export const DISCORD_CALLBACK = '/platforms/discord/oauth/callback';
const COOKIE = 'discord_connect';
const COOKIE_PATH = '/platforms/discord/oauth';
/** How long the buyer has on Discord's page. */
const TTL_MS = 10 * 60_000;

/** Where the buyer came from, and so whose account it becomes. */
export type ConnectOrigin =
  | { kind: 'checkout'; checkoutId: string; token: string }
  /** A member portal session already checked: its member gets the account. */
  | { kind: 'portal'; portalSessionId: string; memberId: string };

export interface PendingConnect { n: string; p: string; o: ConnectOrigin; e: number }

const signerOf = (key: string | null): Buffer | null => (key ? crypto.createHash('sha256').update(`discord-connect:${key}`).digest() : null);

export function discordRedirectUri(config: Pick<Config, 'publicBaseUrl' | 'production' | 'port'>, req: Request): string {
  return `${baseUrlFor(config, { protocol: req.protocol, host: req.get('host') })}${DISCORD_CALLBACK}`;
}

/**
 * Sets the state cookie and answers the 302 to Discord's authorization page; false
 * (nothing sent) when the deployment has no key to sign with.
 */
export function startDiscordConnect(req: Request, res: Response, config: Pick<Config, 'webhookEncryptionKey' | 'discordOauthUrl' | 'publicBaseUrl' | 'production' | 'port'>,
  platformConfigId: string, clientId: string, origin: ConnectOrigin): boolean {
  const signer = signerOf(config.webhookEncryptionKey);
  if (!signer) return false;
  const pending: PendingConnect = { n: crypto.randomBytes(24).toString('base64url'), p: platformConfigId, o: origin, e: Date.now() + TTL_MS };
  const body = Buffer.from(JSON.stringify(pending)).toString('base64url');
  const redirectUri = discordRedirectUri(config, req);
  res.cookie(COOKIE, `${body}.${crypto.createHmac('sha256', signer).update(body).digest('base64url')}`, {
    httpOnly: true, sameSite: 'lax', path: COOKIE_PATH, maxAge: TTL_MS, secure: redirectUri.startsWith('https:'),
  });
  const to = new URL(config.discordOauthUrl);
  to.search = new URLSearchParams({
    response_type: 'code', client_id: clientId, scope: 'identify guilds.join', redirect_uri: redirectUri, state: pending.n, prompt: 'consent',
  }).toString();
  res.redirect(302, to.toString());
  return true;
}

/** The pending authorization of this browser whose nonce is the callback's state, or null; the cookie is cleared. */
export function finishDiscordConnect(req: Request, res: Response, key: string | null): PendingConnect | null {
  const signer = signerOf(key);
  const value = cookies(req)[COOKIE];
  res.clearCookie(COOKIE, { path: COOKIE_PATH });
  if (!value || !signer) return null;
  const [body, mac] = value.split('.');
  if (!body || !mac) return null;
  const expected = crypto.createHmac('sha256', signer).update(body).digest();
  const given = Buffer.from(mac, 'base64url');
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return null;
  let pending: PendingConnect;
  try {
    pending = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as PendingConnect;
  } catch {
    return null;
  }
  if (!(pending.e > Date.now())) return null;
  const state = Buffer.from(typeof req.query.state === 'string' ? req.query.state : '');
  const nonce = Buffer.from(pending.n);
  return state.length === nonce.length && crypto.timingSafeEqual(state, nonce) ? pending : null;
}
