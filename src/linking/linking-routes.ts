// Members link their own identities through the community's bots (issue 29 item 3):
//   POST /platforms/discord/{pcfg_id}/interactions   Discord's Interactions Endpoint URL
//   POST /platforms/telegram/{pcfg_id}/updates       the Telegram bot's webhook
// No API key: Discord's Ed25519 signature, or the secret Telegram echoes from setWebhook,
// authenticates the request, and it acts for the community owning the connection.
// docs/platforms.md ("Linking identities"), docs/decisions/platform-linking.md.
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { isUtf8 } from 'node:buffer';
import crypto from 'node:crypto';
import type pg from 'pg';
import type { Api } from 'grammy';
import type { Config } from '../core/config';
import { ApiError, resolveProblemType, toApiError } from '../core/errors';
import { PlatformTokens } from '../domain/catalog/platform-secrets';
import { telegramWebhookSecret } from '../domain/catalog/telegram-webhook-secret';
import { baseUrlOf } from '../web/express-io';
import { jsonNestsDeeperThan } from '../web/json-body';
import { requestLog } from '../web/observe';
import { discordSignatureValid } from './discord-signature';
import {
  codeText, inboundConnection, linkMessage, redeemForPlatformUser, usernameText,
  type LinkRequest, type OnIdentityLinked,
} from './link-redemption';

export interface LinkingDeps {
  config: Pick<Config, 'webhookEncryptionKey' | 'telegramApiUrl' | 'discordBotToken' | 'telegramBotToken'>;
  /** The API's pool (billing_api): tenant policies apply. */
  apiPool: pg.Pool;
  /** See OnIdentityLinked: where delivery at link time plugs in. */
  onIdentityLinked?: OnIdentityLinked;
}

/** Discord's interaction types and callback types used here. */
const PING = 1;
const APPLICATION_COMMAND = 2;
const PONG = 1;
const CHANNEL_MESSAGE_WITH_SOURCE = 4;
const EPHEMERAL = 64;
const STRING_OPTION = 3;

const BODY_LIMIT = '100kb';

function sendProblem(res: Response, err: ApiError): void {
  res.status(err.status).type('application/problem+json').send(JSON.stringify(resolveProblemType(err.toProblem(), baseUrlOf(res))));
}

const notFound = () => new ApiError('not_found', 'No platform connection of this platform with this id.');
const unauthorized = (what: string) => new ApiError('unauthorized', `${what} is missing or does not verify.`);

/** The raw body as JSON, or a 400: not UTF-8, nested too deep or not JSON. */
function parseBody(raw: Buffer): unknown {
  if (!isUtf8(raw)) throw new ApiError('invalid_request', 'The request body is not valid UTF-8.', { status: 400 });
  if (jsonNestsDeeperThan(raw)) throw new ApiError('invalid_request', 'The request body nests too deeply.', { status: 400 });
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('invalid_request', 'The request body is not valid JSON.', { status: 400 });
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const rawBody = (req: Request): Buffer => (Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));

let grammy: typeof import('grammy') | null = null;
/** grammY loads when a bot first replies (the service's start stays light). */
function telegramApi(token: string, apiRoot: string): Api {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  grammy ??= require('grammy') as typeof import('grammy');
  return new grammy.Api(token, { apiRoot, timeoutSeconds: 10 });
}

export function mountPlatformLinking(app: express.Express, deps: LinkingDeps): void {
  const router = express.Router();
  const tokens = new PlatformTokens(deps.config.webhookEncryptionKey,
    { discord: deps.config.discordBotToken, telegram: deps.config.telegramBotToken });
  const raw = express.raw({ type: () => true, limit: BODY_LIMIT });

  const linked = async (req: Request, link: LinkRequest, result: { outcome: string; memberId: string | null; newIdentity: boolean }) => {
    if (result.outcome !== 'linked' || !result.newIdentity || !result.memberId || !deps.onIdentityLinked) return;
    try {
      await deps.onIdentityLinked({ communityId: link.communityId, memberId: result.memberId, platform: link.platform, platformConfigId: link.platformConfigId });
    } catch (err) {
      requestLog(req).warn({ err, platform_config_id: link.platformConfigId }, 'delivery after linking failed');
    }
  };

  router.post('/platforms/discord/:pcfgId/interactions', raw, async (req: Request, res: Response) => {
    const pcfgId = String(req.params.pcfgId);
    const connection = await inboundConnection(deps.apiPool, pcfgId, 'discord');
    if (!connection) return sendProblem(res, notFound());
    const body = rawBody(req);
    // Discord: "If the signature fails validation, respond with a 401 error code."
    if (!discordSignatureValid(connection.publicKey, req.header('x-signature-ed25519'), req.header('x-signature-timestamp'), body)) {
      return sendProblem(res, unauthorized('The Discord signature (X-Signature-Ed25519, X-Signature-Timestamp)'));
    }
    const interaction = parseBody(body);
    if (!isObject(interaction)) throw new ApiError('invalid_request', 'The interaction is not a JSON object.', { status: 400 });
    if (interaction.type === PING) return void res.status(200).json({ type: PONG });
    const reply = (content: string) => res.status(200).json({
      type: CHANNEL_MESSAGE_WITH_SOURCE, data: { content, flags: EPHEMERAL, allowed_mentions: { parse: [] } },
    });
    if (interaction.type !== APPLICATION_COMMAND) return void reply('This app only answers the /link command.');
    const data = isObject(interaction.data) ? interaction.data : {};
    if (data.name !== 'link') return void reply('This app only answers the /link command.');
    // In a guild the caller is member.user; in a DM, user.
    const member = isObject(interaction.member) ? interaction.member : null;
    const user = member && isObject(member.user) ? member.user : isObject(interaction.user) ? interaction.user : null;
    const uid = user && typeof user.id === 'string' && /^[0-9]{1,20}$/.test(user.id) ? user.id : null;
    if (!uid) throw new ApiError('invalid_request', 'The interaction names no invoking user.', { status: 400 });
    const options = Array.isArray(data.options) ? data.options : [];
    const option = options.find((o): o is Record<string, unknown> => isObject(o) && o.name === 'code' && o.type === STRING_OPTION);
    const link: LinkRequest = {
      communityId: connection.communityId, platformConfigId: pcfgId, platform: 'discord', platformUid: uid,
      code: codeText(option?.value), username: usernameText(user?.username),
    };
    const { result } = await redeemForPlatformUser(deps.apiPool, link, async () => null);
    requestLog(req).info({ platform_config_id: pcfgId, outcome: result.outcome }, 'link code redeemed by a platform user');
    reply(linkMessage(result.outcome, 'discord'));
    await linked(req, link, result);
  });

  router.post('/platforms/telegram/:pcfgId/updates', raw, async (req: Request, res: Response) => {
    const pcfgId = String(req.params.pcfgId);
    const connection = await inboundConnection(deps.apiPool, pcfgId, 'telegram');
    if (!connection) return sendProblem(res, notFound());
    const key = deps.config.webhookEncryptionKey;
    if (!key) throw new ApiError('service_unavailable', 'This deployment has no WEBHOOK_ENCRYPTION_KEY, so it cannot check Telegram updates.');
    const expected = Buffer.from(telegramWebhookSecret(key, connection.communityId, pcfgId));
    const given = Buffer.from(req.header('x-telegram-bot-api-secret-token') ?? '');
    if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
      return sendProblem(res, unauthorized('The secret token (X-Telegram-Bot-Api-Secret-Token)'));
    }
    const update = parseBody(rawBody(req));
    // From here on, 200 for anything: Telegram retries an update until it is taken.
    const start = startCommand(update);
    if (!start) return void res.status(200).end();
    const link: LinkRequest = {
      communityId: connection.communityId, platformConfigId: pcfgId, platform: 'telegram', platformUid: start.userId,
      code: codeText(start.payload), username: usernameText(start.username),
    };
    const { result, extra: token } = await redeemForPlatformUser(deps.apiPool, link, async (db) => {
      try {
        return await tokens.botToken(db, pcfgId, 'telegram');
      } catch (err) {
        requestLog(req).warn({ err, platform_config_id: pcfgId }, 'the bot token cannot be read: no reply sent');
        return null;
      }
    });
    requestLog(req).info({ platform_config_id: pcfgId, outcome: start.payload === null ? 'no_code' : result.outcome }, 'link code redeemed by a platform user');
    if (token) {
      const text = start.payload === null ? 'To link your membership, open the link you were given, or send /start followed by your link code.'
        : linkMessage(result.outcome, 'telegram');
      try {
        await telegramApi(token, deps.config.telegramApiUrl).sendMessage(start.chatId, text);
      } catch (err) {
        requestLog(req).warn({ err: { name: (err as Error).name }, platform_config_id: pcfgId }, 'the bot\'s reply was not sent');
      }
    }
    res.status(200).end();
    await linked(req, link, result);
  });

  router.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string };
    if (e?.type === 'entity.too.large') return sendProblem(res, new ApiError('payload_too_large', `The request body is larger than ${BODY_LIMIT}.`));
    if (!(err instanceof ApiError) && typeof (err as { status?: unknown })?.status === 'number') {
      return sendProblem(res, new ApiError('invalid_request', 'The request could not be read.', { status: 400 }));
    }
    const apiError = toApiError(err);
    if (apiError.code === 'internal_error') requestLog(req).error({ err, route: req.route?.path }, 'unexpected error');
    if (apiError.retryAfter !== undefined) res.setHeader('Retry-After', String(apiError.retryAfter));
    sendProblem(res, apiError);
  });
  app.use(router);
}

/** A private `/start <payload>` (a Telegram deep link) from a user, or null for any other update. */
function startCommand(update: unknown): { userId: string; chatId: number; username: string | null; payload: string | null } | null {
  if (!isObject(update) || !isObject(update.message)) return null;
  const message = update.message;
  const from = isObject(message.from) ? message.from : null;
  const chat = isObject(message.chat) ? message.chat : null;
  if (!from || !chat || from.is_bot === true || chat.type !== 'private') return null;
  if (!Number.isSafeInteger(from.id) || (from.id as number) <= 0 || !Number.isSafeInteger(chat.id)) return null;
  if (typeof message.text !== 'string') return null;
  const m = /^\/start(?:@[A-Za-z0-9_]{1,64})?(?:\s+(\S+))?\s*$/.exec(message.text);
  if (!m) return null;
  return { userId: String(from.id), chatId: chat.id as number, username: typeof from.username === 'string' ? from.username : null, payload: m[1] ?? null };
}

