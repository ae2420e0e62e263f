// `npm start`: the whole service in one process. Without DATABASE_URL it runs an
// embedded PostgreSQL (data in .data/postgres, kept across restarts). It migrates,
// serves the API, runs the worker, and on a database with no community creates a
// demo community with the demo catalog and prints an API key for it (outside
// production, or with BILLING_DEMO=true). /readyz answers ready once all of that is
// done and printed.
//
// Start-up order: the embedded PostgreSQL is spawned first, and the modules of the API
// and the worker (express, the operations, graphile-worker: about a second of
// require) load while it starts. Only light modules are imported at the top.
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type pg from 'pg';
import { baseUrlFor, Config, loadConfig, packageRoot } from './core/config';
import { log as logger } from './core/log';
import { SCOPES } from './core/scopes';
import { Database, openDatabase } from './db/database';
import { resolveEncryptionKey } from './db/encryption-key';
import { migrateDatabase } from './db/migration-status';
import { ensureLogin, loginUrl } from './db/logins';
import { checkApiRole, createApiPool, createOwnerPool } from './db/pool';
import { recordServerUrl } from './db/server-url';

/** The heavy modules, required once the database is starting (see the top). */
function loadService() {
  /* eslint-disable @typescript-eslint/no-require-imports */
  return {
    ...(require('./app') as typeof import('./app')),
    ...(require('./graphql/graphql-paths') as typeof import('./graphql/graphql-paths')),
    ...(require('../worker') as typeof import('../worker')),
    ...(require('./domain/catalog/catalog-file') as typeof import('./domain/catalog/catalog-file')),
    ...(require('./domain/communities/community-admin') as typeof import('./domain/communities/community-admin')),
    ...(require('./domain/operators/operator-accounts') as typeof import('./domain/operators/operator-accounts')),
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
}
type Service = ReturnType<typeof loadService>;

const DEMO_CATALOG = path.join(packageRoot, 'db/demo/demo-catalog.json');
// Progress and failures are log lines (stderr); what the user asked for (URL, demo key) is stdout.
const log = (line: string) => logger.info({ component: 'main' }, line.trimEnd());

interface Demo { communityId: string; key: string; signInToken: string }

/**
 * First start = a database with no community. Then, when wanted (config.firstStartDemo):
 * a demo community selling through the sandbox provider, the demo catalog, and an
 * all-scopes key (shown once); else 'empty'. An advisory lock keeps two processes
 * starting at once from both creating it.
 */
async function createDemoIfEmpty(service: Service, owner: pg.Pool, wanted: boolean): Promise<Demo | 'empty' | null> {
  const { applyCatalog, createCommunity, createKey, inviteOperator, readCatalogFile } = service;
  const lock = await owner.connect();
  try {
    await lock.query('select pg_advisory_lock(hashtext($1))', ['billing:first-start']);
    const { rows } = await owner.query<{ empty: boolean }>('select not exists (select 1 from billing.communities) as empty');
    if (!rows[0].empty) return null;
    // Production creates nothing unasked: no demo, no key or sign-in link in the logs.
    if (!wanted) return 'empty';
    const community = await createCommunity(owner, 'Demo community');
    await applyCatalog(owner, community.id, readCatalogFile(DEMO_CATALOG));
    const key = await createKey(owner, community.id, [...SCOPES], 'demo (npm start)');
    const invitation = await inviteOperator(owner, community.id, 'owner@example.com', 'owner');
    return { communityId: community.id, key: key.key, signInToken: invitation.token };
  } finally {
    await lock.query('select pg_advisory_unlock(hashtext($1))', ['billing:first-start']).catch(() => {});
    lock.release();
  }
}

function printDemo(demo: Demo, url: string, signInLink: Service['signInLink']) {
  const lines = [
    '',
    `Created a demo community ${demo.communityId} (sandbox payments, catalog from db/demo/demo-catalog.json).`,
    'Its API key, with every scope, is shown only this once:',
    '',
    `  ${demo.key}`,
    '',
    'Try it:',
    '',
    `  curl -H "Authorization: Bearer ${demo.key}" ${url}/v1/plans`,
    '',
    'Dashboard sign-in for owner@example.com (one-time link, valid 24 hours; set a password once in):',
    '',
    `  ${signInLink(url, demo.signInToken)}`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

function printNoCommunity() {
  process.stdout.write('No community yet, and no demo was made (BILLING_DEMO: off in production unless set to true).\n'
    + 'Create one: npm run billing -- communities create --name <name>\n'
    + 'Then an API key: npm run billing -- keys create --community <id> --scopes all\n'
    + 'And a dashboard sign-in link: npm run billing -- operators invite --community <id> --email <you> --role owner\n');
}

async function printCommunities(owner: pg.Pool) {
  const { rows } = await owner.query<{ id: string; name: string; n: number }>(
    `select id, name, count(*) over ()::int as n from billing.communities order by id limit 5`);
  const lines = rows.map((r) => `  ${r.id}  ${r.name}`);
  if (rows[0] && rows[0].n > rows.length) lines.push(`  ... and ${rows[0].n - rows.length} more`);
  process.stdout.write(`Communities:\n${lines.join('\n')}\n`
    + 'A new API key: npm run billing -- keys create --community <id> --scopes all\n'
    + 'A dashboard sign-in link: npm run billing -- operators invite --community <id> --email <you> --role owner\n');
}

async function listen(server: http.Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => { server.off('error', reject); resolve(); });
  });
  return (server.address() as AddressInfo).port;
}

/** Stops accepting connections and waits for requests in flight (at most graceMs). */
async function drain(server: http.Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // Keep-alive connections become idle as their last response ends: close them then.
  const sweep = setInterval(() => server.closeIdleConnections(), 100);
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  await closed;
  clearInterval(sweep);
  clearTimeout(timer);
}

/** Where start-up time goes: each step's milliseconds, the first since the process began (node, modules). */
function startupClock() {
  const steps: string[] = [];
  let last = 0;
  return {
    step(name: string) {
      const now = performance.now();
      steps.push(`${name} ${Math.round(now - last)}`);
      last = now;
    },
    summary: () => `${steps.join(', ')} (ms; ready ${Math.round(performance.now())} ms after the process began)`,
  };
}

async function main() {
  const clock = startupClock();
  clock.step('node');
  let config = loadConfig();
  if (config.production && !config.publicBaseUrl) {
    // Links handed out (checkout, portal) would otherwise name whatever Host a client sent.
    throw new Error('PUBLIC_BASE_URL is required when NODE_ENV=production (the base of checkout and portal URLs).');
  }
  config = { ...config, webhookEncryptionKey: resolveEncryptionKey(config, log) };

  // A signal during startup is honoured once startup is over (below).
  let early: string | null = null;
  const onEarlySignal = (signal: string) => { early ??= signal; };
  process.on('SIGINT', onEarlySignal);
  process.on('SIGTERM', onEarlySignal);

  const opening = openDatabase(config, log);
  const service = loadService();
  const { createApp, createHttpServer, GRAPHIQL_PATH, GRAPHQL_PATH, startWorker } = service;
  clock.step('modules (the database starting)');
  const database: Database = await opening;
  clock.step('database');
  const stopDatabase = () => database.stop().catch((err) => log(`stopping the database: ${(err as Error).message}`));

  let server: http.Server | null = null;
  let worker: { stop(): Promise<void> } | null = null;
  let workerStarting: Promise<{ stop(): Promise<void> }> | null = null;
  let owner: pg.Pool | null = null;
  let api: pg.Pool | null = null;
  let releaseGraphql: () => Promise<void> = async () => {};
  try {
    log('Applying migrations ...');
    await migrateDatabase(database.url).catch((err: Error) => {
      if (database.startedEmbedded) {
        log('Migrations failed on the embedded database. While db/migrations/current/ is being written,'
          + ` a changed file may not apply over an older copy: remove ${config.dataDir} to start afresh.`);
      }
      throw err;
    });
    clock.step('migrations');
    owner = createOwnerPool(database.url, 5, config.dbTimeouts);
    // The API and the worker never connect as the owner (src/db/logins.ts).
    const [appUrl, workerUrl] = await Promise.all([
      config.appDatabaseUrl ?? ensureLogin(database.url, 'billing_app'),
      config.workerDatabaseUrl ?? ensureLogin(database.url, 'billing_worker'),
    ]);
    api = createApiPool(appUrl, config.poolSize, config.dbTimeouts, config.databasePooler);
    // Through a pooler the role is the login's own default: refuse to serve without it.
    if (config.databasePooler === 'transaction') await checkApiRole(api);
    clock.step('logins');
    // The worker needs the migrations and its login, nothing after: it starts beside the
    // demo check and the app. It gets this config too: it may hold a generated webhook
    // encryption key.
    workerStarting = startWorker({ connectionString: workerUrl, config, mail: {
      smtpUrl: config.smtpUrl, from: config.mailFrom, baseUrl: () => baseUrlFor(config), key: config.webhookEncryptionKey } });
    workerStarting.catch(() => {}); // awaited below, or in the catch when something else failed first
    const demo = await createDemoIfEmpty(service, owner, config.firstStartDemo);
    clock.step('demo check');

    // Listen first so the real port (PORT=0 picks a free one) is in the config.
    // Its own problem answers (431, unparsable HTTP) name the problem pages at the configured base.
    server = createHttpServer(undefined, () => baseUrlFor(config, null));
    const port = await listen(server, config.port, config.host);
    config = { ...config, port };
    // Not ready (/readyz 503) until the worker runs and the banner is printed.
    const startup = { done: false };
    // Standbys named with the owner's login (DATABASE_URL's user) are used as billing_app,
    // as the primary is: the API never reads as the owner (docs/decisions/read-replicas.md).
    const ownerUser = new URL(database.url).username;
    const readUrls = config.readDatabaseUrls.map((u) => (new URL(u).username === ownerUser ? loginUrl(u, 'billing_app') : u));
    config = { ...config, readDatabaseUrls: readUrls };
    const { app, graphql, reads } = createApp({ config, apiPool: api, ownerPool: owner, started: () => startup.done });
    releaseGraphql = async () => { await graphql.release(); await reads?.stop(); };
    if (reads) log(`Reads on ${readUrls.length} standby(s) (READ_DATABASE_URL), at most ${config.readMaxLagMs / 1000} s behind.`);
    server.on('request', app);
    clock.step('app');
    worker = await workerStarting;
    clock.step('worker');

    const url = config.publicBaseUrl ?? `http://localhost:${port}`;
    process.stdout.write(`Billing API listening on ${url}\n`);
    process.stdout.write(`Operator dashboard at ${url}/dashboard\n`);
    process.stdout.write(`GraphQL (read-only, same bearer keys) at ${url}${GRAPHQL_PATH}`
      + `${config.graphiql ? `; GraphiQL (Ruru) at ${url}${GRAPHIQL_PATH}` : ''}\n`);
    if (demo === 'empty') printNoCommunity();
    else if (demo) printDemo(demo, url, service.signInLink);
    else await printCommunities(owner);
    // For the operator CLI on this machine (its links name this port, not its own PORT).
    recordServerUrl(config.dataDir, url, log);
    startup.done = true;
    log(`Ready: ${clock.summary()}`);
  } catch (err) {
    if (server?.listening) server.close();
    worker ??= await workerStarting?.catch(() => null) ?? null;
    await worker?.stop().catch(() => {});
    await api?.end().catch(() => {});
    await owner?.end().catch(() => {});
    await stopDatabase();
    throw err;
  }

  let stoppingSince = 0;
  const shutdown = async (signal: string) => {
    if (stoppingSince) {
      // A terminal's Ctrl-C reaches us several times at once (npm and tsx relay it too):
      // only a later, deliberate second signal cuts the drain short.
      if (Date.now() - stoppingSince < 1500) return;
      log(`${signal} again: exiting at once.`);
      process.exit(1);
    }
    stoppingSince = Date.now();
    log(`${signal}: draining requests, stopping the worker ...`);
    let code = 0;
    try {
      await drain(server!, 10_000);
      await worker!.stop();
      await releaseGraphql();
      await api!.end();
      await owner!.end();
    } catch (err) {
      logger.error({ component: 'main', err }, 'shutdown failed');
      code = 1;
    }
    await stopDatabase();
    if (database.startedEmbedded) log('Stopped the embedded PostgreSQL.');
    process.exit(code);
  };
  process.off('SIGINT', onEarlySignal);
  process.off('SIGTERM', onEarlySignal);
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  if (early) void shutdown(early);
}

main().catch((err) => {
  logger.fatal({ component: 'main', err }, `billing: ${(err as Error)?.message ?? String(err)}`);
  process.exit(1);
});
