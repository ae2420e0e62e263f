// "Connect Discord" (issue 29 item 3): the buyer on a sandbox checkout page authorizes
// the community's Discord application (OAuth2 authorization code, scopes identify and
// guilds.join), so their Discord account is the member's before payment and the bot adds
// them to the server. Routes:
//   GET /platforms/discord/{pcfg_id}/connect?checkout={cs_id}&t={page token}
//       -> 302 to Discord's authorization page (DISCORD_OAUTH_URL)
//   GET /platforms/discord/oauth/callback?code&state
//       -> the code exchanged, the identity attached, the buyer added to the server,
//          303 back to the checkout page (or the member portal, which starts its own:
//          src/dashboard/portal-routes.ts)
// The state (src/web/discord-connect-state.ts) is a nonce kept in a signed cookie beside
// where the buyer came from: a callback from another browser, or with another state,
// changes nothing. The checkout's page token never leaves for Discord.
// docs/decisions/discord-connect.md.
import crypto from 'node:crypto';
import express from 'express';
import type { Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../core/config';
import { inCommunity } from '../db/community-transaction';
import { PlatformSecretBox, PlatformTokens, platformSecretCiphertext, type PlatformReader } from '../domain/catalog/platform-secrets';
import { discordFailure, PlatformClients } from '../platforms/platform-clients';
import { DISCORD_CALLBACK, discordRedirectUri, finishDiscordConnect, startDiscordConnect, type PendingConnect } from '../web/discord-connect-state';
import { esc } from '../web/html';
import { requestLog } from '../web/observe';
import { inboundConnection, usernameText } from './link-redemption';

export interface DiscordConnectDeps {
  config: Pick<Config, 'webhookEncryptionKey' | 'discordApiUrl' | 'discordOauthUrl' | 'discordBotToken' | 'telegramBotToken'
    | 'publicBaseUrl' | 'production' | 'port'>;
  apiPool: pg.Pool;
}

const CHECKOUT_ID = /^cs_[0-9a-f]{26}$/;

function page(title: string, text: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head><body><main><h1>${esc(title)}</h1><p>${esc(text)}</p></main></body></html>`;
}

/** Where the buyer goes back to, saying what happened. */
function back(p: PendingConnect, outcome: string): string {
  return p.o.kind === 'checkout'
    ? `/sandbox/checkout/${p.o.checkoutId}?t=${encodeURIComponent(p.o.token)}&discord=${outcome}`
    : `/sandbox/portal/${p.o.portalSessionId}/account?discord=${outcome}`;
}

export function mountDiscordConnect(app: express.Express, deps: DiscordConnectDeps): void {
  const router = express.Router();
  const key = deps.config.webhookEncryptionKey;
  const clients = new PlatformClients({ discordApiUrl: deps.config.discordApiUrl, telegramApiUrl: '', timeoutMs: 10_000 });
  const tokens = new PlatformTokens(key, { discord: deps.config.discordBotToken, telegram: deps.config.telegramBotToken });
  let box: PlatformSecretBox | null = null;
  try {
    box = key ? new PlatformSecretBox(key) : null;
  } catch {
    box = null; // a malformed key: client secrets cannot be read (said when one is needed)
  }
  const fail = (res: Response, status: number, text: string) => void res.status(status).type('html').send(page('Connect Discord', text));

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
    const hash = crypto.createHash('sha256').update(token, 'utf8').digest();
    const found = await inCommunity(deps.apiPool, connection.communityId, async (client) => {
      const { rows } = await client.query<{ client_id: string | null }>(
        `select pc.settings->>'client_id' as client_id from billing.platform_configs pc, billing.checkout_sessions cs
         where pc.id = $1 and cs.id = $2 and cs.access_token_sha256 = $3`, [pcfgId, checkoutId, hash]);
      return rows[0] ?? null;
    });
    if (!found) return fail(res, 404, 'No such checkout or Discord connection.');
    if (!found.client_id) return fail(res, 409, 'This Discord server has no OAuth2 application set up (settings.client_id in the catalog).');
    if (!startDiscordConnect(req, res, deps.config, pcfgId, found.client_id, { kind: 'checkout', checkoutId, token })) {
      fail(res, 503, 'This deployment has no WEBHOOK_ENCRYPTION_KEY, so it cannot connect Discord accounts.');
    }
  });

  router.get(DISCORD_CALLBACK, async (req: Request, res: Response) => {
    const pending = finishDiscordConnect(req, res, key);
    if (!pending) return fail(res, 400, 'This Discord authorization does not belong to this browser, or took too long: start again where you came from.');
    const code = typeof req.query.code === 'string' && /^[A-Za-z0-9_-]{1,100}$/.test(req.query.code) ? req.query.code : null;
    // The buyer declined on Discord's page (error=access_denied): back, nothing changed.
    if (!code) return void res.redirect(303, back(pending, 'declined'));
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
        clientId: setup.client_id, clientSecret, code, redirectUri: discordRedirectUri(deps.config, req), botToken: setup.botToken, guildId: setup.guild_id,
      });
      // As a bot's link does: a printable, bounded username, else none.
      const username = usernameText(user.username);
      const outcome = await inCommunity(deps.apiPool, connection.communityId, async (client) => {
        const { rows } = pending.o.kind === 'checkout'
          ? await client.query<{ r: { outcome: string } }>('select billing.platform_checkout_connect($1, $2, $3, $4, $5) as r',
            [pending.p, pending.o.checkoutId, crypto.createHash('sha256').update(pending.o.token, 'utf8').digest(), user.userId, username])
          : await client.query<{ r: { outcome: string } }>('select billing.platform_member_connect($1, $2, $3, $4) as r',
            [pending.p, pending.o.memberId, user.userId, username]);
        return rows[0].r.outcome;
      });
      log.info({ platform_config_id: pending.p, origin: pending.o.kind, outcome, joined: user.joined }, 'discord account connected');
      res.redirect(303, back(pending, outcome === 'linked' ? 'connected' : outcome));
    } catch (err) {
      const r = discordFailure(err, false);
      log.warn({ platform_config_id: pending.p, status: 'status' in r ? r.status : null }, 'connect discord failed');
      fail(res, 502, 'Discord did not complete the connection; try again where you came from.');
    }
  });

  app.use(router);
}
