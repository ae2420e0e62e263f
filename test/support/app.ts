// Test helpers: the real app on an ephemeral port against the run's database.
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { loadConfig, Config } from '../../src/core/config';
import { loginUrl } from '../../src/db/logins';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp, createHttpServer } from '../../src/app';
import { SCOPES, Scope } from '../../src/core/scopes';
import type { Services } from '../../src/domain/operation';
import { checkResponse } from './openapi-check';

export const TEST_DB = () => {
  const url = process.env.BILLING_TEST_DB;
  if (!url) throw new Error('BILLING_TEST_DB is not set: run tests through jest (globalSetup)');
  return url;
};

/**
 * The run's database as the API's login (billing_app; set up by globalSetup): through
 * the run's PgBouncer when TEST_POOLER=pgbouncer (BILLING_TEST_APP_DB), else direct.
 */
export const TEST_APP_DB = () => process.env.BILLING_TEST_APP_DB || loginUrl(TEST_DB(), 'billing_app');
/** Whether this run's API pools go through a pooler in transaction mode (TEST_POOLER). */
export const TEST_POOLED = () => Boolean(process.env.BILLING_TEST_APP_DB);
/** The run's database as the worker's login (billing_worker). */
export const TEST_WORKER_DB = () => loginUrl(TEST_DB(), 'billing_worker');

export interface TestApp {
  url: string;
  config: Config;
  owner: pg.Pool;
  api: pg.Pool;
  close(): Promise<void>;
}

/**
 * opts.appDatabaseUrl: the API pool's URL (default TEST_APP_DB()); with
 * databasePooler: 'transaction' in overrides, a pooler's (test/support/pgbouncer.ts).
 */
export async function startApp(overrides: Partial<Config> = {}, env: NodeJS.ProcessEnv = {},
  opts: { services?: (config: Config) => Services; appDatabaseUrl?: string } = {}): Promise<TestApp> {
  const config: Config = {
    ...loadConfig({ NODE_ENV: 'test', ...env }),
    ...(TEST_POOLED() ? { databasePooler: 'transaction' as const } : {}),
    // Tests fire many requests from one key; the limits themselves have their own tests.
    rateLimits: { key_per_minute: 1e6, key_burst: 1e6, ip_per_minute: 1e6, ip_burst: 1e6 },
    ...overrides,
  };
  const owner = createOwnerPool(TEST_DB());
  const api = createApiPool(opts.appDatabaseUrl ?? TEST_APP_DB(), 10, config.dbTimeouts, config.databasePooler);
  const { app, graphql, reads } = createApp({ config, apiPool: api, ownerPool: owner, services: opts.services?.(config) });
  const server = createHttpServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    config,
    owner,
    api,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await graphql.release();
      await reads?.stop();
      await api.end();
      await owner.end();
    },
  };
}

export interface Tenant { communityId: string; key: string; keyId: string }

let counter = 0;
export async function createTenant(owner: pg.Pool, scopes: readonly Scope[] = SCOPES, name?: string): Promise<Tenant> {
  const community = await createCommunity(owner, name ?? `Test community ${++counter}`);
  const key = await createKey(owner, community.id, [...scopes]);
  return { communityId: community.id, key: key.key, keyId: key.id };
}

export interface Reply {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

export async function call(base: string, method: string, path: string, opts: { key?: string | null; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined = opts.rawBody;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = undefined;
  try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
  // Every response of every test is held to the published OpenAPI document.
  await checkResponse(base, method, path, res.status, res.headers.get('content-type'), parsed, text);
  return { status: res.status, headers: res.headers, body: parsed, text };
}
