// Signed at-least-once delivery by graphile-worker (spec: Events, Delivery request
// headers), with a real local receiver and real workers against this file's own
// database. Retry delays are shortened to 200 ms.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import type { WorkerHandle } from '../../worker';
import { createEndpoint, insertEvents, isolatedDatabase, Receiver, sleep, startReceiver, verify, waitFor, webhookJobsDone, worker, ENCRYPTION_KEY } from '../support/webhooks';

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let app: TestApp;
let receiver: Receiver;
let running: WorkerHandle | null = null;

beforeAll(async () => {
  db = await isolatedDatabase();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  receiver = await startReceiver();
});
afterEach(async () => {
  await running?.stop();
  running = null;
  receiver.respond = () => 200;
});
afterAll(async () => {
  await receiver.close();
  await app.close();
  await db.drop();
});

const entitlementEvent = (n: number) => ({ type: 'member.entitlement.granted', data: { n } });

async function setup(endpoints: Record<string, unknown>[] = [{}]): Promise<{ tenant: Tenant; endpoints: { id: string; secret: string; url: string }[] }> {
  const tenant = await createTenant(app.owner);
  const created = [];
  for (const [i, body] of endpoints.entries()) {
    const url = `${receiver.url}/${tenant.communityId}/${i}`;
    created.push({ ...(await createEndpoint(app.url, tenant.key, { url, ...body })), url });
  }
  return { tenant, endpoints: created };
}

async function deliveries(tenant: Tenant, endpointId: string) {
  const r = await call(app.url, 'GET', `/v1/webhooks/endpoints/${endpointId}/deliveries?limit=100`, { key: tenant.key });
  expect(r.status).toBe(200);
  return r.body.data as any[]; // eslint-disable-line @typescript-eslint/no-explicit-any
}

function forEndpoint(endpointUrl: string) {
  const path = new URL(endpointUrl).pathname;
  return receiver.received.filter((r) => r.headers['x-test-path'] === path);
}

test('a committed event reaches every matching endpoint, signed, with webhook-id = event id and the feed envelope as body', async () => {
  const { tenant, endpoints } = await setup([{}, { event_types: ['member.entitlement.granted'] }, { event_types: ['member.entitlement.revoked'] }, { enabled: false }]);
  running = await worker();
  const [eventId] = await insertEvents(app.owner, tenant.communityId, [{ type: 'member.entitlement.granted', data: { member: { id: 'mem_1' }, entitlement: { revision: 1 } } }]);
  await waitFor('two deliveries', () => forEndpoint(endpoints[0].url).length + forEndpoint(endpoints[1].url).length === 2);
  // Deliveries are written in the event's transaction: none for the endpoint of other
  // event types, none for the disabled one. Once the worker is done, nothing reached them.
  const { rows: queued } = await app.owner.query<{ endpoint_id: string }>('select endpoint_id from billing.webhook_deliveries where event_id = $1', [eventId]);
  expect(queued.map((d) => d.endpoint_id).sort()).toEqual([endpoints[0].id, endpoints[1].id].sort());
  await waitFor('the worker done with the event', () => webhookJobsDone(app.owner, tenant.communityId));
  expect(forEndpoint(endpoints[2].url)).toHaveLength(0); // other event types only
  expect(forEndpoint(endpoints[3].url)).toHaveLength(0); // disabled
  const { rows } = await app.owner.query('select billing.event_json(e)::text as body from billing.events e where id = $1', [eventId]);
  for (const e of endpoints.slice(0, 2)) {
    const [got] = forEndpoint(e.url);
    expect(got.headers['webhook-id']).toBe(eventId);
    expect(Math.abs(Number(got.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(10);
    expect(got.headers['content-type']).toBe('application/json');
    const envelope = verify(e.secret, got);
    expect(got.body).toBe(rows[0].body);
    const feed = await call(app.url, 'GET', `/v1/events/${eventId}`, { key: tenant.key });
    expect(feed.status).toBe(200);
    expect(JSON.parse(got.body)).toEqual(feed.body);
    expect(envelope).toMatchObject({ id: eventId, type: 'member.entitlement.granted', api_version: '2026-08', data: { member: { id: 'mem_1' } } });
    const log = await deliveries(tenant, e.id);
    expect(log).toEqual([expect.objectContaining({ event_id: eventId, event_type: 'member.entitlement.granted', status: 'succeeded', attempt_count: 1, next_attempt_at: null, last_status_code: 200 })]);
    expect(log[0].attempts).toEqual([expect.objectContaining({ event_id: eventId, event_type: 'member.entitlement.granted', attempt: 1, status_code: 200, error: null, response_excerpt: 'ok', next_attempt_at: null })]);
    expect(log[0].attempts[0].duration_ms).toEqual(expect.any(Number));
  }
});

test('nothing is delivered before the event commits, and a rolled-back event never is', async () => {
  const { tenant, endpoints } = await setup();
  running = await worker();
  const client = await app.owner.connect();
  try {
    await client.query('begin');
    const rolled = await client.query(`insert into billing.events (community_id, type, data) values ($1, 'member.entitlement.granted', '{"rolled": "back"}') returning id`, [tenant.communityId]);
    await client.query('rollback');
    await client.query('begin');
    const { rows } = await client.query(`insert into billing.events (community_id, type, data) values ($1, 'member.entitlement.granted', '{}') returning id`, [tenant.communityId]);
    // While it is uncommitted, an event committed after it is delivered and the worker
    // is done with everything it can see: the uncommitted one was not sent.
    const [later] = await insertEvents(app.owner, tenant.communityId, [entitlementEvent(1)]);
    await waitFor('the later, committed event delivered', () => forEndpoint(endpoints[0].url).length === 1);
    await waitFor('the worker done with what is committed', () => webhookJobsDone(app.owner, tenant.communityId));
    expect(forEndpoint(endpoints[0].url).map((r) => r.headers['webhook-id'])).toEqual([later]);
    await client.query('commit');
    await waitFor('delivery after commit', () => forEndpoint(endpoints[0].url).length === 2);
    expect(forEndpoint(endpoints[0].url)[1].headers['webhook-id']).toBe(rows[0].id);
    // The rolled-back event left no delivery behind, so the log is final once the worker is done.
    const { rows: logged } = await app.owner.query<{ event_id: string }>('select event_id from billing.webhook_deliveries where endpoint_id = $1', [endpoints[0].id]);
    expect(logged.map((d) => d.event_id).sort()).toEqual([later, rows[0].id].sort());
    expect(logged.map((d) => d.event_id)).not.toContain(rolled.rows[0].id);
  } finally {
    client.release();
  }
  await waitFor('the worker done', () => webhookJobsDone(app.owner, tenant.communityId));
  expect(forEndpoint(endpoints[0].url).map((r) => r.headers['webhook-id']).sort()).toEqual(
    (await deliveries(tenant, endpoints[0].id)).map((d) => d.event_id).sort());
  expect(forEndpoint(endpoints[0].url)).toHaveLength(2);
});

test('non-2xx answers, network errors and timeouts are retried with the same webhook-id, each attempt logged', async () => {
  const { tenant, endpoints } = await setup();
  const path = new URL(endpoints[0].url).pathname;
  let n = 0;
  receiver.respond = (r) => {
    if (r.headers['x-test-path'] !== path) return 200;
    n++;
    if (n === 1) return { status: 500, body: 'x'.repeat(5000) };
    if (n === 2) return 'hang';
    return 200;
  };
  running = await worker({ deliveryTimeoutMs: 300 });
  const [eventId] = await insertEvents(app.owner, tenant.communityId, [entitlementEvent(1)]);
  await waitFor('three attempts', () => forEndpoint(endpoints[0].url).length === 3);
  const got = forEndpoint(endpoints[0].url);
  expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([eventId]));
  for (const r of got) verify(endpoints[0].secret, r);
  const log = await waitFor('log', async () => {
    const l = await deliveries(tenant, endpoints[0].id);
    return l[0]?.status === 'succeeded' ? l : null;
  });
  const attempts = log[0].attempts;
  expect(attempts.map((a: { attempt: number }) => a.attempt)).toEqual([1, 2, 3]);
  expect(attempts[0]).toMatchObject({ status_code: 500, error: null, next_attempt_at: expect.any(String) });
  expect(Buffer.byteLength(attempts[0].response_excerpt)).toBe(1024);
  expect(attempts[1]).toMatchObject({ status_code: null, error: expect.stringMatching(/timed out/), next_attempt_at: expect.any(String) });
  expect(attempts[2]).toMatchObject({ status_code: 200, next_attempt_at: null });
  expect(log[0]).toMatchObject({ status: 'succeeded', attempt_count: 3 });
});

test('after the last scheduled attempt the delivery is failed', async () => {
  const { tenant, endpoints } = await setup();
  const path = new URL(endpoints[0].url).pathname;
  receiver.respond = (r) => (r.headers['x-test-path'] === path ? 502 : 200);
  running = await worker({ retrySchedule: [0, 100, 100] });
  await insertEvents(app.owner, tenant.communityId, [entitlementEvent(1)]);
  const log = await waitFor('failed delivery', async () => {
    const l = await deliveries(tenant, endpoints[0].id);
    return l[0]?.status === 'failed' ? l : null;
  });
  expect(log[0]).toMatchObject({ attempt_count: 3, next_attempt_at: null, last_status_code: 502 });
  expect(log[0].attempts.map((a: { status_code: number }) => a.status_code)).toEqual([502, 502, 502]);
  // No attempt is left queued or running: the three logged are all that was sent.
  await waitFor('the worker done', () => webhookJobsDone(app.owner, tenant.communityId));
  expect(forEndpoint(endpoints[0].url)).toHaveLength(3);
});

test('a receiver that is down, then up, gets every event', async () => {
  const { tenant, endpoints } = await setup([{}, {}]);
  const down = await startReceiver();
  const downUrl = down.url;
  await down.down();
  await call(app.url, 'PATCH', `/v1/webhooks/endpoints/${endpoints[1].id}`, { key: tenant.key, body: { url: downUrl } });
  running = await worker({ retrySchedule: [0, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300] });
  const ids = await insertEvents(app.owner, tenant.communityId, Array.from({ length: 30 }, (_, i) => entitlementEvent(i)));
  await waitFor('first endpoint served', () => forEndpoint(endpoints[0].url).length === 30);
  await waitFor('every delivery to the down endpoint failed twice', async () => {
    const l = await deliveries(tenant, endpoints[1].id);
    return l.length === 30 && l.every((d: { status: string; attempt_count: number }) => d.status === 'pending' && d.attempt_count >= 2);
  });
  expect(down.received).toHaveLength(0);
  await down.up();
  await waitFor('all 30 after coming back', () => new Set(down.received.map((r) => r.headers['webhook-id'])).size === 30);
  expect(new Set(down.received.map((r) => r.headers['webhook-id']))).toEqual(new Set(ids));
  for (const r of down.received) verify(endpoints[1].secret, r);
  const log = await deliveries(tenant, endpoints[1].id);
  expect(log).toHaveLength(30);
  expect(log.every((d: { attempt_count: number; attempts: { error: string | null }[] }) => d.attempt_count >= 2 && /ECONNREFUSED/.test(d.attempts[0].error ?? ''))).toBe(true);
  // The log pages newest first with the usual cursor.
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { body: { data: { id: string }[]; next_cursor: string | null } } = await call(app.url, 'GET',
      `/v1/webhooks/endpoints/${endpoints[1].id}/deliveries?limit=12${cursor ? `&cursor=${cursor}` : ''}`, { key: tenant.key });
    seen.push(...page.body.data.map((d) => d.id));
    cursor = page.body.next_cursor;
  } while (cursor);
  expect(seen).toEqual(log.map((d: { id: string }) => d.id));
  expect(seen).toEqual([...seen].sort().reverse());
  await down.close();
});

test('redeliver answers 202 with the delivery and sends it again with the same webhook-id', async () => {
  const { tenant, endpoints } = await setup();
  running = await worker();
  const [eventId] = await insertEvents(app.owner, tenant.communityId, [entitlementEvent(1)]);
  const [first] = await waitFor('delivered', async () => {
    const l = await deliveries(tenant, endpoints[0].id);
    return l[0]?.status === 'succeeded' ? l : null;
  });
  const r = await call(app.url, 'POST', `/v1/webhooks/endpoints/${endpoints[0].id}/deliveries/${first.id}/redeliver`, { key: tenant.key });
  expect(r.status).toBe(202);
  expect(r.body).toMatchObject({ id: first.id, event_id: eventId, status: 'pending', attempt_count: 1 });
  await waitFor('second receipt', () => forEndpoint(endpoints[0].url).length === 2);
  const got = forEndpoint(endpoints[0].url);
  expect(got[1].headers['webhook-id']).toBe(eventId);
  verify(endpoints[0].secret, got[1]);
  const log = await waitFor('second attempt logged', async () => {
    const l = await deliveries(tenant, endpoints[0].id);
    return l[0].attempt_count === 2 ? l : null;
  });
  expect(log[0]).toMatchObject({ status: 'succeeded' });
  // A disabled endpoint's delivery is not requeued; an unknown delivery is 404.
  await call(app.url, 'PATCH', `/v1/webhooks/endpoints/${endpoints[0].id}`, { key: tenant.key, body: { enabled: false } });
  const conflict = await call(app.url, 'POST', `/v1/webhooks/endpoints/${endpoints[0].id}/deliveries/${first.id}/redeliver`, { key: tenant.key });
  expect([conflict.status, conflict.body.code]).toEqual([409, 'conflict']);
  const missing = await call(app.url, 'POST', `/v1/webhooks/endpoints/${endpoints[0].id}/deliveries/wd_0000000000000000000000000/redeliver`, { key: tenant.key });
  expect(missing.status).toBe(404);
});

test('an endpoint failing continuously for 5 days is disabled and webhook_endpoint.disabled is delivered to the others', async () => {
  const { tenant, endpoints } = await setup([{}, {}]);
  const path = new URL(endpoints[0].url).pathname;
  receiver.respond = (r) => (r.headers['x-test-path'] === path ? 500 : 200);
  // Failing for 5 days less an hour.
  await app.owner.query(`update billing.webhook_endpoints set failing_since = now() - interval '5 days' + interval '1 hour' where id = $1`, [endpoints[0].id]);
  running = await worker();
  await insertEvents(app.owner, tenant.communityId, [entitlementEvent(1)]);
  await waitFor('first failed attempt logged', async () => (await deliveries(tenant, endpoints[0].id))[0]?.attempt_count >= 1);
  // Short of 5 days, a failure leaves the endpoint enabled.
  expect((await call(app.url, 'GET', `/v1/webhooks/endpoints/${endpoints[0].id}`, { key: tenant.key })).body.enabled).toBe(true);
  // Five days and a second of failing: the next failure crosses the line.
  await app.owner.query(`update billing.webhook_endpoints set failing_since = now() - interval '5 days 1 second' where id = $1`, [endpoints[0].id]);
  await insertEvents(app.owner, tenant.communityId, [entitlementEvent(2)]);
  const disabled = await waitFor('disabled event delivered', () =>
    forEndpoint(endpoints[1].url).find((r) => JSON.parse(r.body).type === 'webhook_endpoint.disabled'));
  const envelope = verify(endpoints[1].secret, disabled);
  expect(envelope.data).toMatchObject({ endpoint: { id: endpoints[0].id, enabled: false, disabled_reason: 'failing' }, reason: 'failing', failing_since: expect.any(String) });
  const e = await call(app.url, 'GET', `/v1/webhooks/endpoints/${endpoints[0].id}`, { key: tenant.key });
  expect(e.body).toMatchObject({ enabled: false, disabled_reason: 'failing' });
  // Its pending retries stop (the worker runs out of jobs), and new events are not queued for it.
  await waitFor('the worker done', () => webhookJobsDone(app.owner, tenant.communityId));
  const sent = forEndpoint(endpoints[0].url).length;
  const [third] = await insertEvents(app.owner, tenant.communityId, [entitlementEvent(3)]);
  await waitFor('the third event delivered to the healthy endpoint', () => forEndpoint(endpoints[1].url).some((r) => r.headers['webhook-id'] === third));
  await waitFor('the worker done again', () => webhookJobsDone(app.owner, tenant.communityId));
  expect(forEndpoint(endpoints[0].url)).toHaveLength(sent);
  const log = await deliveries(tenant, endpoints[0].id);
  expect(log.map((d: { event_id: string }) => d.event_id)).not.toContain(third);
  expect(log.every((d: { status: string }) => d.status === 'failed')).toBe(true);
  // A success resets the streak: re-enabled, it starts counting afresh.
  receiver.respond = () => 200;
  const re = await call(app.url, 'PATCH', `/v1/webhooks/endpoints/${endpoints[0].id}`, { key: tenant.key, body: { enabled: true } });
  expect(re.body).toMatchObject({ enabled: true, disabled_reason: null });
  const { rows } = await app.owner.query('select failing_since from billing.webhook_endpoints where id = $1', [endpoints[0].id]);
  expect(rows[0].failing_since).toBeNull();
});

test('a consumer following the spec (dedupe by webhook-id, keep the highest revision) ends right despite out-of-order retries', async () => {
  const { tenant, endpoints } = await setup();
  const path = new URL(endpoints[0].url).pathname;
  // The consumer: verifies, dedupes on webhook-id, ignores revisions not above the stored one.
  const seen = new Set<string>();
  const state = new Map<string, { revision: number; status: string }>();
  let arrivals = 0;
  let outOfOrder = 0;
  receiver.respond = (r) => {
    if (r.headers['x-test-path'] !== path) return 200;
    arrivals++;
    // Every third first arrival fails, so its retry lands after later revisions.
    if (arrivals % 3 === 1) return 503;
    const envelope = verify(endpoints[0].secret, r);
    if (seen.has(envelope.id)) return 200;
    seen.add(envelope.id);
    const key = `${envelope.data.member.id}/${envelope.data.entitlement.entitlement_id}`;
    const stored = state.get(key);
    if (stored && envelope.data.entitlement.revision <= stored.revision) {
      outOfOrder++;
      return 200;
    }
    state.set(key, { revision: envelope.data.entitlement.revision, status: envelope.data.entitlement.status });
    return 200;
  };
  running = await worker();
  const truth = new Map<string, { revision: number; status: string }>();
  for (let revision = 1; revision <= 6; revision++) {
    const events = [];
    for (const member of ['mem_a', 'mem_b', 'mem_c']) {
      const status = (revision + member.length) % 2 === 0 ? 'active' : 'inactive';
      truth.set(`${member}/ent_x`, { revision, status });
      events.push({
        type: status === 'active' ? 'member.entitlement.granted' : 'member.entitlement.revoked',
        data: { member: { id: member, identities: [], external_subjects: [] }, entitlement: { id: `ment_${member}`, entitlement_id: 'ent_x', key: 'vip', name: 'VIP', revision, status, sources: [] } },
      });
    }
    await insertEvents(app.owner, tenant.communityId, events);
    await sleep(30);
  }
  await waitFor('all 18 events processed', () => seen.size === 18);
  expect(outOfOrder).toBeGreaterThan(0); // the test did exercise out-of-order arrival
  expect(state).toEqual(truth);
});

test('several workers at once send each delivery exactly once in the normal case', async () => {
  const { tenant, endpoints } = await setup([{}, {}]);
  const workers = await Promise.all([worker(), worker(), worker()]);
  try {
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(...await insertEvents(app.owner, tenant.communityId, Array.from({ length: 20 }, (_, j) => entitlementEvent(i * 20 + j))));
    for (const e of endpoints) {
      await waitFor(`200 deliveries to ${e.url}`, () => forEndpoint(e.url).length >= 200);
    }
    // Every job done: whatever was to be sent has been.
    await waitFor('the workers done', () => webhookJobsDone(app.owner, tenant.communityId));
    for (const e of endpoints) {
      const got = forEndpoint(e.url).map((r) => r.headers['webhook-id']);
      expect(got).toHaveLength(200);
      expect(new Set(got)).toEqual(new Set(ids));
    }
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
});
