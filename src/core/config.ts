// Configuration, read once from the environment into a typed object.
import fs from 'node:fs';
import path from 'node:path';

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

export const DEFAULT_DB_TIMEOUTS: DbTimeouts = { connectMs: 5000, queryMs: 20000 };

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | null;
  /** The API pool's login (APP_DATABASE_URL); null: billing_app, set up from DATABASE_URL (src/db/logins.ts). */
  appDatabaseUrl: string | null;
  /** The worker's login (WORKER_DATABASE_URL); null: billing_worker, set up likewise. */
  workerDatabaseUrl: string | null;
  dataDir: string;
  publicBaseUrl: string | null;
  rateLimits: RateLimits;
  /** How long an API process keeps a key's leased rate tokens (src/operations/token-leases.ts). */
  tokenLeaseMs: number;
  webhookEncryptionKey: string | null;
  webhookAllowPrivateUrls: boolean;
  stripeSecretKey: string | null;
  stripeWebhookSecret: string | null;
  stripeApiHost: string | null;
  /** Stripe API port and protocol (a local Stripe-compatible server in tests). */
  stripeApiPort: number | null;
  stripeApiProtocol: 'http' | 'https' | null;
  poolSize: number;
  dbTimeouts: DbTimeouts;
  trustProxy: boolean;
  /** NODE_ENV=production: stricter defaults; the base URL is PUBLIC_BASE_URL only. */
  production: boolean;
  /** Ruru (GraphiQL) at /graphiql: development only, never when NODE_ENV=production. */
  graphiql: boolean;
  /** Bearer token of GET /metrics; null: /metrics answers 404. */
  metricsToken: string | null;
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

function portNumber(value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  // 0 asks the operating system for a free port (tests).
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`PORT: expected a port number, got ${value}`);
  return n;
}

/**
 * The package directory (the one with package.json): the default data directory lives
 * here whatever the cwd. This file runs from src/core (tests, tsx) or from the build's
 * dist/src/core (npm start, the CLI).
 */
export const packageRoot = ((up: string) => (fs.existsSync(path.join(up, 'package.json')) ? up : path.dirname(up)))(path.resolve(__dirname, '../..'));

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const production = env.NODE_ENV === 'production';
  return {
    port: portNumber(env.PORT, 3000),
    host: env.HOST ?? '0.0.0.0',
    databaseUrl: env.DATABASE_URL || null,
    appDatabaseUrl: env.APP_DATABASE_URL || null,
    workerDatabaseUrl: env.WORKER_DATABASE_URL || null,
    dataDir: env.BILLING_DATA_DIR ? path.resolve(env.BILLING_DATA_DIR) : path.join(packageRoot, '.data'),
    publicBaseUrl: env.PUBLIC_BASE_URL || null,
    rateLimits: {
      key_per_minute: num(env.RATE_LIMIT_KEY_PER_MINUTE, 300),
      key_burst: num(env.RATE_LIMIT_KEY_BURST, 60),
      ip_per_minute: num(env.RATE_LIMIT_IP_PER_MINUTE, 20),
      ip_burst: num(env.RATE_LIMIT_IP_BURST, 10),
    },
    tokenLeaseMs: num(env.RATE_LIMIT_LEASE_MS, 1000),
    webhookEncryptionKey: env.WEBHOOK_ENCRYPTION_KEY || null,
    webhookAllowPrivateUrls: env.WEBHOOK_ALLOW_PRIVATE_URLS
      ? env.WEBHOOK_ALLOW_PRIVATE_URLS === 'true' || env.WEBHOOK_ALLOW_PRIVATE_URLS === '1'
      : !production,
    stripeSecretKey: env.STRIPE_SECRET_KEY || null,
    stripeWebhookSecret: env.STRIPE_WEBHOOK_SECRET || null,
    stripeApiHost: env.STRIPE_API_HOST || null,
    stripeApiPort: env.STRIPE_API_PORT ? num(env.STRIPE_API_PORT, 443) : null,
    stripeApiProtocol: env.STRIPE_API_PROTOCOL === 'http' ? 'http' : env.STRIPE_API_PROTOCOL === 'https' ? 'https' : null,
    poolSize: num(env.PG_POOL_SIZE, 20),
    dbTimeouts: {
      connectMs: num(env.PG_CONNECT_TIMEOUT_MS, DEFAULT_DB_TIMEOUTS.connectMs),
      queryMs: num(env.PG_QUERY_TIMEOUT_MS, DEFAULT_DB_TIMEOUTS.queryMs),
    },
    trustProxy: env.TRUST_PROXY === 'true' || env.TRUST_PROXY === '1',
    production,
    graphiql: !production,
    metricsToken: env.METRICS_TOKEN || null,
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
