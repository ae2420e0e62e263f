// Configuration, read once from the environment into a typed object.
import fs from 'node:fs';
import path from 'node:path';
import ipaddr from 'ipaddr.js';

export interface RateLimits {
  key_per_minute: number;
  key_burst: number;
  ip_per_minute: number;
  ip_burst: number;
}

/**
 * Bounds on waiting for the database, so an outage answers 503 in bounded time
 * instead of hanging (docs/operations.md, "Database outages").
 */
export interface DbTimeouts {
  /** A pool connect, new connection or wait for a free one (PG_CONNECT_TIMEOUT_MS, default 5000). */
  connectMs: number;
  /** One query of the API pool (PG_QUERY_TIMEOUT_MS, default 20000): the client stops waiting (a silent connection). */
  queryMs: number;
}

export type DatabasePooler = 'none' | 'transaction';

/**
 * DATABASE_POOLER: none (default) or transaction. A pooler serves the API pool only:
 * migrations and the owner (DATABASE_URL) and the worker (WORKER_DATABASE_URL) keep
 * sessions of their own (advisory locks, LISTEN, graphile-worker's prepared
 * statements), so transaction mode needs APP_DATABASE_URL pointing at the pooler.
 */
export function databasePoolerSetting(value: string | undefined, appDatabaseUrl: string | undefined): DatabasePooler {
  const text = (value ?? '').trim();
  if (text === '' || text === 'none') return 'none';
  if (text !== 'transaction') throw new Error(`DATABASE_POOLER: expected none or transaction, got "${text}"`);
  if (!appDatabaseUrl) {
    throw new Error('DATABASE_POOLER=transaction: set APP_DATABASE_URL to the pooler (PgBouncer) address; '
      + 'DATABASE_URL (migrations) and WORKER_DATABASE_URL (the worker) stay direct connections to PostgreSQL.');
  }
  return 'transaction';
}

export const DEFAULT_DB_TIMEOUTS: DbTimeouts = { connectMs: 5000, queryMs: 20000 };

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | null;
  /** The API pool's login (APP_DATABASE_URL); null: billing_app, set up from DATABASE_URL (src/db/logins.ts). */
  appDatabaseUrl: string | null;
  /** The worker's login (WORKER_DATABASE_URL); null: billing_worker, set up likewise. Always a direct connection. */
  workerDatabaseUrl: string | null;
  /**
   * What sits between the API pool (APP_DATABASE_URL) and PostgreSQL (DATABASE_POOLER):
   * 'none', or 'transaction' for a pooler in transaction mode (PgBouncer), where the API
   * sends no startup options and only unnamed statements (docs/decisions/pgbouncer-transaction-mode.md).
   */
  databasePooler: DatabasePooler;
  dataDir: string;
  publicBaseUrl: string | null;
  rateLimits: RateLimits;
  /** How long an API process keeps a key's leased rate tokens (src/operations/token-leases.ts). */
  tokenLeaseMs: number;
  /**
   * Streaming standbys the read operations run on (READ_DATABASE_URL, comma-separated);
   * empty: every operation runs on the primary (docs/decisions/read-replicas.md).
   */
  readDatabaseUrls: string[];
  /** A standby further behind than this is skipped (READ_MAX_LAG in seconds, default 1). */
  readMaxLagMs: number;
  /**
   * The share of a key's rate limits one API process spends on standby reads while the
   * primary cannot lease tokens (READ_TOKEN_SHARE, 0 to 1, default 0.5).
   */
  readTokenShare: number;
  webhookEncryptionKey: string | null;
  webhookAllowPrivateUrls: boolean;
  /**
   * Ports a webhook endpoint may name (WEBHOOK_PORTS): inclusive ranges, or null for any.
   * Default in production 80, 443 and 1024-65535; elsewhere any.
   */
  webhookPorts: Array<[number, number]> | null;
  stripeSecretKey: string | null;
  stripeWebhookSecret: string | null;
  stripeApiHost: string | null;
  /** Stripe API port and protocol (a local Stripe-compatible server in tests). */
  stripeApiPort: number | null;
  stripeApiProtocol: 'http' | 'https' | null;
  /** Discord's REST API base (DISCORD_API_URL): a local stand-in in tests, or a proxy. No trailing slash. */
  discordApiUrl: string;
  /** Discord's OAuth2 authorization page (DISCORD_OAUTH_URL), where "Connect Discord" sends the buyer. */
  discordOauthUrl: string;
  /** The Telegram Bot API root (TELEGRAM_API_URL), as grammY's apiRoot. No trailing slash. */
  telegramApiUrl: string;
  /** The deployment's bot tokens (DISCORD_BOT_TOKEN, TELEGRAM_BOT_TOKEN): for connections that have none of their own. */
  discordBotToken: string | null;
  telegramBotToken: string | null;
  poolSize: number;
  dbTimeouts: DbTimeouts;
  /**
   * Express's `trust proxy`: false (the socket's peer is the client), a hop count, or the
   * proxies' addresses/CIDRs (TRUST_PROXY; see trustProxySetting). loadConfig never
   * yields `true` (every hop: a client-chosen X-Forwarded-For would pick its own IP);
   * a test may set it to forge addresses from 127.0.0.1.
   */
  trustProxy: boolean | number | string[];
  /** NODE_ENV=production: stricter defaults; the base URL is PUBLIC_BASE_URL only. */
  production: boolean;
  /** Ruru (GraphiQL) at /graphiql: development only, never when NODE_ENV=production. */
  graphiql: boolean;
  /**
   * GraphQL introspection (__schema, __type) for any valid key (GRAPHQL_INTROSPECTION,
   * true or false): an operator's choice, off by default in production.
   */
  graphqlIntrospection: boolean;
  /** Bearer token of GET /metrics; null: /metrics answers 404. */
  metricsToken: string | null;
  /**
   * A first start (no community yet) creates the demo community, an all-scopes key and
   * an owner sign-in link, printed once (BILLING_DEMO; default on outside production,
   * off in production, where only BILLING_DEMO=true asks for it).
   */
  firstStartDemo: boolean;
  /**
   * Mail to members (docs/decisions/mail-outbox.md): the SMTP server as a nodemailer URL
   * (SMTP_URL, smtp:// or smtps://, credentials in it); null keeps every message in the
   * dashboard's mail page instead of sending it (the embedded default of npm start).
   */
  smtpUrl: string | null;
  /** The sender's address (MAIL_FROM); each community's name (or sender name) is its display name. */
  mailFrom: string;
}

export interface LogSettings {
  /** pino level: fatal, error, warn, info, debug, trace or silent. */
  level: string;
  /** Human-readable lines (pino-pretty) instead of JSON. */
  pretty: boolean;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * LOG_LEVEL (default info; silent under jest unless set) and LOG_FORMAT (json or
 * pretty; default pretty outside production, where pino-pretty, a dev dependency, is
 * installed).
 */
export function logSettings(env: NodeJS.ProcessEnv = process.env): LogSettings {
  const underJest = env.JEST_WORKER_ID !== undefined;
  const level = env.LOG_LEVEL || (underJest ? 'silent' : 'info');
  if (!LOG_LEVELS.includes(level)) throw new Error(`LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}, got ${level}`);
  const format = env.LOG_FORMAT || (env.NODE_ENV === 'production' || underJest ? 'json' : 'pretty');
  if (format !== 'json' && format !== 'pretty') throw new Error(`LOG_FORMAT: expected json or pretty, got ${format}`);
  return { level, pretty: format === 'pretty' };
}

function num(value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`expected a positive number, got ${value}`);
  return n;
}

/** A yes/no setting: true or 1, false or 0; unset or empty: the fallback. */
function flag(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new Error(`${name}: expected true or false, got ${value}`);
}

function portNumber(value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  // 0 asks the operating system for a free port (tests).
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`PORT: expected a port number, got ${value}`);
  return n;
}

/** Express's names for address ranges in a `trust proxy` list. */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

function proxyAddress(entry: string): boolean {
  if (PROXY_RANGE_NAMES.includes(entry)) return true;
  const [address, bits, ...rest] = entry.split('/');
  if (rest.length > 0) return false;
  // Four dotted decimals only: ipaddr.js would also read "10.1" or "0x7f.1" as IPv4.
  const valid = ipaddr.IPv4.isValidFourPartDecimal(address) || ipaddr.IPv6.isValid(address);
  if (!valid || bits === undefined) return valid;
  return /^\d{1,3}$/.test(bits) && ipaddr.isValidCIDR(entry);
}

/**
 * TRUST_PROXY: how far X-Forwarded-For is believed (docs/decisions/trust-proxy.md).
 * Unset, "false" or "0": not at all. A whole number n: the n proxies nearest this
 * server (n = 1: one load balancer, which appends its peer's address; whatever a
 * client wrote before that is ignored). Otherwise a comma-separated list of proxy
 * addresses or CIDRs (and Express's names loopback, linklocal, uniquelocal): hops
 * from those addresses are believed. "true" (every hop) is refused in production and
 * means 1 elsewhere.
 */
export function trustProxySetting(value: string | undefined, production: boolean): false | number | string[] {
  const text = (value ?? '').trim();
  if (text === '' || text === 'false' || text === '0') return false;
  if (text === 'true') {
    if (production) {
      throw new Error('TRUST_PROXY=true would believe every X-Forwarded-For hop, so a client could choose its own IP: '
        + 'set the number of proxies in front of the service (TRUST_PROXY=1 for one load balancer) or their addresses (TRUST_PROXY=10.0.0.0/8).');
    }
    return 1;
  }
  if (/^\d+$/.test(text)) {
    const hops = Number(text);
    if (hops > 16) throw new Error(`TRUST_PROXY: expected at most 16 proxy hops, got ${text}`);
    return hops;
  }
  const entries = text.split(',').map((e) => e.trim()).filter((e) => e !== '');
  const bad = entries.find((e) => !proxyAddress(e));
  if (bad !== undefined || entries.length === 0) {
    throw new Error(`TRUST_PROXY: expected false, a hop count, or proxy addresses/CIDRs separated by commas; "${bad ?? text}" is none of these`);
  }
  return entries;
}

export const DEFAULT_DISCORD_API_URL = 'https://discord.com/api/v10';
export const DEFAULT_TELEGRAM_API_URL = 'https://api.telegram.org';
export const DEFAULT_DISCORD_OAUTH_URL = 'https://discord.com/oauth2/authorize';

/**
 * A platform's API base URL (DISCORD_API_URL, TELEGRAM_API_URL): an http(s) URL without
 * query or fragment, returned without its trailing slash; unset or empty, the platform's own.
 */
export function apiBaseUrl(name: string, value: string | undefined, fallback: string): string {
  const text = (value ?? '').trim();
  if (text === '') return fallback;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`${name}: expected an http(s) URL such as ${fallback}, got "${text}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.search || url.hash || url.username || url.password) {
    throw new Error(`${name}: expected an http(s) URL without query, fragment or credentials, such as ${fallback}`);
  }
  return text.replace(/\/+$/, '');
}

/** The production default of WEBHOOK_PORTS: the web's ports and every unprivileged one. */
export const DEFAULT_WEBHOOK_PORTS = '80,443,1024-65535';

/**
 * WEBHOOK_PORTS: the ports webhook endpoints may name, as comma-separated ports and
 * ranges ("80,443,1024-65535", the production default) or "any" (the default outside
 * production). Port 0 is never a destination.
 */
export function webhookPortsSetting(value: string | undefined, production: boolean): Array<[number, number]> | null {
  const text = (value ?? '').trim() || (production ? DEFAULT_WEBHOOK_PORTS : 'any');
  if (text === 'any') return null;
  return text.split(',').map((part) => {
    const m = /^\s*(\d{1,5})(?:\s*-\s*(\d{1,5}))?\s*$/.exec(part);
    const lo = m ? Number(m[1]) : NaN;
    const hi = m ? Number(m[2] ?? m[1]) : NaN;
    if (!(lo >= 1 && hi <= 65535 && lo <= hi)) {
      throw new Error(`WEBHOOK_PORTS: expected "any" or ports and ranges such as ${DEFAULT_WEBHOOK_PORTS}, got "${part.trim()}"`);
    }
    return [lo, hi] as [number, number];
  });
}

/**
 * The package directory (the one with package.json): the default data directory lives
 * here whatever the cwd. This file runs from src/core (tests, tsx) or from the build's
 * dist/src/core (npm start, the CLI).
 */
export const packageRoot = ((up: string) => (fs.existsSync(path.join(up, 'package.json')) ? up : path.dirname(up)))(path.resolve(__dirname, '../..'));

/** SMTP_URL: smtp:// or smtps:// (nodemailer's URL form); unset or empty, none. */
export function smtpUrlSetting(value: string | undefined): string | null {
  const text = (value ?? '').trim();
  if (text === '') return null;
  let url: URL | null = null;
  try { url = new URL(text); } catch { /* reported below */ }
  if (!url || !['smtp:', 'smtps:'].includes(url.protocol) || !url.hostname) {
    // The value may hold a password: never echo it.
    throw new Error('SMTP_URL: expected smtp://[user:password@]host[:port] or smtps://...');
  }
  return text;
}

/** MAIL_FROM: a bare address (default billing@localhost). */
export function mailFromSetting(value: string | undefined): string {
  const text = (value ?? '').trim();
  if (text === '') return 'billing@localhost';
  if (!/^[^@\s<>"]+@[^@\s<>"]+$/.test(text)) throw new Error(`MAIL_FROM: expected an address such as billing@example.com, got "${text}"`);
  return text;
}

/** READ_DATABASE_URL: postgres:// URLs separated by commas (none: reads stay on the primary). */
export function readDatabaseUrlsSetting(value: string | undefined): string[] {
  const urls = (value ?? '').split(',').map((u) => u.trim()).filter((u) => u !== '');
  for (const url of urls) {
    let parsed: URL | null = null;
    try { parsed = new URL(url); } catch { /* below */ }
    if (!parsed || !['postgres:', 'postgresql:'].includes(parsed.protocol)) {
      throw new Error(`READ_DATABASE_URL: expected postgres:// URLs separated by commas, got "${url.replace(/:[^:@/]*@/, ':***@')}"`);
    }
  }
  return urls;
}

/** READ_TOKEN_SHARE: a fraction in (0, 1]. */
function shareSetting(value: string | undefined): number {
  const n = num(value, 0.5);
  if (n > 1) throw new Error(`READ_TOKEN_SHARE: expected a fraction between 0 and 1, got ${value}`);
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const production = env.NODE_ENV === 'production';
  return {
    port: portNumber(env.PORT, 3000),
    host: env.HOST ?? '0.0.0.0',
    databaseUrl: env.DATABASE_URL || null,
    appDatabaseUrl: env.APP_DATABASE_URL || null,
    workerDatabaseUrl: env.WORKER_DATABASE_URL || null,
    databasePooler: databasePoolerSetting(env.DATABASE_POOLER, env.APP_DATABASE_URL),
    dataDir: env.BILLING_DATA_DIR ? path.resolve(env.BILLING_DATA_DIR) : path.join(packageRoot, '.data'),
    publicBaseUrl: env.PUBLIC_BASE_URL || null,
    rateLimits: {
      key_per_minute: num(env.RATE_LIMIT_KEY_PER_MINUTE, 300),
      key_burst: num(env.RATE_LIMIT_KEY_BURST, 60),
      ip_per_minute: num(env.RATE_LIMIT_IP_PER_MINUTE, 20),
      ip_burst: num(env.RATE_LIMIT_IP_BURST, 10),
    },
    tokenLeaseMs: num(env.RATE_LIMIT_LEASE_MS, 1000),
    readDatabaseUrls: readDatabaseUrlsSetting(env.READ_DATABASE_URL),
    readMaxLagMs: num(env.READ_MAX_LAG, 1) * 1000,
    readTokenShare: shareSetting(env.READ_TOKEN_SHARE),
    webhookEncryptionKey: env.WEBHOOK_ENCRYPTION_KEY || null,
    webhookAllowPrivateUrls: env.WEBHOOK_ALLOW_PRIVATE_URLS
      ? env.WEBHOOK_ALLOW_PRIVATE_URLS === 'true' || env.WEBHOOK_ALLOW_PRIVATE_URLS === '1'
      : !production,
    webhookPorts: webhookPortsSetting(env.WEBHOOK_PORTS, production),
    stripeSecretKey: env.STRIPE_SECRET_KEY || null,
    stripeWebhookSecret: env.STRIPE_WEBHOOK_SECRET || null,
    stripeApiHost: env.STRIPE_API_HOST || null,
    stripeApiPort: env.STRIPE_API_PORT ? num(env.STRIPE_API_PORT, 443) : null,
    stripeApiProtocol: env.STRIPE_API_PROTOCOL === 'http' ? 'http' : env.STRIPE_API_PROTOCOL === 'https' ? 'https' : null,
    discordApiUrl: apiBaseUrl('DISCORD_API_URL', env.DISCORD_API_URL, DEFAULT_DISCORD_API_URL),
    discordOauthUrl: apiBaseUrl('DISCORD_OAUTH_URL', env.DISCORD_OAUTH_URL, DEFAULT_DISCORD_OAUTH_URL),
    telegramApiUrl: apiBaseUrl('TELEGRAM_API_URL', env.TELEGRAM_API_URL, DEFAULT_TELEGRAM_API_URL),
    discordBotToken: env.DISCORD_BOT_TOKEN || null,
    telegramBotToken: env.TELEGRAM_BOT_TOKEN || null,
    poolSize: num(env.PG_POOL_SIZE, 20),
    dbTimeouts: {
      connectMs: num(env.PG_CONNECT_TIMEOUT_MS, DEFAULT_DB_TIMEOUTS.connectMs),
      queryMs: num(env.PG_QUERY_TIMEOUT_MS, DEFAULT_DB_TIMEOUTS.queryMs),
    },
    trustProxy: trustProxySetting(env.TRUST_PROXY, production),
    production,
    graphiql: !production,
    graphqlIntrospection: flag('GRAPHQL_INTROSPECTION', env.GRAPHQL_INTROSPECTION, !production),
    metricsToken: env.METRICS_TOKEN || null,
    firstStartDemo: flag('BILLING_DEMO', env.BILLING_DEMO, !production),
    smtpUrl: smtpUrlSetting(env.SMTP_URL),
    mailFrom: mailFromSetting(env.MAIL_FROM),
  };
}

/** A Host header worth echoing: a DNS name or IP literal with an optional port, nothing else. */
const HOST_HEADER = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The base of the URLs one request hands out (checkout and portal pages, return
 * pages). PUBLIC_BASE_URL when set; in production nothing else (a Host header is
 * whatever the client typed). Elsewhere the host this request arrived at, so local
 * development and tests need no setting; computed per request, never remembered.
 */
export function baseUrlFor(config: Pick<Config, 'publicBaseUrl' | 'production' | 'port'>, origin?: { protocol: string; host: string | undefined } | null): string {
  if (config.publicBaseUrl) return config.publicBaseUrl.replace(/\/+$/, '');
  const fallback = `http://localhost:${config.port}`;
  if (config.production || !origin?.host || !HOST_HEADER.test(origin.host)) return fallback;
  const protocol = origin.protocol === 'https' ? 'https' : 'http';
  return `${protocol}://${origin.host}`;
}
