// Database outages (issue 18 item 1; docs/operations.md "Database outages"): the API
// and the worker reach PostgreSQL through a proxy the test cuts and restores while
// clients keep calling. Meanwhile every request answers 503 service_unavailable with
// Retry-After in bounded time (never a 500), /readyz answers 503, the log holds one
// line per failed request and no stack; afterwards everything recovers by itself, every
// committed event is delivered and every due renewal is applied exactly once.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { createApp } from '../../src/app';
import { captureLogs } from '../../src/core/log';
import { DbTimeouts } from '../../src/core/config';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { startWorker, WorkerHandle } from '../../worker';
import { createShop, externalSubject, Shop, subscribe } from '../support/shop';
import { startDbProxy, DbProxy } from '../support/db-proxy';
import { rpc, toolCallMessage } from '../support/mcp-client';
import { call, Reply, startApp, TEST_APP_DB, TEST_DB, TEST_WORKER_DB, TestApp } from '../support/app';
import { createEndpoint, ENCRYPTION_KEY, insertEvents, isolatedDatabase, Receiver, startReceiver, waitFor, WORKER_CONFIG } from '../support/webhooks';

const TIMEOUTS: DbTimeouts = { connectMs: 500, queryMs: 3000 };
/** What a request may take while the database is gone: the connect timeout and slack for a loaded machine. */
const BOUND_MS = 2500;

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let direct: TestApp; // seeding and checking, straight to PostgreSQL
let proxy: DbProxy;
let url: string; // the service under test, through the proxy
let server: http.Server;
let pools: pg.Pool[];
let receiver: Receiver;
let worker: WorkerHandle;
let logs: ReturnType<typeof captureLogs>;

beforeAll(async () => {
  logs = captureLogs('info');
  db = await isolatedDatabase();
  direct = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  proxy = await startDbProxy(TEST_DB());
  const api = createApiPool(proxy.through(TEST_APP_DB()), 6, TIMEOUTS);
  const owner = createOwnerPool(proxy.through(TEST_DB()), 2, TIMEOUTS);
  pools = [api, owner];
  const { app } = createApp({ config: { ...direct.config, dbTimeouts: TIMEOUTS }, apiPool: api, ownerPool: owner });
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver = await startReceiver();
  worker = await startWorker({
    connectionString: proxy.through(TEST_WORKER_DB()), concurrency: 4, pollInterval: 100,
    retrySchedule: [0, 200, 200, 200, 200, 200, 200, 200, 200, 200], config: WORKER_CONFIG, connectTimeoutMs: TIMEOUTS.connectMs, heartbeatMs: 300, staleAfterMs: 2000, platformDeliveries: false,
  });
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  for (const p of pools ?? []) await p.end();
  await proxy?.close();
  await receiver?.close();
  await direct?.close();
  await db?.drop();
  logs?.stop();
});

interface Seen { phase: 'up' | 'down' | 'edge' | 'back'; status: number; ms: number; code?: string; retryAfter: string | null; type: string | null }

/** Clients calling reads and writes in a loop until stopped, every answer recorded. */
function load(shop: Shop, subscriptionIds: string[], phase: () => Seen['phase']) {
  const seen: Seen[] = [];
  let running = true;
  const one = async (i: number): Promise<Reply> => {
    switch (i % 3) {
      case 0: return call(url, 'GET', '/v1/plans', { key: shop.key });
      case 1: return call(url, 'GET', `/v1/subscriptions/${subscriptionIds[i % subscriptionIds.length]}`, { key: shop.key });
      default: return call(url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject('load') } });
    }
  };
  const client = async (c: number) => {
    for (let i = c; running; i += 4) {
      const at = phase();
      const t0 = Date.now();
      const r = await one(i);
      // A request that straddled a change of phase counts as neither.
      seen.push({ phase: at === phase() ? at : 'edge', status: r.status, ms: Date.now() - t0, code: r.body?.code, retryAfter: r.headers.get('retry-after'), type: r.headers.get('content-type') });
    }
  };
  const done = Promise.all([0, 1, 2, 3].map(client));
  return { seen, stop: async () => { running = false; await done; } };
}

test('a database restart: 503 with Retry-After while it is gone, readyz 503, then everything recovers with nothing lost or applied twice', async () => {
  const shop = await createShop(direct);
  const endpoint = await createEndpoint(direct.url, shop.key, { url: `${receiver.url}/${shop.communityId}` });
  const subs: string[] = [];
  for (let i = 0; i < 3; i++) subs.push((await subscribe(direct, shop, 'silver')).subscriptionId);
  const before = await insertEvents(direct.owner, shop.communityId, [{ type: 'member.entitlement.updated', data: { n: 'before' } }]);

  let phase: Seen['phase'] = 'up';
  const traffic = load(shop, subs, () => phase);
  await waitFor('traffic flowing', () => traffic.seen.filter((s) => s.status === 200).length >= 12);

  // The restart: every open connection dies, new ones are refused, for 10 s (the
  // issue's outage; the soak restarts a real PostgreSQL).
  await proxy.cut('refuse');
  const cutAt = Date.now();
  phase = 'down';
  // Meanwhile, work piles up in the database: committed events (their deliveries are
  // queued in the same transactions) and renewals that fall due.
  const during = await insertEvents(direct.owner, shop.communityId, Array.from({ length: 5 }, (_, n) => ({ type: 'member.entitlement.updated', data: { n } })));
  await direct.owner.query(`update billing.communities set clock_offset = interval '32 days' where id = $1`, [shop.communityId]);
  await direct.owner.query(`select billing_private.add_job('subscriptions__apply_due', array[json_build_object('community_id', $1::text)])`, [shop.communityId]);
  const downReady = await call(url, 'GET', '/readyz');
  expect(downReady.status).toBe(503);
  expect(downReady.body).toMatchObject({ code: 'service_unavailable', status: 503 });
  expect(downReady.headers.get('retry-after')).toBe('5');
  // An idempotent write refused by the outage is not remembered under its key.
  const refused = await call(url, 'POST', '/v1/checkout-links', { key: shop.key, headers: { 'idempotency-key': 'during-outage' }, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject('k') } });
  expect([refused.status, refused.body.code]).toEqual([503, 'service_unavailable']);
  // The other doors answer the same: GraphQL's authentication, an MCP tool call.
  const gql = await fetch(`${url}/graphql`, { method: 'POST', headers: { authorization: `Bearer ${shop.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __typename }' }) });
  expect([gql.status, gql.headers.get('retry-after'), (await gql.json()).code]).toEqual([503, '5', 'service_unavailable']);
  const tool = await rpc(url, shop.key, toolCallMessage('list_plans'));
  expect(tool.status).toBe(200);
  expect(tool.body.result.isError).toBe(true);
  expect(JSON.parse(tool.body.result.content[0].text)).toMatchObject({ code: 'service_unavailable', status: 503 });
  await waitFor('clients refused during the outage', () => traffic.seen.filter((s) => s.phase === 'down' && s.status === 503).length >= 12, 15_000);

  // The database stays away the full 10 s while the clients keep asking.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, cutAt + 10_000 - Date.now())));
  phase = 'edge';
  await proxy.restore();
  await waitFor('ready again', async () => (await call(url, 'GET', '/readyz')).status === 200, 15_000);
  phase = 'back';
  await waitFor('clients served again', () => traffic.seen.filter((s) => s.phase === 'back' && s.status < 300).length >= 12, 15_000);
  await traffic.stop();

  // Answers: 200 or 503, never a 500; the 503s are the spec's problem, fast, with Retry-After.
  const failed = traffic.seen.filter((s) => s.status >= 300);
  expect(new Set(failed.map((s) => s.status))).toEqual(new Set([503]));
  for (const s of failed) {
    expect(s).toMatchObject({ code: 'service_unavailable', retryAfter: '5', type: expect.stringMatching(/^application\/problem\+json/) });
    expect(s.ms).toBeLessThan(BOUND_MS);
  }
  expect(traffic.seen.filter((s) => s.phase === 'back').some((s) => s.status === 503)).toBe(false);
  const retried = await call(url, 'POST', '/v1/checkout-links', { key: shop.key, headers: { 'idempotency-key': 'during-outage' }, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject('k') } });
  expect(retried.status).toBe(200);
  expect(retried.headers.get('idempotent-replayed')).toBeNull();

  // The worker came back by itself: every committed event reached the receiver.
  const { rows: events } = await direct.owner.query<{ id: string }>('select id from billing.events where community_id = $1', [shop.communityId]);
  expect(events.map((e) => e.id)).toEqual(expect.arrayContaining([...before, ...during]));
  const path = new URL(`${receiver.url}/${shop.communityId}`).pathname;
  try { await waitFor('every event delivered', () => {
    const got = new Set(receiver.received.filter((r) => r.headers['x-test-path'] === path).map((r) => r.headers['webhook-id']));
    return events.every((e) => got.has(e.id));
  }, 20_000); } catch (e) {
    console.log(JSON.stringify((await direct.owner.query('select task_identifier, attempts, last_error, locked_by, locked_at, run_at from graphile_worker.jobs')).rows, null, 1));
    console.log(JSON.stringify((await direct.owner.query('select id, status, attempt_count, last_error from billing.webhook_deliveries where endpoint_id = $1', [endpoint.id])).rows, null, 1));
    console.log(logs.lines.filter((l) => !l.includes('"access"')).join('').slice(0, 6000));
    throw e;
  }
  // A delivery sent just as the database went away is recorded (or sent again, with the
  // same webhook-id) once it is back: every one ends succeeded.
  await waitFor('every delivery recorded as succeeded', async () => (await direct.owner.query(
    `select 1 from billing.webhook_deliveries where endpoint_id = $1 and status <> 'succeeded'`, [endpoint.id])).rowCount === 0, 20_000);
  const { rows: logged } = await direct.owner.query<{ event_id: string }>('select event_id from billing.webhook_deliveries where endpoint_id = $1', [endpoint.id]);
  // One delivery per event: every event committed so far has one, and nothing else
  // (renewals applied after the outage may have added events and deliveries meanwhile).
  const ids = logged.map((d) => d.event_id);
  expect(ids).toEqual(expect.arrayContaining(events.map((e) => e.id)));
  expect(new Set(ids).size).toBe(ids.length);
  const { rows: now } = await direct.owner.query<{ id: string }>('select id from billing.events where community_id = $1', [shop.communityId]);
  expect(now.map((e) => e.id)).toEqual(expect.arrayContaining(ids));

  // Each renewal that fell due during the outage was applied once: one cycle invoice,
  // the period moved one month.
  const renewed = await waitFor('renewals applied', async () => {
    const { rows } = await direct.owner.query<{ id: string; cycles: number; ends: string }>(
      `select s.id, (select count(*)::int from billing.invoices i where i.subscription_id = s.id and i.billing_reason = 'subscription_cycle') as cycles,
              s.current_period_end::text as ends
       from billing.subscriptions s where s.id = any($1)`, [subs]);
    return rows.every((r) => r.cycles >= 1) ? rows : null;
  }, 20_000);
  for (const r of renewed) expect(r.cycles).toBe(1);
  // Running the due work again (as the next cron minute does) applies nothing more.
  await direct.owner.query(`select billing_private.add_job('subscriptions__apply_due', array[json_build_object('community_id', $1::text)])`, [shop.communityId]);
  await waitFor('second apply_due done', async () => (await direct.owner.query(
    `select 1 from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
     where t.identifier = 'subscriptions__apply_due' and j.payload->>'community_id' = $1`, [shop.communityId])).rowCount === 0);
  const { rows: after } = await direct.owner.query<{ cycles: number }>(
    `select count(*)::int as cycles from billing.invoices where subscription_id = any($1) and billing_reason = 'subscription_cycle'`, [subs]);
  expect(after[0].cycles).toBe(subs.length);

  // The log: one access line per refused request naming the cause, and no stack anywhere.
  const lines = logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const refusedLines = lines.filter((l) => l.kind === 'access' && l.status === 503 && l.route !== '/readyz');
  expect(refusedLines.length).toBe(failed.length + 2); // the clients', the idempotent POST's, GraphQL's
  for (const l of refusedLines) expect(l.cause).toMatch(/^database unavailable: /);
  // The MCP tool call answered 200 (a tool error): its one line names the cause too.
  expect(lines.filter((l) => l.kind === 'access' && l.route === '/mcp').map((l) => [l.status, l.cause])).toEqual([[200, expect.stringMatching(/^database unavailable: /)]]);
  expect(lines.filter((l) => l.msg === 'unexpected error')).toEqual([]);
  const stacks = lines.filter((l) => l.err !== undefined || /\n\s+at /.test(String(l.msg)));
  expect(stacks).toEqual([]);
}, 90_000);

test('a silent database (connections accepted, never answered) answers 503 within the connect timeout', async () => {
  const shop = await createShop(direct);
  expect((await call(url, 'GET', '/v1/plans', { key: shop.key })).status).toBe(200);
  await proxy.cut('blackhole');
  try {
    // The pools have noticed their connections died: the next requests must connect anew.
    await waitFor('pools emptied', () => pools.every((p) => p.totalCount === 0));
    const t0 = Date.now();
    const [plans, ready] = await Promise.all([call(url, 'GET', '/v1/plans', { key: shop.key }), call(url, 'GET', '/readyz')]);
    // It waited for the connect timeout, and no longer.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(TIMEOUTS.connectMs - 50);
    expect(Date.now() - t0).toBeLessThan(BOUND_MS);
    expect([plans.status, plans.body.code, plans.headers.get('retry-after')]).toEqual([503, 'service_unavailable', '5']);
    expect(ready.status).toBe(503);
  } finally {
    await proxy.restore();
  }
  await waitFor('served again', async () => (await call(url, 'GET', '/v1/plans', { key: shop.key })).status === 200, 10_000);
}, 30_000);

test('a job whose outcome was lost (locked by this live worker, no longer running) goes back to the queue and runs', async () => {
  const shop = await createShop(direct);
  // As when the connection is cut just as a task ends: the job stays locked by a worker
  // that is alive (so the dead-worker reaper leaves it) but no longer runs it.
  const { rows } = await direct.owner.query<{ id: string }>(
    `select (graphile_worker.add_job('subscriptions__apply_due', json_build_object('community_id', $1::text), run_at => now() + interval '1 hour')).id`, [shop.communityId]);
  await direct.owner.query(`update graphile_worker._private_jobs set locked_by = $2, locked_at = now() - interval '10 seconds',
    run_at = now() - interval '10 seconds', attempts = 1 where id = $1`, [rows[0].id, worker.workerIds[0]]);
  await waitFor('the stranded job ran', async () =>
    (await direct.owner.query('select 1 from graphile_worker._private_jobs where id = $1', [rows[0].id])).rowCount === 0, 10_000);
});

test('a connection the server terminates under a request (57P01, as in a restart) answers 503, and the key is not spent', async () => {
  const shop = await createShop(direct);
  const { subscriptionId } = await subscribe(direct, shop, 'silver');
  const cancel = () => call(url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key, headers: { 'idempotency-key': 'terminated' } });
  // Hold the request inside its transaction (it waits for the subscription row), then
  // have the server end its connection as a shutdown does.
  const holder = await direct.owner.connect();
  try {
    await holder.query('begin');
    await holder.query('select 1 from billing.subscriptions where id = $1 for update', [subscriptionId]);
    const { rows: [{ pid }] } = await holder.query<{ pid: number }>('select pg_backend_pid() as pid');
    const pending = cancel();
    const blocked = await waitFor('the request waiting inside the database', async () => (await direct.owner.query<{ pid: number }>(
      'select pid from pg_stat_activity where $1 = any (pg_blocking_pids(pid))', [pid])).rows[0]?.pid);
    await direct.owner.query('select pg_terminate_backend($1)', [blocked]);
    const r = await pending;
    expect([r.status, r.body.code, r.headers.get('retry-after')]).toEqual([503, 'service_unavailable', '5']);
  } finally {
    await holder.query('rollback');
    holder.release();
  }
  const lines = logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(lines.filter((l) => l.route === '/v1/subscriptions/{id}/cancel' && l.status === 503).map((l) => l.cause))
    .toEqual([expect.stringMatching(/^database unavailable: 57P01 /)]);
  // Nothing was committed and nothing remembered under the key: the retry does the work.
  const again = await cancel();
  expect([again.status, again.headers.get('idempotent-replayed'), again.body]).toEqual([202, null, { status: 'cancelling' }]);
});
