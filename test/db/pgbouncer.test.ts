// The API through PgBouncer in transaction mode (issue 32 item 2;
// docs/decisions/pgbouncer-transaction-mode.md): Debian's PgBouncer 1.18, which passes
// no startup option and no prepared statement between server connections, with 2
// server connections under an API pool of 10, so that every request's transaction
// lands on whichever server connection is free. The app sends no startup option
// (billing_app is billing_api by its role default), only unnamed statements, and sets
// nothing that outlives a transaction. Needs the pgbouncer binary (.ci/run installs it):
// without it this file fails, it is never skipped.
import pg from 'pg';
import { loadConfig } from '../../src/core/config';
import { derivedPassword, loginUrl } from '../../src/db/logins';
import { checkApiRole, createApiPool } from '../../src/db/pool';
import { call, startApp, TEST_DB, type TestApp } from '../support/app';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer';
import { checkout, createShop, externalSubject, type Shop } from '../support/shop';

const SERVER_CONNECTIONS = 2;
const OWN_LOGIN = `billing_pgb_probe_${process.pid}`;
const OWN_PASSWORD = 'probe-password';
let bouncer: PgBouncer;
let app: TestApp;
let shops: Shop[];
let pooledUrl: string;

beforeAll(async () => {
  bouncer = await startPgBouncer(TEST_DB(),
    { billing_app: derivedPassword(TEST_DB(), 'billing_app'), [OWN_LOGIN]: OWN_PASSWORD }, SERVER_CONNECTIONS);
  pooledUrl = bouncer.through(loginUrl(TEST_DB(), 'billing_app'));
  // Requests queue for the 2 server connections: on a busy machine a wait may pass the
  // default 5 s, which would answer 503 (an outage), not what this file is about.
  app = await startApp({ databasePooler: 'transaction', dbTimeouts: { connectMs: 60_000, queryMs: 60_000 } }, {}, { appDatabaseUrl: pooledUrl });
  shops = [await createShop(app), await createShop(app), await createShop(app)];
  await app.owner.query(`create role ${OWN_LOGIN} login noinherit password '${OWN_PASSWORD}' in role billing_api`);
});

afterAll(async () => {
  await app?.owner.query(`drop role if exists ${OWN_LOGIN}`).catch(() => {});
  await app?.close();
  await bouncer?.stop();
});

async function gql(key: string, query: string): Promise<{ status: number; body: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query }),
  });
  return { status: res.status, body: JSON.parse(await res.text()) };
}

/** What one request of a mix answered: its status and the tier ids it saw (null: none to check). */
interface Seen { what: string; shop: number; status: number; tiers: string[] | null }

async function oneOfEach(shop: Shop, i: number): Promise<Seen[]> {
  const [plans, graphql, link, members] = await Promise.all([
    call(app.url, 'GET', '/v1/plans', { key: shop.key }),
    gql(shop.key, '{ tiers(first: 100) { nodes { id } } }'),
    checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject('pgbouncer') }),
    call(app.url, 'GET', '/v1/members', { key: shop.key }),
  ]);
  return [
    { what: 'GET /v1/plans', shop: i, status: plans.status, tiers: plans.status === 200 ? (plans.body.data as Array<{ id: string }>).map((t) => t.id) : null },
    { what: 'GraphQL tiers', shop: i, status: graphql.status,
      tiers: graphql.status === 200 ? (graphql.body.data?.tiers?.nodes as Array<{ id: string }> ?? []).map((t) => t.id) : null },
    { what: 'POST /v1/checkout-links', shop: i, status: link.status === 201 ? 200 : link.status, tiers: null },
    { what: 'GET /v1/members', shop: i, status: members.status, tiers: null },
  ];
}

test('concurrent REST, GraphQL and handler requests through 2 pooled server connections each answer, for their own community only', async () => {
  const rounds = await Promise.all(Array.from({ length: 4 }, () => Promise.all(shops.map((shop, i) => oneOfEach(shop, i)))));
  const seen = rounds.flat(2);
  // No 500 (42P05 "prepared statement already exists", 26000, permission denied as billing_app).
  expect(seen.filter((s) => s.status !== 200)).toEqual([]);
  for (const s of seen.filter((x) => x.tiers !== null)) {
    const own = new Set(Object.values(shops[s.shop].ids.tiers));
    expect({ what: s.what, foreign: s.tiers!.filter((id) => !own.has(id)) }).toEqual({ what: s.what, foreign: [] });
    expect(s.tiers!.length).toBeGreaterThan(0);
  }
  // The app's clients really shared the pooler's server connections.
  expect(app.api.totalCount).toBeGreaterThan(SERVER_CONNECTIONS);
  const database = new URL(TEST_DB()).pathname.slice(1);
  expect(await bouncer.servers(database)).toBeGreaterThan(0);
  expect(await bouncer.servers(database)).toBeLessThanOrEqual(SERVER_CONNECTIONS);
});

test('no role, tenant setting or prepared statement outlives a request on a pooled server connection', async () => {
  // A burst first, so that every server connection has served requests of every community.
  await Promise.all(shops.flatMap((shop, i) => [oneOfEach(shop, i), oneOfEach(shop, i)]));
  // Two clients in open transactions hold the two server connections at once: both are looked at.
  const clients = Array.from({ length: SERVER_CONNECTIONS }, () => new pg.Client({ connectionString: pooledUrl }));
  try {
    await Promise.all(clients.map((c) => c.connect()));
    const states = await Promise.all(clients.map(async (c) => {
      await c.query('begin');
      const { rows } = await c.query(`select pg_backend_pid() as pid, session_user::text as login, current_user::text as role,
        coalesce(current_setting('app.community_id', true), '') as community, coalesce(current_setting('app.key_id', true), '') as key,
        coalesce(current_setting('app.scopes', true), '') as scopes, current_setting('statement_timeout') as timeout,
        (select count(*)::int from pg_prepared_statements) as prepared`);
      return rows[0] as Record<string, unknown>;
    }));
    await Promise.all(clients.map((c) => c.query('commit')));
    expect(new Set(states.map((s) => s.pid)).size).toBe(SERVER_CONNECTIONS);
    for (const { pid: _pid, ...state } of states) {
      expect(state).toEqual({ login: 'billing_app', role: 'billing_api', community: '', key: '', scopes: '', timeout: '15s', prepared: 0 });
    }
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
});

test('behind the pooler, an API login that does not become billing_api by itself is refused at start', async () => {
  // A login of the operator's own (APP_DATABASE_URL), member of billing_api, without the role default.
  const probe = new URL(pooledUrl);
  probe.username = OWN_LOGIN;
  probe.password = OWN_PASSWORD;
  const pool = createApiPool(probe.toString(), 1, undefined, 'transaction');
  try {
    await expect(checkApiRole(pool)).rejects.toThrow(`alter role "${OWN_LOGIN}" set role billing_api`);
  } finally {
    await pool.end();
  }
  // billing_app, as the migration leaves it, passes.
  await expect(checkApiRole(app.api)).resolves.toBeUndefined();
});

test('DATABASE_POOLER=transaction names the pooler in APP_DATABASE_URL: without it the service refuses to start', () => {
  expect(() => loadConfig({ DATABASE_POOLER: 'transaction' })).toThrow(/set APP_DATABASE_URL to the pooler/);
  expect(() => loadConfig({ DATABASE_POOLER: 'session' })).toThrow(/expected none or transaction/);
  expect(loadConfig({ DATABASE_POOLER: 'transaction', APP_DATABASE_URL: 'postgres://billing_app@pgbouncer:6432/billing' }).databasePooler).toBe('transaction');
  expect(loadConfig({}).databasePooler).toBe('none');
});
