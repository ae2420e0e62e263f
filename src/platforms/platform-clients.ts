// The calls a benefit delivery makes on Discord and Telegram (issue 29), through the
// platforms' kept clients: @discordjs/rest (it waits out Discord's 429s per route
// bucket and retries 5xx) and grammY's Api. Each call answers what happened in the
// terms a delivery needs: ok, gone (what a removal wanted is already true), retry
// (the platform or the network failed: try again later) or action_required (only a
// person can fix it: a permission, a role above the bot, a member not in the server).
// Messages never carry a token. Both libraries load with the first delivery, not when
// the service starts (@discordjs/rest alone takes about 280 ms to load:
// docs/decisions/restart-under-3-s.md).
import type { REST } from '@discordjs/rest';
import type { Api } from 'grammy';

let discordjs: typeof import('@discordjs/rest') | null = null;
let grammy: typeof import('grammy') | null = null;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const discordLib = () => (discordjs ??= require('@discordjs/rest') as typeof import('@discordjs/rest'));
// eslint-disable-next-line @typescript-eslint/no-require-imports
const grammyLib = () => (grammy ??= require('grammy') as typeof import('grammy'));

export type CallResult =
  | { outcome: 'ok' | 'gone' }
  | { outcome: 'retry' | 'action_required'; status: number | null; error: string };

/** VIEW_CHANNEL (1 << 10): what a channel benefit's member overwrite allows. */
export const VIEW_CHANNEL = 1024;

/** Discord's JSON error codes a delivery tells apart. */
const UNKNOWN = { guild: 10004, channel: 10003, member: 10007, role: 10011, user: 10013 } as const;

export interface PlatformClientOptions {
  /** DISCORD_API_URL, with its version (https://discord.com/api/v10). */
  discordApiUrl: string;
  /** TELEGRAM_API_URL (grammY's apiRoot). */
  telegramApiUrl: string;
  /** Per-request timeout, ms (default 15 s). */
  timeoutMs?: number;
  /** Retries of a 5xx or a network error within one call (default 2; the job retries later too). */
  retries?: number;
}

/** One client per bot token and process: @discordjs/rest keeps Discord's rate-limit buckets per instance. */
export class PlatformClients {
  private readonly discord = new Map<string, REST>();
  private readonly telegram = new Map<string, Api>();

  constructor(private readonly opts: PlatformClientOptions) {}

  discordRest(token: string): REST {
    let rest = this.discord.get(token);
    if (!rest) {
      rest = new (discordLib().REST)({
        ...this.discordBase(),
        retries: this.opts.retries ?? 2,
        timeout: this.opts.timeoutMs ?? 15_000,
      }).setToken(token);
      this.discord.set(token, rest);
    }
    return rest;
  }

  telegramApi(token: string): Api {
    let api = this.telegram.get(token);
    if (!api) {
      api = new (grammyLib().Api)(token, { apiRoot: this.opts.telegramApiUrl, timeoutSeconds: Math.ceil((this.opts.timeoutMs ?? 15_000) / 1000) });
      this.telegram.set(token, api);
    }
    return api;
  }

  /**
   * Discord's OAuth2 for "Connect Discord": exchanges an authorization code (client
   * credentials in HTTP Basic), reads the user it belongs to, and adds them to the guild
   * with the bot (scope guilds.join). Failures throw the client's errors (discordFailure
   * reads them).
   */
  async discordConnect(args: { clientId: string; clientSecret: string; code: string; redirectUri: string; botToken: string | null; guildId: string | null }):
    Promise<{ userId: string; username: string; joined: 'added' | 'already' | 'no bot' }> {
    const { Routes } = require('discord-api-types/v10') as typeof import('discord-api-types/v10'); // eslint-disable-line @typescript-eslint/no-require-imports
    const lib = discordLib();
    const base = this.discordBase();
    const anonymous = new lib.REST({ ...base, retries: this.opts.retries ?? 2, timeout: this.opts.timeoutMs ?? 15_000 });
    const grant = await anonymous.post(Routes.oauth2TokenExchange(), {
      auth: false, passThroughBody: true,
      body: new URLSearchParams({ grant_type: 'authorization_code', code: args.code, redirect_uri: args.redirectUri }).toString(),
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        Authorization: `Basic ${Buffer.from(`${args.clientId}:${args.clientSecret}`).toString('base64')}`,
      },
    }) as { access_token: string };
    const asUser = new lib.REST({ ...base, authPrefix: 'Bearer', retries: this.opts.retries ?? 2, timeout: this.opts.timeoutMs ?? 15_000 }).setToken(grant.access_token);
    const user = await asUser.get(Routes.user()) as { id: string; username: string };
    asUser.clearHashSweeper(); asUser.clearHandlerSweeper(); anonymous.clearHashSweeper(); anonymous.clearHandlerSweeper();
    if (!args.botToken || !args.guildId) return { userId: user.id, username: user.username, joined: 'no bot' };
    const added = await this.discordRest(args.botToken).put(Routes.guildMember(args.guildId, user.id), {
      body: { access_token: grant.access_token }, reason: 'Connect Discord: joined from the checkout',
    });
    // 201 with the member when added; 204, no body, when already in the guild.
    return { userId: user.id, username: user.username, joined: added && !(added instanceof ArrayBuffer) ? 'added' : 'already' };
  }

  private discordBase(): { api: string; version: string } {
    const versioned = /^(.*)\/v(\d+)$/.exec(this.opts.discordApiUrl);
    return { api: versioned ? versioned[1] : this.opts.discordApiUrl, version: versioned ? versioned[2] : '10' };
  }

  /** Drops the clients (their timers and queues). */
  close(): void {
    for (const rest of this.discord.values()) rest.clearHashSweeper(), rest.clearHandlerSweeper();
    this.discord.clear();
    this.telegram.clear();
  }
}

/** A Discord call's failure as a delivery reads it; `removing`: a 404 of the target means done. */
export function discordFailure(err: unknown, removing: boolean): CallResult {
  if (!(err instanceof discordLib().DiscordAPIError)) {
    const status = typeof (err as { status?: unknown })?.status === 'number' ? (err as { status: number }).status : null;
    return { outcome: 'retry', status, error: `Discord could not be reached or failed${status ? ` (HTTP ${status})` : ''}; retrying.` };
  }
  const { status, code } = err;
  if (status === 404 && removing && (code === UNKNOWN.member || code === UNKNOWN.role || code === UNKNOWN.user)) return { outcome: 'gone' };
  if (status === 404 && code === UNKNOWN.member) {
    return { outcome: 'action_required', status, error: 'The member is not in the Discord server: they need to join it (delivery is retried when they do, or from the dashboard).' };
  }
  if (status === 404 && code === UNKNOWN.role) return { outcome: 'action_required', status, error: 'The role does not exist in the Discord server: fix the benefit\'s value in the catalog.' };
  if (status === 404 && code === UNKNOWN.channel) return { outcome: 'action_required', status, error: 'The channel does not exist: fix the benefit\'s value in the catalog.' };
  if (status === 404 && code === UNKNOWN.guild) return { outcome: 'action_required', status, error: 'The bot is not in the Discord server (or guild_id is wrong): invite the bot.' };
  if (status === 403) {
    return { outcome: 'action_required', status, error: `Discord refused (${code} ${err.message}): the bot needs Manage Roles (Manage Channels for a channel benefit) and its highest role must be above the benefit's role.` };
  }
  if (status === 401) return { outcome: 'action_required', status, error: 'Discord rejected the bot token: set a valid one in the catalog.' };
  if (status === 429 || status >= 500) return { outcome: 'retry', status, error: `Discord answered HTTP ${status}; retrying.` };
  return { outcome: 'action_required', status, error: `Discord refused the request (${code} ${err.message}).` };
}

/** The error as grammY's GrammyError (Telegram answered ok: false), else null. grammY loads only if needed. */
export function grammyError(err: unknown): import('grammy').GrammyError | null {
  return grammy !== null && err instanceof grammy.GrammyError ? err : null;
}

/** A Telegram call's failure as a delivery reads it. */
export function telegramFailure(err: unknown, removing: boolean): CallResult {
  if (!(err instanceof grammyLib().GrammyError)) return { outcome: 'retry', status: null, error: 'Telegram could not be reached or failed; retrying.' };
  const status = err.error_code;
  if (status === 429 || status >= 500) return { outcome: 'retry', status, error: `Telegram answered ${status}; retrying.` };
  if (removing && status === 400 && /user not found|PARTICIPANT_ID_INVALID|USER_NOT_PARTICIPANT/i.test(err.description)) return { outcome: 'gone' };
  if (status === 403 && /blocked by the user|can't initiate conversation|bot can't initiate/i.test(err.description)) {
    return { outcome: 'action_required', status, error: 'The member has not started a chat with the bot (or blocked it): they need to open the bot and press Start.' };
  }
  if (status === 403) return { outcome: 'action_required', status, error: `Telegram refused (${err.description}): add the bot to the chat as an administrator allowed to invite and ban users.` };
  if (status === 401) return { outcome: 'action_required', status, error: 'Telegram rejected the bot token: set a valid one in the catalog.' };
  return { outcome: 'action_required', status, error: `Telegram refused the request (${err.description}).` };
}

/** Waits what Telegram asks (parameters.retry_after) once, when it is short; the job retries longer waits. */
export async function withTelegramFlood<T>(call: () => Promise<T>, maxWaitS = 10): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const wait = err instanceof grammyLib().GrammyError && err.error_code === 429 ? err.parameters.retry_after : undefined;
    if (wait === undefined || wait > maxWaitS) throw err;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    return call();
  }
}
