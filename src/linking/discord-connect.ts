// "Connect Discord" (issue 29 item 3): the buyer on a sandbox checkout page authorizes
// the community's Discord application (OAuth2 authorization code, scopes identify and
// guilds.join), so their Discord account is the member's before payment and the bot adds
// them to the server. Routes:
//   GET /platforms/discord/{pcfg_id}/connect?checkout={cs_id}&t={page token}
//       -> 302 to Discord's authorization page (DISCORD_OAUTH_URL)
//   GET /platforms/discord/oauth/callback?code&state
//       -> the code exchanged, the identity attached, the buyer added to the server,
//          303 back to the checkout page
// The state is a random nonce also kept in an httpOnly SameSite=Lax cookie, signed with
// a key derived from WEBHOOK_ENCRYPTION_KEY, beside the checkout it is for: a callback
// from another browser, or with another state, changes nothing. The checkout's page
// token never leaves for Discord. docs/decisions/discord-connect.md.
import crypto from 'node:crypto';
import express from 'express';
import type { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { baseUrlFor } from '../core/config';
import { inCommunity } from '../db/community-transaction';
import { PlatformSecretBox, PlatformTokens, platformSecretCiphertext, type PlatformReader } from '../domain/catalog/platform-secrets';
import { discordFailure, PlatformClients } from '../platforms/platform-clients';
import { cookies } from '../web/cookies';
import { requestLog } from '../web/observe';
import { inboundConnection } from './link-redemption';

export interface DiscordConnectDeps {
  config: Pick<Config, 'webhookEncryptionKey' | 'discordApiUrl' | 'discordOauthUrl' | 'discordBotToken' | 'telegramBotToken'
    | 'publicBaseUrl' | 'production' | 'port'>;
  apiPool: pg.Pool;
}

const COOKIE = 'discord_connect';
const CALLBACK = '/platforms/discord/oauth/callback';
/** How long the buyer has on Discord's page. */
const STATE_TTL_MS = 10 * 60_000;
const CHECKOUT_ID = /^cs_[0-9a-f]{26}$/;

interface Pending { n: string; p: string; c: string; t: string; e: number }

function page(title: string, text: string): string {
  const esc = (v: string) => v.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head><body><main><h1>${esc(title)}</h1><p>${esc(text)}</p></main></body></html>`;
}

export function mountDiscordConnect(app: express.Express, deps: DiscordConnectDeps): void {
  const router = express.Router();
  const key = deps.config.webhookEncryptionKey;
  const signer = key ? crypto.createHash('sha256').update(`discord-connect:${key}`).digest() : null;
  const clients = new PlatformClients({ discordApiUrl: deps.config.discordApiUrl, telegramApiUrl: '', timeoutMs: 10_000 });
  const tokens = new PlatformTokens(key, { discord: deps.config.discordBotToken, telegram: deps.config.telegramBotToken });
  let box: PlatformSecretBox | null = null;
  try {
    box = key ? new PlatformSecretBox(key) : null;
  } catch {
    box = null; // a malformed key: client secrets cannot be read (said when one is needed)
  }
  const redirectUri = (req: Request) => `${baseUrlFor(deps.config, { protocol: req.protocol, host: req.get('host') })}${CALLBACK}`;

  const seal = (p: Pending): string => {
    const body = Buffer.from(JSON.stringify(p)).toString('base64url');
    return `${body}.${crypto.createHmac('sha256', signer!).update(body).digest('base64url')}`;
  };
  const unseal = (value: string | undefined): Pending | null => {
    if (!value || !signer) return null;
    const [body, mac] = value.split('.');
    if (!body || !mac) return null;
    const expected = crypto.createHmac('sha256', signer).update(body).digest();
    const given = Buffer.from(mac, 'base64url');
    if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return null;
    try {
      const p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Pending;
      return p.e > Date.now() ? p : null;
    } catch {
      return null;
    }
  };
  const fail = (res: Response, status: number, text: string) => void res.status(status).type('html').send(page('Connect Discord', text));
  const backToCheckout = (p: Pending, outcome: string) => `/sandbox/checkout/${p.c}?t=${encodeURIComponent(p.t)}&discord=${outcome}`;

  router.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });

  router.get('/platforms/discord/:pcfgId/connect', async (req: Request, res: Response) => {
    const pcfgId = String(req.params.pcfgId);
    const checkoutId = String(req.query.checkout ?? '');
    const token = typeof req.query.t === 'string' && req.query.t.length <= 200 ? req.query.t : '';
    const connection = await inboundConnection(deps.apiPool, pcfgId, 'discord');
    if (!connection || !CHECKOUT_ID.test(checkoutId) || !token) return fail(res, 404, 'No such checkout or Discord connection.');
    if (!signer) return fail(res, 503, 'This deployment has no WEBHOOK_ENCRYPTION_KEY, so it cannot connect Discord accounts.');
    const hash = crypto.createHash('sha256').update(token, 'utf8').digest();
    const found = await inCommunity(deps.apiPool, connection.communityId, async (client) => {
      const { rows } = await client.query<{ client_id: string | null }>(
        `select pc.settings->>'client_id' as client_id from billing.platform_configs pc, billing.checkout_sessions cs
         where pc.id = $1 and cs.id = $2 and cs.access_token_sha256 = $3`, [pcfgId, checkoutId, hash]);
      return rows[0] ?? null;
    });
    if (!found) return fail(res, 404, 'No such checkout or Discord connection.');
    if (!found.client_id) return fail(res, 409, 'This Discord server has no OAuth2 application set up (settings.client_id in the catalog).');
    const pending: Pending = { n: crypto.randomBytes(24).toString('base64url'), p: pcfgId, c: checkoutId, t: token, e: Date.now() + STATE_TTL_MS };
    res.cookie(COOKIE, seal(pending), {
      httpOnly: true, sameSite: 'lax', path: '/platforms/discord/oauth', maxAge: STATE_TTL_MS,
      secure: redirectUri(req).startsWith('https:'),
    });
    const to = new URL(deps.config.discordOauthUrl);
    to.search = new URLSearchParams({
      response_type: 'code', client_id: found.client_id, scope: 'identify guilds.join',
      redirect_uri: redirectUri(req), state: pending.n, prompt: 'consent',
    }).toString();
    res.redirect(302, to.toString());
  });

  router.get(CALLBACK, async (req: Request, res: Response) => {
    const pending = unseal(cookies(req)[COOKIE]);
    const state = typeof req.query.state === 'string' ? Buffer.from(req.query.state) : Buffer.alloc(0);
    const nonce = pending ? Buffer.from(pending.n) : Buffer.alloc(1);
    if (!pending || state.length !== nonce.length || !crypto.timingSafeEqual(state, nonce)) {
      return fail(res, 400, 'This Discord authorization does not belong to this browser, or took too long: start again from the checkout page.');
    }
    res.clearCookie(COOKIE, { path: '/platforms/discord/oauth' });
    const code = typeof req.query.code === 'string' && /^[A-Za-z0-9_-]{1,100}$/.test(req.query.code) ? req.query.code : null;
    // The buyer declined on Discord's page (error=access_denied): back, nothing changed.
    if (!code) return void res.redirect(303, backToCheckout(pending, 'declined'));
    const connection = await inboundConnection(deps.apiPool, pending.p, 'discord');
    if (!connection) return fail(res, 404, 'This Discord connection no longer exists.');
    const log = requestLog(req);
    try {
      const setup = await inCommunity(deps.apiPool, connection.communityId, async (client) => {
        const ctx: PlatformReader = { communityId: connection.communityId, query: (text, values) => client.query(text, values) };
        const { rows } = await client.query<{ client_id: string | null; guild_id: string | null }>(
          `select settings->>'client_id' as client_id, settings->>'guild_id' as guild_id from billing.platform_configs where id = $1`, [pending.p]);
        const secret = await platformSecretCiphertext(ctx, pending.p, 'client_secret');
        return { ...rows[0], secret, botToken: await tokens.botToken(ctx, pending.p, 'discord') };
      });
      if (!setup.client_id || !setup.secret || !box) return fail(res, 409, 'This Discord server\'s OAuth2 application is not fully set up (client_id and client_secret in the catalog).');
      const clientSecret = box.decrypt(connection.communityId, pending.p, 'client_secret', setup.secret);
      const user = await clients.discordConnect({
        clientId: setup.client_id, clientSecret, code, redirectUri: redirectUri(req), botToken: setup.botToken, guildId: setup.guild_id,
      });
      const hash = crypto.createHash('sha256').update(pending.t, 'utf8').digest();
      const outcome = await inCommunity(deps.apiPool, connection.communityId, async (client) => {
        const { rows } = await client.query<{ r: { outcome: string } }>(
          'select billing.platform_checkout_connect($1, $2, $3, $4, $5) as r', [pending.p, pending.c, hash, user.userId, user.username.slice(0, 200)]);
        return rows[0].r.outcome;
      });
      log.info({ platform_config_id: pending.p, outcome, joined: user.joined }, 'discord account connected from a checkout');
      res.redirect(303, backToCheckout(pending, outcome === 'linked' ? 'connected' : outcome));
    } catch (err) {
      const r = discordFailure(err, false);
      log.warn({ platform_config_id: pending.p, status: 'status' in r ? r.status : null }, 'connect discord failed');
      fail(res, 502, 'Discord did not complete the connection; try again from the checkout page.');
    }
  });

  app.use(router);
}
