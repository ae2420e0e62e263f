// A local stand-in for the Telegram Bot API (issue 29, item 4) for tests that run the real
// client (grammY, `client.apiRoot`) with no network. It serves `/bot<token>/<method>` for
// the methods the service uses, keeps chats, their members and invite links in memory, and
// answers `{ok: true, result}` or `{ok: false, error_code, description, parameters?}` with the
// HTTP status equal to error_code, as the Bot API does.
//
// Telegram publishes no OpenAPI. The handlers are typed against grammY's declarations of the
// Bot API (`grammy/types`, i.e. @grammyjs/types): a handler that takes a parameter the method
// does not have, or answers a result of the wrong shape, does not compile. At run time each
// call's parameters are checked by a JSON Schema per method (required ones present, types and
// documented ranges, nothing unknown); anything else is recorded in `violations`, answered
// 400 Bad Request, and fails `assertClean()`.
// docs/decisions/platform-stand-ins.md says what is checked and what is not.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import type { ApiMethods, ChatInviteLink, ChatMember, Message, Update, User, UserFromGetMe, WebhookInfo } from 'grammy/types';

type Implemented = 'getMe' | 'setWebhook' | 'deleteWebhook' | 'getWebhookInfo' | 'sendMessage' | 'createChatInviteLink'
  | 'banChatMember' | 'unbanChatMember' | 'getChatMember';
type Params<K extends Implemented> = NonNullable<Parameters<ApiMethods[K]>[0]>;
type Result<K extends Implemented> = ReturnType<ApiMethods[K]>;

export interface TelegramError { ok: false; error_code: number; description: string; parameters?: { retry_after?: number; migrate_to_chat_id?: number } }
type Outcome<T> = { ok: true; result: T } | TelegramError;

const fail = (error_code: number, description: string, parameters?: TelegramError['parameters']): TelegramError =>
  ({ ok: false, error_code, description, ...(parameters ? { parameters } : {}) });

/** Descriptions the Bot API answers for the cases the stand-in simulates. */
export const TelegramErrors = {
  chatNotFound: () => fail(400, 'Bad Request: chat not found'),
  userNotFound: () => fail(400, 'Bad Request: user not found'),
  botNotMember: (type: string) => fail(403, `Forbidden: bot is not a member of the ${type === 'channel' ? 'channel' : 'supergroup'} chat`),
  botCantInitiate: () => fail(403, "Forbidden: bot can't initiate conversation with a user"),
  botBlocked: () => fail(403, 'Forbidden: bot was blocked by the user'),
  notEnoughRightsInvite: () => fail(400, 'Bad Request: not enough rights to manage chat invite link'),
  notEnoughRightsRestrict: () => fail(400, 'Bad Request: not enough rights to restrict/unrestrict chat member'),
  cantRemoveOwner: () => fail(400, "Bad Request: can't remove chat owner"),
  userIsAdministrator: () => fail(400, 'Bad Request: user is an administrator of the chat'),
  tooManyRequests: (retryAfter: number) => fail(429, `Too Many Requests: retry after ${retryAfter}`, { retry_after: retryAfter }),
  unauthorized: () => fail(401, 'Unauthorized'),
  notFound: () => fail(404, 'Not Found'),
};

// Run-time parameter schemas. `properties` is typed against the method's parameters, so a
// key the Bot API does not have fails to compile; a parameter the stand-in does not list is
// refused at run time (additionalProperties: false).
type Props<K extends Implemented> = Partial<Record<keyof Params<K> & string, object>>;
const chatId = { anyOf: [{ type: 'integer' }, { type: 'string', pattern: '^(@[A-Za-z][A-Za-z0-9_]{3,31}|-?[0-9]+)$' }] };
const userId = { type: 'integer', minimum: 1 };
const unixTime = { type: 'integer', minimum: 0 };
const schema = <K extends Implemented>(required: (keyof Params<K> & string)[], properties: Props<K>) =>
  ({ type: 'object', required, properties, additionalProperties: false });
const schemas: { [K in Implemented]: object } = {
  getMe: schema<'setWebhook'>([], {}),
  setWebhook: schema<'setWebhook'>(['url'], {
    url: { type: 'string' },
    ip_address: { type: 'string' },
    max_connections: { type: 'integer', minimum: 1, maximum: 100 },
    allowed_updates: { type: 'array', items: { type: 'string' } },
    drop_pending_updates: { type: 'boolean' },
    secret_token: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,256}$' },
  }),
  deleteWebhook: schema<'deleteWebhook'>([], { drop_pending_updates: { type: 'boolean' } }),
  getWebhookInfo: schema<'setWebhook'>([], {}),
  sendMessage: schema<'sendMessage'>(['chat_id', 'text'], {
    chat_id: chatId,
    message_thread_id: { type: 'integer' },
    text: { type: 'string', minLength: 1, maxLength: 4096 },
    parse_mode: { enum: ['HTML', 'Markdown', 'MarkdownV2'] },
    entities: { type: 'array', items: { type: 'object', required: ['type', 'offset', 'length'] } },
    link_preview_options: { type: 'object', properties: { is_disabled: { type: 'boolean' }, url: { type: 'string' } } },
    disable_notification: { type: 'boolean' },
    protect_content: { type: 'boolean' },
    reply_markup: { type: 'object' },
  }),
  createChatInviteLink: schema<'createChatInviteLink'>(['chat_id'], {
    chat_id: chatId,
    name: { type: 'string', maxLength: 32 },
    expire_date: unixTime,
    member_limit: { type: 'integer', minimum: 1, maximum: 99999 },
    creates_join_request: { type: 'boolean' },
  }),
  banChatMember: schema<'banChatMember'>(['chat_id', 'user_id'], { chat_id: chatId, user_id: userId, until_date: unixTime, revoke_messages: { type: 'boolean' } }),
  unbanChatMember: schema<'unbanChatMember'>(['chat_id', 'user_id'], { chat_id: chatId, user_id: userId, only_if_banned: { type: 'boolean' } }),
  getChatMember: schema<'getChatMember'>(['chat_id', 'user_id'], { chat_id: chatId, user_id: userId }),
};

let compiled: { json: Map<string, ValidateFunction>; coerced: Map<string, ValidateFunction> } | null = null;
function validators() {
  if (compiled) return compiled;
  const strict = new Ajv2020({ strict: false, allErrors: true });
  // Parameters sent as a query string or a form are text; the Bot API reads numbers and booleans from them.
  const coercing = new Ajv2020({ strict: false, allErrors: true, coerceTypes: true });
  compiled = { json: new Map(), coerced: new Map() };
  for (const [method, s] of Object.entries(schemas)) {
    compiled.json.set(method.toLowerCase(), strict.compile(s));
    compiled.coerced.set(method.toLowerCase(), coercing.compile(s));
  }
  return compiled;
}

export type TelegramMemberStatus = 'creator' | 'administrator' | 'member' | 'left' | 'kicked';

export interface TelegramChat {
  id: number;
  type: 'supergroup' | 'channel';
  title: string;
  /** The bot's place in the chat: not a member (403 on every call), member, or administrator. */
  botStatus: 'left' | 'member' | 'administrator';
  /** User id -> status (users absent are 'left'). */
  members: Map<number, TelegramMemberStatus>;
  links: Map<string, TelegramInvite>;
}

export interface TelegramInvite { link: ChatInviteLink; chatId: number; joined: number[] }

export interface TelegramUser extends User {
  /** The user has opened a private chat with the bot (otherwise sendMessage is 403). */
  startedBot: boolean;
  blockedBot: boolean;
}

export interface TelegramRequest {
  method: string;
  params: Record<string, unknown>;
  token: string;
  status: number;
  /** performance.now() when the request arrived. */
  at: number;
}

export interface TelegramViolation { method: string; problems: string[] }

export type TelegramFaultKind = 'flood' | 'server-error' | 'bot-not-member' | 'user-not-found';

export interface TelegramFault {
  kind: TelegramFaultKind;
  /** A Bot API method name (sendMessage); every method when absent. */
  method?: string;
  /** How many matching calls it answers (default 1; Infinity for all). */
  times?: number;
  /** flood: parameters.retry_after in seconds (the Bot API sends whole seconds; default 1). */
  retryAfter?: number;
  /** server-error: the status (500 answers JSON; 502 and 504 answer an HTML page, as the front proxy does). */
  status?: number;
}

export interface SentMessage { chatId: number | string; text: string; params: Params<'sendMessage'>; message: Message.TextMessage }

export interface TelegramServer {
  /** grammY's `client.apiRoot` (and TELEGRAM_API_URL): http://127.0.0.1:PORT */
  apiRoot: string;
  token: string;
  bot: UserFromGetMe;
  chats: Map<number, TelegramChat>;
  users: Map<number, TelegramUser>;
  sent: SentMessage[];
  webhook: { url: string; secretToken: string | null; allowedUpdates: string[] | null } | null;
  requests: TelegramRequest[];
  violations: TelegramViolation[];
  addChat(opts?: { id?: number; title?: string; type?: 'supergroup' | 'channel'; botStatus?: TelegramChat['botStatus'] }): TelegramChat;
  addUser(opts?: { id?: number; first_name?: string; username?: string; startedBot?: boolean; blockedBot?: boolean }): TelegramUser;
  setStatus(chatId: number, userId: number, status: TelegramMemberStatus): void;
  /** The user's status in the chat ('left' when never there). */
  status(chatId: number, userId: number): TelegramMemberStatus;
  /** A user follows an invite link, as the Telegram app does; says why not when refused. */
  join(inviteLink: string, userId: number): { joined: true } | { joined: false; reason: 'unknown link' | 'revoked' | 'expired' | 'limit reached' | 'banned' };
  fault(fault: TelegramFault): void;
  requestsTo(method: string): TelegramRequest[];
  /** Posts an update to the webhook set with setWebhook (with X-Telegram-Bot-Api-Secret-Token). */
  deliverUpdate(update: Omit<Update, 'update_id'>): Promise<Response>;
  /** A private text message from a user to the bot (a /command gets its bot_command entity). */
  textUpdate(from: User, text: string): Omit<Update, 'update_id'>;
  takeViolations(): TelegramViolation[];
  assertClean(): void;
  close(): Promise<void>;
}

export async function startTelegramServer(opts: { token?: string; acceptHttpWebhook?: boolean } = {}): Promise<TelegramServer> {
  const botId = 7_000_000_000 + crypto.randomInt(1_000_000);
  const token = opts.token ?? `${botId}:AA${crypto.randomBytes(24).toString('base64url').slice(0, 33)}`;
  const bot: UserFromGetMe = {
    id: botId, is_bot: true, first_name: 'Community Billing', username: 'community_billing_bot',
    can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false,
    can_connect_to_business: false, has_main_web_app: false, has_topics_enabled: false,
    allows_users_to_create_topics: false, can_manage_bots: false, supports_join_request_queries: false,
  };
  const chats = new Map<number, TelegramChat>();
  const users = new Map<number, TelegramUser>();
  const sent: SentMessage[] = [];
  const requests: TelegramRequest[] = [];
  let violations: TelegramViolation[] = [];
  const faults: (TelegramFault & { left: number })[] = [];
  let webhook: TelegramServer['webhook'] = null;
  let messageId = 0;
  let updateId = 100_000;
  let nextId = 1_000_000 + crypto.randomInt(1_000_000);
  const now = () => Math.floor(Date.now() / 1000);

  const userOf = (id: number): User => {
    const u = users.get(id)!;
    return { id: u.id, is_bot: u.is_bot, first_name: u.first_name, ...(u.username ? { username: u.username } : {}) };
  };
  const statusOf = (chat: TelegramChat, userId: number): TelegramMemberStatus => chat.members.get(userId) ?? 'left';
  const memberJson = (chat: TelegramChat, userId: number): ChatMember => {
    const user = userOf(userId);
    switch (statusOf(chat, userId)) {
      case 'creator': return { status: 'creator', user, is_anonymous: false };
      case 'administrator': return {
        status: 'administrator', user, can_be_edited: false, is_anonymous: false, can_manage_chat: true, can_delete_messages: true,
        can_manage_video_chats: true, can_restrict_members: true, can_promote_members: false, can_change_info: false,
        can_invite_users: true, can_post_stories: false, can_edit_stories: false, can_delete_stories: false, can_send_welcome_messages: false,
      };
      case 'member': return { status: 'member', user };
      case 'kicked': return { status: 'kicked', user, until_date: 0 };
      case 'left': return { status: 'left', user };
    }
  };
  // The chat a call names, and whether the bot may act in it.
  const chatFor = (chat_id: number | string): TelegramChat | TelegramError => {
    const chat = typeof chat_id === 'number' || /^-?\d+$/.test(chat_id) ? chats.get(Number(chat_id)) : undefined;
    if (!chat) return TelegramErrors.chatNotFound();
    if (chat.botStatus === 'left') return TelegramErrors.botNotMember(chat.type);
    return chat;
  };
  const isError = (x: unknown): x is TelegramError => typeof x === 'object' && x !== null && (x as TelegramError).ok === false;

  const handlers: { [K in Implemented]: (p: Params<K>) => Outcome<Result<K>> } = {
    getMe: () => ({ ok: true, result: bot }),
    setWebhook: (p) => {
      const url = new URL(p.url);
      if (!opts.acceptHttpWebhook) {
        if (url.protocol !== 'https:') return fail(400, 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook');
        if (!['', '443', '80', '88', '8443'].includes(url.port)) return fail(400, 'Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443');
      }
      webhook = { url: p.url, secretToken: p.secret_token ?? null, allowedUpdates: p.allowed_updates ? [...p.allowed_updates] : webhook?.allowedUpdates ?? null };
      return { ok: true, result: true };
    },
    deleteWebhook: () => { webhook = null; return { ok: true, result: true }; },
    getWebhookInfo: () => {
      const info: WebhookInfo = { url: webhook?.url ?? '', has_custom_certificate: false, pending_update_count: 0, ...(webhook?.allowedUpdates ? { allowed_updates: webhook.allowedUpdates as WebhookInfo['allowed_updates'] } : {}) };
      return { ok: true, result: info };
    },
    sendMessage: (p) => {
      // The service writes to members in private: chat_id is the user's id.
      const user = users.get(Number(p.chat_id));
      if (!user) return chats.has(Number(p.chat_id)) ? fail(400, 'Bad Request: the stand-in sends to private chats only') : TelegramErrors.chatNotFound();
      if (!user.startedBot) return TelegramErrors.botCantInitiate();
      if (user.blockedBot) return TelegramErrors.botBlocked();
      const message: Message.TextMessage = {
        message_id: ++messageId, date: now(), text: p.text, from: bot,
        chat: { id: user.id, type: 'private', first_name: user.first_name, ...(user.username ? { username: user.username } : {}) },
        ...(p.entities ? { entities: p.entities } : {}),
      };
      sent.push({ chatId: p.chat_id, text: p.text, params: p, message });
      return { ok: true, result: message };
    },
    createChatInviteLink: (p) => {
      const chat = chatFor(p.chat_id);
      if (isError(chat)) return chat;
      if (chat.botStatus !== 'administrator') return TelegramErrors.notEnoughRightsInvite();
      if (p.creates_join_request && p.member_limit !== undefined) return fail(400, "Bad Request: member limit can't be specified for links requiring administrator approval");
      const link: ChatInviteLink = {
        invite_link: `https://t.me/+${crypto.randomBytes(12).toString('base64url')}`, creator: bot,
        creates_join_request: p.creates_join_request ?? false, is_primary: false, is_revoked: false,
        ...(p.name !== undefined ? { name: p.name } : {}),
        ...(p.expire_date !== undefined ? { expire_date: p.expire_date } : {}),
        ...(p.member_limit !== undefined ? { member_limit: p.member_limit } : {}),
      };
      chat.links.set(link.invite_link, { link, chatId: chat.id, joined: [] });
      return { ok: true, result: link };
    },
    banChatMember: (p) => {
      const chat = chatFor(p.chat_id);
      if (isError(chat)) return chat;
      if (chat.botStatus !== 'administrator') return TelegramErrors.notEnoughRightsRestrict();
      if (!users.has(p.user_id)) return TelegramErrors.userNotFound();
      const status = statusOf(chat, p.user_id);
      if (status === 'creator') return TelegramErrors.cantRemoveOwner();
      if (status === 'administrator') return TelegramErrors.userIsAdministrator();
      chat.members.set(p.user_id, 'kicked');
      return { ok: true, result: true };
    },
    unbanChatMember: (p) => {
      const chat = chatFor(p.chat_id);
      if (isError(chat)) return chat;
      if (chat.botStatus !== 'administrator') return TelegramErrors.notEnoughRightsRestrict();
      if (!users.has(p.user_id)) return TelegramErrors.userNotFound();
      const status = statusOf(chat, p.user_id);
      if (status === 'creator') return TelegramErrors.cantRemoveOwner();
      if (status === 'administrator') return TelegramErrors.userIsAdministrator();
      // Without only_if_banned the Bot API guarantees the user is not a member afterwards:
      // a current member is removed (and may join again).
      if (status === 'kicked' || (status === 'member' && !p.only_if_banned)) chat.members.delete(p.user_id);
      return { ok: true, result: true };
    },
    getChatMember: (p) => {
      const chat = chatFor(p.chat_id);
      if (isError(chat)) return chat;
      if (!users.has(p.user_id) && p.user_id !== bot.id) return TelegramErrors.userNotFound();
      return { ok: true, result: memberJson(chat, p.user_id) };
    },
  };

  const takeFault = (method: string): TelegramFault | null => {
    const i = faults.findIndex((f) => f.left > 0 && (!f.method || f.method.toLowerCase() === method.toLowerCase()));
    if (i < 0) return null;
    const f = faults[i];
    if (--f.left <= 0) faults.splice(i, 1);
    return f;
  };

  const byLowerName = new Map(Object.keys(handlers).map((k) => [k.toLowerCase(), k as Implemented]));

  const handle = (req: http.IncomingMessage, raw: string): { status: number; body: string; contentType: string; record: Omit<TelegramRequest, 'status' | 'at'> } => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    const record: Omit<TelegramRequest, 'status' | 'at'> = { method: m?.[2] ?? url.pathname, params: {}, token: m?.[1] ?? '' };
    const answer = (o: Outcome<unknown>) => ({ status: o.ok ? 200 : o.error_code, body: JSON.stringify(o), contentType: 'application/json', record });
    const violate = (problems: string[], o: TelegramError) => { violations.push({ method: record.method, problems }); return answer(o); };
    if (!m) return violate([`${url.pathname} is not /bot<token>/<method>`], TelegramErrors.notFound());
    if (m[1] !== token) return answer(TelegramErrors.unauthorized());
    const method = byLowerName.get(m[2].toLowerCase());
    if (!method) return violate([`${m[2]} is not a method the stand-in implements`], TelegramErrors.notFound());
    record.method = method;

    // Parameters: query string, then a JSON or urlencoded body (as the Bot API accepts them).
    let params: Record<string, unknown> = Object.fromEntries(url.searchParams);
    let coerce = url.searchParams.size > 0;
    const type = String(req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (raw.length) {
      if (type === 'application/json') {
        try {
          const parsed = JSON.parse(raw) as unknown;
          if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return violate(['the JSON body is not an object'], fail(400, 'Bad Request: invalid JSON'));
          params = { ...params, ...(parsed as Record<string, unknown>) };
        } catch {
          return violate(['the body is not JSON'], fail(400, 'Bad Request: invalid JSON'));
        }
      } else if (type === 'application/x-www-form-urlencoded') {
        params = { ...params, ...Object.fromEntries(new URLSearchParams(raw)) };
        coerce = true;
      } else {
        return violate([`body sent as ${type || 'no content type'}; the stand-in reads JSON and urlencoded forms`], fail(400, 'Bad Request: unsupported content type'));
      }
    }
    // Form values that are JSON-serialized objects (allowed_updates, entities, reply_markup).
    if (coerce) {
      for (const [k, v] of Object.entries(params)) {
        if (typeof v === 'string' && /^[[{]/.test(v)) { try { params[k] = JSON.parse(v); } catch { /* left as text */ } }
      }
    }
    record.params = params;
    const v = (coerce ? validators().coerced : validators().json).get(method.toLowerCase())!;
    if (!v(params)) {
      const problems = (v.errors ?? []).map((e) => `${method}${e.instancePath} ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`);
      return violate(problems, fail(400, `Bad Request: ${problems[0]}`));
    }

    const fault = takeFault(method);
    if (fault) {
      switch (fault.kind) {
        case 'flood': return answer(TelegramErrors.tooManyRequests(fault.retryAfter ?? 1));
        case 'bot-not-member': return answer(TelegramErrors.botNotMember('supergroup'));
        case 'user-not-found': return answer(TelegramErrors.userNotFound());
        case 'server-error': {
          const status = fault.status ?? 500;
          if (status === 502 || status === 504) {
            return { status, body: `<html>\r\n<head><title>${status} Bad Gateway</title></head>\r\n<body>\r\n<center><h1>${status} Bad Gateway</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n`, contentType: 'text/html', record };
          }
          return answer(fail(status, 'Internal Server Error'));
        }
      }
    }
    const handler = handlers[method] as (p: unknown) => Outcome<unknown>;
    return answer(handler(params));
  };

  const server = http.createServer((req, res) => {
    const at = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let out: ReturnType<typeof handle>;
      try {
        out = handle(req, Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        violations.push({ method: req.url ?? '', problems: [`stand-in failed: ${(e as Error).stack}`] });
        out = { status: 500, body: JSON.stringify(fail(500, 'Internal Server Error')), contentType: 'application/json', record: { method: req.url ?? '', params: {}, token: '' } };
      }
      requests.push({ ...out.record, status: out.status, at });
      res.writeHead(out.status, { 'Content-Type': out.contentType });
      res.end(out.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const addUser: TelegramServer['addUser'] = (o = {}) => {
    const id = o.id ?? ++nextId;
    const u: TelegramUser = {
      id, is_bot: false, first_name: o.first_name ?? `Member ${id}`, ...(o.username ? { username: o.username } : {}),
      startedBot: o.startedBot ?? true, blockedBot: o.blockedBot ?? false,
    };
    users.set(id, u);
    return u;
  };

  return {
    apiRoot: `http://127.0.0.1:${port}`,
    token, bot, chats, users, sent, requests,
    get webhook() { return webhook; },
    get violations() { return violations; },
    addChat: (o = {}) => {
      const id = o.id ?? -(1_000_000_000_000 + ++nextId);
      const chat: TelegramChat = { id, type: o.type ?? 'supergroup', title: o.title ?? `chat ${id}`, botStatus: o.botStatus ?? 'administrator', members: new Map(), links: new Map() };
      chats.set(id, chat);
      return chat;
    },
    addUser,
    setStatus: (chatId, userId, status) => {
      const chat = chats.get(chatId);
      if (!chat) throw new Error(`no chat ${chatId}`);
      if (!users.has(userId)) throw new Error(`no user ${userId}`);
      chat.members.set(userId, status);
    },
    status: (chatId, userId) => {
      const chat = chats.get(chatId);
      if (!chat) throw new Error(`no chat ${chatId}`);
      return statusOf(chat, userId);
    },
    join: (inviteLink, userId) => {
      const invite = [...chats.values()].map((c) => c.links.get(inviteLink)).find(Boolean);
      if (!invite) return { joined: false, reason: 'unknown link' };
      const chat = chats.get(invite.chatId)!;
      if (invite.link.is_revoked) return { joined: false, reason: 'revoked' };
      if (invite.link.expire_date !== undefined && invite.link.expire_date <= now()) return { joined: false, reason: 'expired' };
      if (statusOf(chat, userId) === 'kicked') return { joined: false, reason: 'banned' };
      // member_limit counts users who joined by the link and are still members.
      const still = invite.joined.filter((u) => ['member', 'administrator', 'creator'].includes(statusOf(chat, u)));
      if (invite.link.member_limit !== undefined && still.length >= invite.link.member_limit) return { joined: false, reason: 'limit reached' };
      if (!users.has(userId)) addUser({ id: userId });
      chat.members.set(userId, 'member');
      invite.joined.push(userId);
      return { joined: true };
    },
    fault: (f) => {
      if (f.method && !byLowerName.has(f.method.toLowerCase())) throw new Error(`${f.method} is not a method the stand-in implements`);
      faults.push({ ...f, left: f.times ?? 1 });
    },
    requestsTo: (method) => requests.filter((r) => r.method.toLowerCase() === method.toLowerCase()),
    deliverUpdate: (update) => {
      if (!webhook) throw new Error('no webhook is set (setWebhook)');
      return fetch(webhook.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(webhook.secretToken ? { 'x-telegram-bot-api-secret-token': webhook.secretToken } : {}) },
        body: JSON.stringify({ update_id: ++updateId, ...update }),
      });
    },
    textUpdate: (from, text) => {
      const command = /^\/[A-Za-z0-9_]+/.exec(text);
      const message = {
        message_id: ++messageId, date: now(), text, from,
        chat: { id: from.id, type: 'private' as const, first_name: from.first_name, ...(from.username ? { username: from.username } : {}) },
        ...(command ? { entities: [{ type: 'bot_command' as const, offset: 0, length: command[0].length }] } : {}),
      } satisfies Message.TextMessage;
      return { message };
    },
    takeViolations: () => { const v = violations; violations = []; return v; },
    assertClean: () => {
      if (violations.length) throw new Error(`calls outside the Bot API:\n${violations.map((v) => `  ${v.method}: ${v.problems.join('; ')}`).join('\n')}`);
    },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  } satisfies TelegramServer;
}
