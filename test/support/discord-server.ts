// A local stand-in for Discord's HTTP API (issue 29, item 4), for tests that run the real
// client (@discordjs/rest) with no network. It serves the few endpoints the service uses,
// keeps guilds, members, their roles and channel overwrites in memory, and checks every
// request against the OpenAPI description Discord publishes
// (test/support/vendor/discord-openapi.json): the path template and method exist, path and
// query parameters match their schemas, the bot token is sent as the operation's security
// asks, the JSON body matches the operation's requestBody schema (with no unknown top-level
// field), and each answer it gives validates against the response schema of its status.
// Anything else is recorded in `violations` and answered 400 the way Discord does
// (`{code: 50035, message: 'Invalid Form Body'}`); `assertClean()` fails the test.
// Faults (429 with retry_after and bucket headers, 5xx, 403 Missing Permissions, 404 Unknown
// Member) can be injected per operation or globally, and per-route rate limits enforced.
// docs/decisions/platform-stand-ins.md says what is checked and what is not.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

type Json = Record<string, unknown>;

/** The document: DISCORD_OPENAPI_PATH, else the copy kept in test/support/vendor/. */
export function discordOpenApiPath(): string {
  return process.env.DISCORD_OPENAPI_PATH || path.join(__dirname, 'vendor/discord-openapi.json');
}

/** Discord's JSON error codes used here (discord-api-types RESTJSONErrorCodes). */
export const DiscordErrors = {
  unknownChannel: { code: 10003, message: 'Unknown Channel' },
  unknownGuild: { code: 10004, message: 'Unknown Guild' },
  unknownMember: { code: 10007, message: 'Unknown Member' },
  unknownRole: { code: 10011, message: 'Unknown Role' },
  missingPermissions: { code: 50013, message: 'Missing Permissions' },
  invalidOAuth2AccessToken: { code: 50025, message: 'Invalid OAuth2 access token' },
  invalidFormBody: { code: 50035, message: 'Invalid Form Body' },
} as const;

// ---------------------------------------------------------------------------------------
// The OpenAPI document, compiled once per process (1.2 MB; schemas compiled on first use).

interface Operation {
  template: string;
  method: string; // upper case
  operationId: string;
  op: Json;
  pathParameters: Json[];
}

interface TemplateRoute {
  template: string;
  pattern: RegExp;
  names: string[];
  literalSegments: number;
  methods: Map<string, Operation>;
}

interface Spec {
  doc: Json;
  ajv: Ajv2020;
  routes: TemplateRoute[];
  byOperationId: Map<string, Operation>;
  validators: Map<string, ValidateFunction>;
}

let spec: Spec | null = null;

const SNOWFLAKE_MAX = (1n << 64n) - 1n;

function loadSpec(): Spec {
  if (spec) return spec;
  const doc = JSON.parse(fs.readFileSync(discordOpenApiPath(), 'utf8')) as Json;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // Formats the document names beyond JSON Schema's: checked where a check means something.
  ajv.addFormat('snowflake', { type: 'string', validate: (s: string) => /^(0|[1-9][0-9]*)$/.test(s) && BigInt(s) <= SNOWFLAKE_MAX });
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  ajv.addFormat('nonce', true);
  ajv.addSchema(doc, 'discord');
  const routes: TemplateRoute[] = [];
  const byOperationId = new Map<string, Operation>();
  for (const [template, item] of Object.entries(doc.paths as Record<string, Json>)) {
    const segments = template.split('/');
    const names: string[] = [];
    const pattern = new RegExp('^' + segments.map((s) => {
      const m = /^\{(.+)\}$/.exec(s);
      if (m) { names.push(m[1]); return '([^/]+)'; }
      return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    }).join('/') + '$');
    const route: TemplateRoute = { template, pattern, names, literalSegments: segments.filter((s) => !s.startsWith('{')).length, methods: new Map() };
    for (const [method, op] of Object.entries(item)) {
      if (method === 'parameters' || typeof op !== 'object' || op === null) continue;
      const operation: Operation = {
        template, method: method.toUpperCase(), operationId: String((op as Json).operationId), op: op as Json,
        pathParameters: (item.parameters ?? []) as Json[],
      };
      route.methods.set(operation.method, operation);
      byOperationId.set(operation.operationId, operation);
    }
    routes.push(route);
  }
  // A literal segment wins over a parameter (/users/@me before /users/{user_id}).
  routes.sort((a, b) => b.literalSegments - a.literalSegments);
  spec = { doc, ajv, routes, byOperationId, validators: new Map() };
  return spec;
}

/** A JSON pointer into the document, as a $ref ajv resolves against the added document. */
function pointer(parts: string[]): string {
  return 'discord#/' + parts.map((p) => encodeURIComponent(p.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');
}

function validator(s: Spec, parts: string[], strictTop = false): ValidateFunction {
  const key = parts.join('\u0000') + (strictTop ? '\u0000strict' : '');
  let v = s.validators.get(key);
  if (!v) {
    // unevaluatedProperties at the top sees what the referenced schema evaluated (allOf, anyOf
    // included), so only top-level fields no branch declares are refused.
    v = s.ajv.compile(strictTop ? { $ref: pointer(parts), unevaluatedProperties: false } : { $ref: pointer(parts) });
    s.validators.set(key, v);
  }
  return v;
}

/** Follows local $refs (#/components/...) to the node they name. */
function deref(s: Spec, node: unknown): Json | undefined {
  let at = node as Json | undefined;
  for (let hops = 0; at && typeof at.$ref === 'string' && hops < 10; hops++) {
    at = (at.$ref as string).slice(2).split('/')
      .reduce<unknown>((o, k) => (o as Json | undefined)?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], s.doc) as Json | undefined;
  }
  return at;
}

function errorsText(v: ValidateFunction, where: string): string {
  return (v.errors ?? []).map((e) => `${where}${e.instancePath} ${e.message}${e.params && 'unevaluatedProperty' in e.params ? ` (${String(e.params.unevaluatedProperty)})` : ''}`).join('; ');
}

/** Where a path parameter's schema lives: on the path item or on the operation. */
function parameterPointer(s: Spec, operation: Operation, name: string, where: 'path' | 'query'): string[] | null {
  const opParams = (operation.op.parameters ?? []) as Json[];
  const i = opParams.findIndex((p) => deref(s, p)?.name === name && deref(s, p)?.in === where);
  if (i >= 0) return ['paths', operation.template, operation.method.toLowerCase(), 'parameters', String(i), 'schema'];
  const j = operation.pathParameters.findIndex((p) => deref(s, p)?.name === name && deref(s, p)?.in === where);
  if (j >= 0) return ['paths', operation.template, 'parameters', String(j), 'schema'];
  return null;
}

/** A query value (always text) turned into what its schema's type asks, as Discord parses it. */
function coerceQuery(schema: Json | undefined, raw: string): unknown {
  const type = schema?.type;
  const types = Array.isArray(type) ? type : [type];
  if (types.includes('integer') || types.includes('number')) return /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
  if (types.includes('boolean')) return raw === 'true' ? true : raw === 'false' ? false : raw;
  return raw;
}

/** The documented answer for a status: exact code, then a range like 4XX, then default. */
function documentedResponse(s: Spec, operation: Operation, status: number): { parts: string[]; node: Json } | null {
  const responses = (operation.op.responses ?? {}) as Record<string, Json>;
  for (const key of [String(status), `${String(status)[0]}XX`, 'default']) {
    if (responses[key]) {
      const node = deref(s, responses[key]) as Json;
      const parts = typeof responses[key].$ref === 'string'
        ? (responses[key].$ref as string).slice(2).split('/')
        : ['paths', operation.template, operation.method.toLowerCase(), 'responses', key];
      return { parts, node };
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------
// State and the server.

export interface DiscordRole { id: string; name: string; position: number; permissions: string }
export interface DiscordMember { userId: string; username: string; roles: Set<string>; joinedAt: string; bot: boolean }
export interface DiscordOverwrite { type: number | null; allow: number | null; deny: number | null }
export interface DiscordGuild {
  id: string;
  name: string;
  roles: Map<string, DiscordRole>;
  members: Map<string, DiscordMember>;
  channels: Set<string>;
  /** Position of the bot's highest role: a role at or above it cannot be granted (403 50013). */
  botRolePosition: number;
  /** The bot lacks Manage Roles / Kick Members here: every write answers 403 50013. */
  botLacksPermissions: boolean;
}

export interface DiscordRequest {
  method: string;
  /** The path after the API base (/guilds/1/members/2), without the query. */
  path: string;
  template: string | null;
  operationId: string | null;
  params: Record<string, string>;
  query: Record<string, string>;
  body: unknown;
  /** The X-Audit-Log-Reason header, decoded. */
  reason: string | null;
  authorization: string | null;
  status: number;
  /** performance.now() when the request arrived. */
  at: number;
}

export interface Violation { method: string; path: string; problems: string[] }

export type DiscordFaultKind = 'rate-limit' | 'server-error' | 'missing-permissions' | 'unknown-member';

export interface DiscordFault {
  kind: DiscordFaultKind;
  /** An operationId (add_guild_member_role) or "PUT /guilds/{guild_id}/members/{user_id}/roles/{role_id}"; all operations when absent. */
  operation?: string;
  /** How many matching requests it answers (default 1; Infinity for all). */
  times?: number;
  /** rate-limit: seconds to wait (body retry_after, Retry-After, X-RateLimit-Reset-After). Default 0.1. */
  retryAfter?: number;
  /** rate-limit: the global limit (X-RateLimit-Global, scope global) rather than the route's bucket. */
  global?: boolean;
  /** rate-limit: X-RateLimit-Scope when not global (user, shared). Default user. */
  scope?: 'user' | 'shared';
  /** server-error: the status (default 500). */
  status?: number;
}

export interface RateLimit { limit: number; windowMs: number }

interface Bucket { hash: string; limit: number; windowMs: number; enforced: boolean; count: number; resetAt: number }

interface Answer { status: number; body?: unknown; headers?: Record<string, string> }

export interface DiscordServer {
  /** Base URL with the version, as DISCORD_API_URL takes it: http://127.0.0.1:PORT/api/v10. */
  url: string;
  /** @discordjs/rest's `api` option (the base without the version): http://127.0.0.1:PORT/api. */
  api: string;
  /** The bot token requests must carry (Authorization: Bot <token>). */
  token: string;
  guilds: Map<string, DiscordGuild>;
  /** Channel id -> overwrite id -> overwrite. */
  overwrites: Map<string, Map<string, DiscordOverwrite>>;
  /** OAuth2 access tokens the add-member endpoint accepts, to the user they belong to. */
  accessTokens: Map<string, string>;
  /** Global application commands registered (PUT /applications/{id}/commands), by application id. */
  commands: Map<string, unknown[]>;
  /** The application whose OAuth2 client the service uses (client_id, client_secret). */
  application: { id: string; secret: string };
  /**
   * A user approves the authorization URL the service redirected to (Discord's
   * /oauth2/authorize page): answers the redirect back to the service, with a code the
   * token endpoint exchanges once. Throws on what Discord would refuse to show.
   */
  authorize(authorizeUrl: string, user: { id: string; username: string }): string;
  /** Bodies posted to /interactions/{id}/{token}/callback, in order. */
  interactionResponses: { interactionId: string; token: string; body: unknown }[];
  requests: DiscordRequest[];
  violations: Violation[];
  /** A new snowflake (time-ordered, unique in this server). */
  snowflake(): string;
  addGuild(opts?: { id?: string; name?: string; botRolePosition?: number; roles?: { id?: string; name: string; position?: number }[] }): DiscordGuild;
  addMember(guildId: string, opts?: { id?: string; username?: string; roles?: string[]; bot?: boolean }): DiscordMember;
  addChannel(guildId: string, id?: string): string;
  /** The member's role ids (sorted), or null when the user is not in the guild. */
  memberRoles(guildId: string, userId: string): string[] | null;
  /** Injects a fault; faults are used in the order they were added. */
  fault(fault: DiscordFault): void;
  /** Enforces a per-route rate limit (its bucket is shared as Discord shares it, per guild or channel). */
  limit(operation: string, limit: RateLimit): void;
  /** Requests whose operation is the given operationId. */
  requestsTo(operationId: string): DiscordRequest[];
  /** Returns and forgets the violations recorded so far (for tests that provoke one). */
  takeViolations(): Violation[];
  /** Throws when any request or answer violated the OpenAPI document. */
  assertClean(): void;
  close(): Promise<void>;
}

/** Operations that share one rate-limit bucket, as Discord groups them. */
function bucketGroup(operationId: string): string {
  if (operationId === 'add_guild_member_role' || operationId === 'delete_guild_member_role') return 'guild-member-roles';
  if (operationId === 'set_channel_permission_overwrite' || operationId === 'delete_channel_permission_overwrite') return 'channel-permissions';
  return operationId;
}

const UNENFORCED: RateLimit = { limit: 10_000, windowMs: 1000 };

export async function startDiscordServer(opts: { token?: string; limits?: Record<string, RateLimit>; globalLimit?: RateLimit; port?: number } = {}): Promise<DiscordServer> {
  const s = loadSpec();
  const token = opts.token ?? `discord-bot-token-${crypto.randomBytes(6).toString('hex')}`;
  const guilds = new Map<string, DiscordGuild>();
  const overwrites = new Map<string, Map<string, DiscordOverwrite>>();
  const channelGuild = new Map<string, string>();
  const accessTokens = new Map<string, string>();
  const application = { id: '', secret: crypto.randomBytes(16).toString('hex') };
  /** Codes not yet exchanged: code -> who approved, for which client and redirect. */
  const codes = new Map<string, { userId: string; clientId: string; redirectUri: string; scopes: string[] }>();
  const users = new Map<string, string>();
  /** Global application commands registered, by application id (bulk overwrite). */
  const commands = new Map<string, Json[]>();
  const interactionResponses: DiscordServer['interactionResponses'] = [];
  const requests: DiscordRequest[] = [];
  let violations: Violation[] = [];
  const faults: (DiscordFault & { left: number })[] = [];
  const limits = new Map<string, RateLimit>();
  const buckets = new Map<string, Bucket>();
  let globalWindow = { count: 0, resetAt: 0 };
  let seq = 0n;

  const snowflake = () => {
    seq++;
    return (((BigInt(Date.now()) - 1420070400000n) << 22n) | (seq & 0xfffn)).toString();
  };
  application.id = snowflake();
  // A fault or limit naming no operation of the document would never fire: refuse it.
  const knownOperation = (name: string): string => {
    const byTemplate = [...s.byOperationId.values()].find((o) => `${o.method} ${o.template}` === name);
    if (byTemplate) return byTemplate.operationId;
    if (s.byOperationId.has(name)) return name;
    throw new Error(`${name} is neither an operationId nor "METHOD /template" of Discord's OpenAPI document`);
  };
  for (const [operation, limit] of Object.entries(opts.limits ?? {})) limits.set(bucketGroup(knownOperation(operation)), limit);

  const roleJson = (r: DiscordRole) => ({
    id: r.id, name: r.name, permissions: r.permissions, position: r.position, color: 0,
    colors: { primary_color: 0, secondary_color: null, tertiary_color: null },
    hoist: false, managed: false, mentionable: false, icon: null, unicode_emoji: null, flags: 0,
  });
  const memberJson = (m: DiscordMember) => ({
    avatar: null, banner: null, communication_disabled_until: null, flags: 0, joined_at: m.joinedAt, nick: null,
    pending: false, premium_since: null, roles: [...m.roles].sort(), mute: false, deaf: false,
    user: {
      id: m.userId, username: m.username, avatar: null, discriminator: '0', public_flags: 0, flags: 0,
      global_name: null, primary_guild: null, bot: m.bot,
    },
  });
  const err = (status: number, e: { code: number; message: string }): Answer => ({ status, body: { code: e.code, message: e.message } });

  // The handlers: one per operation the service uses. They read validated input.
  type Handler = (p: Record<string, string>, q: URLSearchParams, body: Json, bearer: string | null) => Answer;
  const guildOf = (id: string) => guilds.get(id);
  const handlers: Record<string, Handler> = {
    add_guild_member_role: (p) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      const role = g.roles.get(p.role_id);
      if (!role) return err(404, DiscordErrors.unknownRole);
      if (g.botLacksPermissions || role.position >= g.botRolePosition) return err(403, DiscordErrors.missingPermissions);
      const m = g.members.get(p.user_id);
      if (!m) return err(404, DiscordErrors.unknownMember);
      m.roles.add(role.id);
      return { status: 204 };
    },
    delete_guild_member_role: (p) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      const role = g.roles.get(p.role_id);
      if (!role) return err(404, DiscordErrors.unknownRole);
      if (g.botLacksPermissions || role.position >= g.botRolePosition) return err(403, DiscordErrors.missingPermissions);
      const m = g.members.get(p.user_id);
      if (!m) return err(404, DiscordErrors.unknownMember);
      m.roles.delete(role.id);
      return { status: 204 };
    },
    get_guild_member: (p) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      const m = g.members.get(p.user_id);
      return m ? { status: 200, body: memberJson(m) } : err(404, DiscordErrors.unknownMember);
    },
    list_guild_members: (p, q) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      // Validated already: limit 1-1000 (default 1), after a user id (default 0).
      const limit = Number(q.get('limit') ?? 1);
      const after = BigInt(q.get('after') ?? 0);
      const page = [...g.members.values()]
        .filter((m) => BigInt(m.userId) > after)
        .sort((a, b) => (BigInt(a.userId) < BigInt(b.userId) ? -1 : 1))
        .slice(0, limit);
      return { status: 200, body: page.map(memberJson) };
    },
    delete_guild_member: (p) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      if (g.botLacksPermissions) return err(403, DiscordErrors.missingPermissions);
      if (!g.members.delete(p.user_id)) return err(404, DiscordErrors.unknownMember);
      return { status: 204 };
    },
    add_guild_member: (p, _q, body) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      if (accessTokens.get(String(body.access_token)) !== p.user_id) return err(403, DiscordErrors.invalidOAuth2AccessToken);
      if (g.members.has(p.user_id)) return { status: 204 };
      const roles = (body.roles as string[] | null | undefined) ?? [];
      if (roles.some((r) => !g.roles.has(r))) return err(404, DiscordErrors.unknownRole);
      const m = addMember(p.guild_id, { id: p.user_id, roles });
      return { status: 201, body: memberJson(m) };
    },
    set_channel_permission_overwrite: (p, _q, body) => {
      const guildId = channelGuild.get(p.channel_id);
      if (!guildId) return err(404, DiscordErrors.unknownChannel);
      const g = guilds.get(guildId)!;
      if (g.botLacksPermissions) return err(403, DiscordErrors.missingPermissions);
      const type = (body.type as number | null | undefined) ?? null;
      // A member overwrite names a member of the guild; a role overwrite one of its roles.
      if (type === 1 && !g.members.has(p.overwrite_id)) return err(404, DiscordErrors.unknownMember);
      if (type === 0 && !g.roles.has(p.overwrite_id)) return err(404, DiscordErrors.unknownRole);
      overwrites.get(p.channel_id)!.set(p.overwrite_id, {
        type, allow: (body.allow as number | null | undefined) ?? null, deny: (body.deny as number | null | undefined) ?? null,
      });
      return { status: 204 };
    },
    delete_channel_permission_overwrite: (p) => {
      const guildId = channelGuild.get(p.channel_id);
      if (!guildId) return err(404, DiscordErrors.unknownChannel);
      if (guilds.get(guildId)!.botLacksPermissions) return err(403, DiscordErrors.missingPermissions);
      overwrites.get(p.channel_id)!.delete(p.overwrite_id);
      return { status: 204 };
    },
    bulk_set_application_commands: (p, _q, body) => {
      if (p.application_id !== application.id) return err(404, { code: 10002, message: 'Unknown Application' });
      const list = (Array.isArray(body) ? body : []) as Json[];
      commands.set(p.application_id, list);
      return { status: 200, body: list.map((c) => ({
        id: snowflake(), type: (c.type as number | undefined) ?? 1, application_id: p.application_id, version: snowflake(),
        default_member_permissions: null, dm_permission: true, contexts: null, integration_types: [0], nsfw: false,
        name: c.name, name_localizations: null, description: c.description ?? '', description_localizations: null,
        options: ((c.options as Json[] | undefined) ?? []).map((o) => ({
          type: o.type, name: o.name, name_localizations: null, description: o.description, description_localizations: null,
          required: o.required ?? false,
        })),
      })) };
    },
    get_channel: (p) => {
      const guildId = channelGuild.get(p.channel_id);
      if (!guildId) return err(404, DiscordErrors.unknownChannel);
      // A guild text channel with its permission overwrites (type 0 role, 1 member).
      return { status: 200, body: {
        id: p.channel_id, type: 0, flags: 0, guild_id: guildId, name: `channel-${p.channel_id.slice(-6)}`, position: 0,
        last_message_id: null, parent_id: null, rate_limit_per_user: 0, topic: null, nsfw: false,
        permission_overwrites: [...overwrites.get(p.channel_id)!].map(([id, o]) => ({
          id, type: o.type ?? 1, allow: String(o.allow ?? 0), deny: String(o.deny ?? 0),
        })),
      } };
    },
    list_guild_roles: (p) => {
      const g = guildOf(p.guild_id);
      if (!g) return err(404, DiscordErrors.unknownGuild);
      return { status: 200, body: [...g.roles.values()].sort((a, b) => a.position - b.position).map(roleJson) };
    },
    get_my_user: (_p, _q, _body, bearer) => {
      const id = bearer === null ? application.id : accessTokens.get(bearer)!;
      return {
        status: 200,
        body: {
          id, username: bearer === null ? 'Community Billing' : users.get(id) ?? `user${id}`, avatar: null, discriminator: '0', public_flags: 0, flags: 0,
          global_name: null, primary_guild: null, bot: bearer === null, mfa_enabled: false, locale: 'en-US', premium_type: 0,
        },
      };
    },
    create_interaction_response: (p, _q, body) => {
      interactionResponses.push({ interactionId: p.interaction_id, token: p.interaction_token, body });
      return { status: 204 };
    },
  };

  const addGuild: DiscordServer['addGuild'] = (o = {}) => {
    const id = o.id ?? snowflake();
    const g: DiscordGuild = {
      id, name: o.name ?? `guild ${id}`, roles: new Map(), members: new Map(), channels: new Set(),
      botRolePosition: o.botRolePosition ?? 100, botLacksPermissions: false,
    };
    g.roles.set(id, { id, name: '@everyone', position: 0, permissions: '0' });
    (o.roles ?? []).forEach((r, i) => {
      const rid = r.id ?? snowflake();
      g.roles.set(rid, { id: rid, name: r.name, position: r.position ?? i + 1, permissions: '0' });
    });
    guilds.set(id, g);
    return g;
  };
  const addMember: DiscordServer['addMember'] = (guildId, o = {}) => {
    const g = guilds.get(guildId);
    if (!g) throw new Error(`no guild ${guildId}`);
    const userId = o.id ?? snowflake();
    const m: DiscordMember = { userId, username: o.username ?? `user${userId.slice(-6)}`, roles: new Set(o.roles ?? []), joinedAt: new Date().toISOString(), bot: o.bot ?? false };
    g.members.set(userId, m);
    return m;
  };
  const addChannel: DiscordServer['addChannel'] = (guildId, id) => {
    const g = guilds.get(guildId);
    if (!g) throw new Error(`no guild ${guildId}`);
    const cid = id ?? snowflake();
    g.channels.add(cid);
    channelGuild.set(cid, guildId);
    overwrites.set(cid, new Map());
    return cid;
  };

  // Rate-limit buckets: one per bucket group and major parameter (guild or channel).
  const bucketFor = (operation: Operation, params: Record<string, string>): Bucket => {
    const group = bucketGroup(operation.operationId);
    const major = params.guild_id ?? params.channel_id ?? params.interaction_id ?? '';
    const key = `${group}:${major}`;
    const configured = limits.get(group);
    let b = buckets.get(key);
    if (!b || b.enforced !== Boolean(configured)) {
      const l = configured ?? UNENFORCED;
      b = { hash: crypto.createHash('sha1').update(group).digest('hex').slice(0, 32), limit: l.limit, windowMs: l.windowMs, enforced: Boolean(configured), count: 0, resetAt: 0 };
      buckets.set(key, b);
    }
    const now = Date.now();
    if (now >= b.resetAt) { b.count = 0; b.resetAt = now + b.windowMs; }
    return b;
  };
  const bucketHeaders = (b: Bucket, remaining: number, resetAfterMs: number): Record<string, string> => ({
    'X-RateLimit-Limit': String(b.limit),
    'X-RateLimit-Remaining': String(Math.max(0, remaining)),
    'X-RateLimit-Reset': ((Date.now() + resetAfterMs) / 1000).toFixed(3),
    'X-RateLimit-Reset-After': (resetAfterMs / 1000).toFixed(3),
    'X-RateLimit-Bucket': b.hash,
  });
  const rateLimited = (retryAfter: number, global: boolean, scope: string, extra: Record<string, string>): Answer => ({
    status: 429,
    // The document's RatelimitedResponse is Error (code, message) with retry_after and global.
    body: { message: 'You are being rate limited.', retry_after: retryAfter, global, code: 0 },
    headers: { 'Retry-After': String(retryAfter), 'X-RateLimit-Scope': scope, ...(global ? { 'X-RateLimit-Global': 'true' } : {}), ...extra },
  });

  const takeFault = (operation: Operation): DiscordFault | null => {
    const i = faults.findIndex((f) => f.left > 0 && (!f.operation || f.operation === operation.operationId || f.operation === `${operation.method} ${operation.template}`));
    if (i < 0) return null;
    const f = faults[i];
    f.left--;
    if (f.left <= 0) faults.splice(i, 1);
    return f;
  };

  // Checks a request against the document; returns the problems found.
  const checkRequest = (operation: Operation, params: Record<string, string>, url: URL, headers: http.IncomingHttpHeaders, raw: string, body: { value: unknown }): string[] => {
    const problems: string[] = [];
    for (const [name, value] of Object.entries(params)) {
      const parts = parameterPointer(s, operation, name, 'path');
      if (!parts) { problems.push(`path parameter ${name} is not documented`); continue; }
      const v = validator(s, parts);
      if (!v(value)) problems.push(errorsText(v, `path parameter ${name} (${JSON.stringify(value)})`));
    }
    const seen = new Set<string>();
    for (const [name, value] of url.searchParams) {
      if (seen.has(name)) { problems.push(`query parameter ${name} given twice`); continue; }
      seen.add(name);
      const parts = parameterPointer(s, operation, name, 'query');
      if (!parts) { problems.push(`query parameter ${name} is not documented for ${operation.operationId}`); continue; }
      const schema = deref(s, parts.reduce<unknown>((o, k) => (o as Json)[k], s.doc));
      const v = validator(s, parts);
      if (!v(coerceQuery(schema, value))) problems.push(errorsText(v, `query parameter ${name} (${JSON.stringify(value)})`));
    }
    const security = (operation.op.security ?? []) as Json[];
    const authOptional = security.length === 0 || security.some((req) => Object.keys(req).length === 0);
    const auth = headers.authorization;
    if (auth === undefined) {
      if (!authOptional) problems.push('no Authorization header (the operation requires BotToken)');
    } else if (!/^Bot [^\s]+$/.test(auth) && !(/^Bearer [^\s]+$/.test(auth) && security.some((req) => 'OAuth2' in req))) {
      problems.push('Authorization is not "Bot <token>"');
    }
    const reason = headers['x-audit-log-reason'];
    if (reason !== undefined) {
      try {
        const decoded = decodeURIComponent(String(reason));
        if (decoded.length > 512) problems.push('X-Audit-Log-Reason is longer than 512 characters');
      } catch {
        problems.push('X-Audit-Log-Reason is not URI-encoded');
      }
    }
    const requestBody = operation.op.requestBody as Json | undefined;
    if (raw.length === 0) {
      if (requestBody?.required) problems.push(`${operation.operationId} requires a JSON body`);
    } else if (!requestBody) {
      problems.push(`${operation.operationId} takes no body`);
    } else {
      const type = String(headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      if (type !== 'application/json') problems.push(`body sent as ${type || 'no content type'}, the stand-in reads application/json`);
      else {
        try {
          body.value = JSON.parse(raw);
          const parts = ['paths', operation.template, operation.method.toLowerCase(), 'requestBody', 'content', 'application/json', 'schema'];
          const v = validator(s, parts, true);
          if (!v(body.value)) problems.push(errorsText(v, 'body'));
        } catch {
          problems.push('body is not JSON');
        }
      }
    }
    return problems;
  };

  // Checks an answer of the stand-in itself against the document (a stand-in bug otherwise).
  const checkAnswer = (operation: Operation, answer: Answer): string[] => {
    const documented = documentedResponse(s, operation, answer.status);
    if (!documented) return answer.status >= 500 ? [] : [`status ${answer.status} is not documented for ${operation.operationId}`];
    const problems: string[] = [];
    const content = documented.node.content as Record<string, Json> | undefined;
    if (content?.['application/json']) {
      const v = validator(s, [...documented.parts, 'content', 'application/json', 'schema']);
      if (!v(answer.body)) problems.push(errorsText(v, `answer ${answer.status}`));
    } else if (answer.body !== undefined) {
      problems.push(`answer ${answer.status} has a body the document does not describe`);
    }
    for (const [name, value] of Object.entries(answer.headers ?? {})) {
      const header = (documented.node.headers as Record<string, Json> | undefined)?.[name];
      if (!header) continue;
      const schema = deref(s, header)?.schema as Json | undefined;
      const v = s.ajv.compile(schema ?? {});
      if (!v(coerceQuery(schema, value))) problems.push(`answer header ${name} (${value}) does not match its schema`);
    }
    return problems;
  };

  const send = (res: http.ServerResponse, a: Answer) => {
    const headers: Record<string, string> = { ...(a.headers ?? {}) };
    if (a.body !== undefined) headers['Content-Type'] = 'application/json';
    res.writeHead(a.status, headers);
    res.end(a.body === undefined ? undefined : JSON.stringify(a.body));
  };

  const handle = (req: http.IncomingMessage, raw: string): { answer: Answer; record: Omit<DiscordRequest, 'status' | 'at'> } => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const method = (req.method ?? 'GET').toUpperCase();
    const record: Omit<DiscordRequest, 'status' | 'at'> = {
      method, path: url.pathname, template: null, operationId: null, params: {}, query: Object.fromEntries(url.searchParams),
      body: raw.length ? raw : null, reason: null, authorization: req.headers.authorization ?? null,
    };
    const violate = (problems: string[], answer: Answer) => {
      violations.push({ method, path: url.pathname + url.search, problems });
      return { answer, record };
    };
    if (!url.pathname.startsWith('/api/v10/')) return violate(['not under /api/v10'], err(404, { code: 0, message: '404: Not Found' }));
    const rest = url.pathname.slice('/api/v10'.length);
    // The token exchange is not in the OpenAPI document (a form post, documented on
    // Discord's OAuth2 page): checked here by hand, as that page describes it.
    if (rest === '/oauth2/token') return { answer: tokenExchange(method, req.headers, raw, (problems) => violate(problems, err(400, { code: 0, message: 'invalid_request' })).answer), record };
    record.path = rest;
    let route: TemplateRoute | undefined;
    let match: RegExpExecArray | null = null;
    for (const r of s.routes) { match = r.pattern.exec(rest); if (match) { route = r; break; } }
    if (!route || !match) return violate([`no path of the OpenAPI document matches ${rest}`], err(404, { code: 0, message: '404: Not Found' }));
    const operation = route.methods.get(method);
    record.template = route.template;
    const params: Record<string, string> = {};
    route.names.forEach((n, i) => { params[n] = decodeURIComponent(match![i + 1]); });
    record.params = params;
    if (!operation) return violate([`${method} is not documented for ${route.template}`], err(405, { code: 0, message: '405: Method Not Allowed' }));
    record.operationId = operation.operationId;
    const body = { value: undefined as unknown };
    const problems = checkRequest(operation, params, url, req.headers, raw, body);
    if (body.value !== undefined) record.body = body.value;
    const reasonHeader = req.headers['x-audit-log-reason'];
    if (typeof reasonHeader === 'string') { try { record.reason = decodeURIComponent(reasonHeader); } catch { record.reason = reasonHeader; } }
    const handler = handlers[operation.operationId];
    if (!handler) problems.push(`${operation.operationId} is documented but the stand-in does not implement it`);
    if (problems.length) {
      const missingAuth = problems.some((p) => p.startsWith('no Authorization') || p.startsWith('Authorization is not'));
      return violate(problems, missingAuth ? err(401, { code: 0, message: '401: Unauthorized' }) : err(400, DiscordErrors.invalidFormBody));
    }
    // A well-formed but wrong token is a state a test may set up (a revoked bot), not a violation.
    const bearer = record.authorization?.startsWith('Bearer ') ? record.authorization.slice(7) : null;
    if (record.authorization !== null && record.authorization !== `Bot ${token}` && !(bearer !== null && accessTokens.has(bearer))) {
      return { answer: err(401, { code: 0, message: '401: Unauthorized' }), record };
    }

    const b = bucketFor(operation, params);
    b.count++;
    const resetAfter = Math.max(0, b.resetAt - Date.now());
    const headers = bucketHeaders(b, b.limit - b.count, resetAfter);
    const fault = takeFault(operation);
    if (fault) {
      const answer = ((): Answer => {
        switch (fault.kind) {
          case 'rate-limit': {
            const retryAfter = fault.retryAfter ?? 0.1;
            if (fault.global) return rateLimited(retryAfter, true, 'global', {});
            return rateLimited(retryAfter, false, fault.scope ?? 'user', bucketHeaders(b, 0, retryAfter * 1000));
          }
          case 'server-error': {
            const status = fault.status ?? 500;
            return { status, body: { message: `${status}: ${http.STATUS_CODES[status] ?? 'Server Error'}`, code: 0 } };
          }
          case 'missing-permissions': return { ...err(403, DiscordErrors.missingPermissions), headers };
          case 'unknown-member': return { ...err(404, DiscordErrors.unknownMember), headers };
        }
      })();
      return { answer, record };
    }
    if (opts.globalLimit) {
      const now = Date.now();
      if (now >= globalWindow.resetAt) globalWindow = { count: 0, resetAt: now + opts.globalLimit.windowMs };
      if (++globalWindow.count > opts.globalLimit.limit) {
        return { answer: rateLimited(Number(((globalWindow.resetAt - now) / 1000).toFixed(3)), true, 'global', {}), record };
      }
    }
    if (b.enforced && b.count > b.limit) {
      return { answer: rateLimited(Number((resetAfter / 1000).toFixed(3)), false, 'user', headers), record };
    }
    const answer = handler(params, url.searchParams, (body.value ?? {}) as Json, bearer);
    answer.headers = { ...headers, ...(answer.headers ?? {}) };
    const answerProblems = checkAnswer(operation, answer);
    if (answerProblems.length) violations.push({ method, path: url.pathname + url.search, problems: answerProblems.map((p) => `stand-in: ${p}`) });
    return { answer, record };
  };

  /** POST /oauth2/token, grant_type authorization_code, client credentials in HTTP Basic. */
  const tokenExchange = (method: string, headers: http.IncomingHttpHeaders, raw: string, violation: (problems: string[]) => Answer): Answer => {
    const problems: string[] = [];
    if (method !== 'POST') problems.push('the token endpoint takes POST');
    if (!String(headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) problems.push('the token endpoint takes application/x-www-form-urlencoded');
    const form = new URLSearchParams(raw);
    const basic = /^Basic (.+)$/.exec(String(headers.authorization ?? ''));
    const [clientId, secret] = basic ? Buffer.from(basic[1], 'base64').toString('utf8').split(':') : [form.get('client_id'), form.get('client_secret')];
    if (form.get('grant_type') !== 'authorization_code') problems.push('grant_type is not authorization_code');
    for (const f of ['code', 'redirect_uri']) if (!form.get(f)) problems.push(`${f} is missing`);
    if (problems.length) return violation(problems);
    if (clientId !== application.id || secret !== application.secret) return { status: 401, body: { error: 'invalid_client' } };
    const grant = codes.get(form.get('code')!);
    codes.delete(form.get('code')!);
    if (!grant || grant.clientId !== clientId || grant.redirectUri !== form.get('redirect_uri')) return { status: 400, body: { error: 'invalid_grant' } };
    const accessToken = crypto.randomBytes(15).toString('base64url');
    accessTokens.set(accessToken, grant.userId);
    return { status: 200, body: { access_token: accessToken, token_type: 'Bearer', expires_in: 604800, refresh_token: crypto.randomBytes(15).toString('base64url'), scope: grant.scopes.join(' ') } };
  };

  const authorize: DiscordServer['authorize'] = (authorizeUrl, user) => {
    const q = new URL(authorizeUrl).searchParams;
    if (q.get('response_type') !== 'code') throw new Error('response_type is not code');
    if (q.get('client_id') !== application.id) throw new Error(`unknown client_id ${q.get('client_id')}`);
    const redirectUri = q.get('redirect_uri');
    if (!redirectUri) throw new Error('redirect_uri is missing');
    const scopes = (q.get('scope') ?? '').split(' ').filter(Boolean);
    if (!scopes.includes('identify')) throw new Error('scope lacks identify');
    const code = crypto.randomBytes(15).toString('base64url');
    codes.set(code, { userId: user.id, clientId: application.id, redirectUri, scopes });
    users.set(user.id, user.username);
    const back = new URL(redirectUri);
    back.searchParams.set('code', code);
    if (q.get('state') !== null) back.searchParams.set('state', q.get('state')!);
    return back.toString();
  };

  const server = http.createServer((req, res) => {
    const at = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let result: ReturnType<typeof handle>;
      try {
        result = handle(req, Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        violations.push({ method: req.method ?? '', path: req.url ?? '', problems: [`stand-in failed: ${(e as Error).stack}`] });
        send(res, { status: 500, body: { message: '500: Internal Server Error', code: 0 } });
        return;
      }
      requests.push({ ...result.record, status: result.answer.status, at });
      send(res, result.answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/api/v10`,
    api: `http://127.0.0.1:${port}/api`,
    token, guilds, overwrites, accessTokens, application, authorize, commands, interactionResponses, requests,
    get violations() { return violations; },
    snowflake, addGuild, addMember, addChannel,
    memberRoles: (guildId, userId) => {
      const m = guilds.get(guildId)?.members.get(userId);
      return m ? [...m.roles].sort() : null;
    },
    fault: (f) => { if (f.operation) knownOperation(f.operation); faults.push({ ...f, left: f.times ?? 1 }); },
    limit: (operation, l) => { limits.set(bucketGroup(knownOperation(operation)), l); },
    requestsTo: (operationId) => requests.filter((r) => r.operationId === operationId),
    takeViolations: () => { const v = violations; violations = []; return v; },
    assertClean: () => {
      if (violations.length) {
        throw new Error(`requests or answers outside Discord's OpenAPI document:\n${violations.map((v) => `  ${v.method} ${v.path}: ${v.problems.join('; ')}`).join('\n')}`);
      }
    },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  } satisfies DiscordServer;
}
