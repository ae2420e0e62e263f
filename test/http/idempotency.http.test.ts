// Idempotency over HTTP (spec "Limits", idempotency rules 1-3 and the key's limits) on
// real idempotent operations: 20 identical POST /v1/checkout-links at once; a first
// request held inside the database while a second with its key arrives (rule 3); keys
// of 0, 255 and 256 characters; the 24-hour retention.
import type pg from 'pg';
import { call, startApp, TestApp } from '../support/app';
import { createShop, externalSubject, subscribe } from '../support/shop';
import { waitFor } from '../support/webhooks';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

test('20 identical checkout requests at once create exactly one checkout', async () => {
  const shop = await createShop(app);
  const body = { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject('idem') };
  const replies = await Promise.all(Array.from({ length: 20 }, () =>
    call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'checkout-once' } })));
  const { rows } = await app.owner.query('select count(*)::int as n from billing.checkout_sessions where community_id = $1', [shop.communityId]);
  expect(rows[0].n).toBe(1);
  const ok = replies.filter((r) => r.status < 300);
  const inFlight = replies.filter((r) => r.status === 409);
  expect(ok.length + inFlight.length).toBe(20);
  expect(ok.length).toBeGreaterThanOrEqual(1);
  expect(new Set(ok.map((r) => r.body.checkout_id)).size).toBe(1);
  expect(ok.filter((r) => r.headers.get('idempotent-replayed') !== 'true').length).toBe(1);
  for (const r of inFlight) expect(r.body.code).toBe('request_in_flight');

  // Later: the same key and body replays; another body is refused.
  const replay = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'checkout-once' } });
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.body.checkout_id).toBe(ok[0].body.checkout_id);
  const other = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { ...body, client_reference_id: 'x' }, headers: { 'idempotency-key': 'checkout-once' } });
  expect(other.status).toBe(422);
  expect(other.body.code).toBe('idempotency_key_reuse');
});

/**
 * Holds a row lock the first request will need (in its own transaction, from the test),
 * runs `first` until PostgreSQL reports it waiting on that lock, i.e. inside its
 * transaction, past the idempotency check; then runs `meanwhile` and releases the lock.
 */
async function whileHeldInside<T>(lockSql: string, values: unknown[], first: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
  const holder: pg.PoolClient = await app.owner.connect();
  try {
    await holder.query('begin');
    await holder.query(lockSql, values);
    const { rows } = await holder.query<{ pid: number }>('select pg_backend_pid() as pid');
    const pending = first();
    await waitFor('the first request waiting on the held lock', async () => (await app.owner.query(
      'select 1 from pg_stat_activity where $1 = any (pg_blocking_pids(pid))', [rows[0].pid])).rowCount === 1, 10_000);
    try {
      await meanwhile();
    } finally {
      await holder.query('commit');
    }
    return await pending;
  } finally {
    holder.release();
  }
}

test('rule 3: a request with the key of one still in flight answers 409 request_in_flight (SQL operation: cancel)', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const cancel = () => call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key, headers: { 'idempotency-key': 'cancel-in-flight' } });
  const first = await whileHeldInside('select 1 from billing.subscriptions where id = $1 for update', [subscriptionId], cancel, async () => {
    const second = await cancel();
    expect([second.status, second.body.code]).toEqual([409, 'request_in_flight']);
    expect(second.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
  });
  expect(first.status).toBe(202);
  expect(first.headers.get('idempotent-replayed')).toBeNull();
  // Once it is done, the key replays its answer.
  const after = await cancel();
  expect([after.status, after.headers.get('idempotent-replayed'), after.body]).toEqual([202, 'true', first.body]);
});

test('rule 3: a request with the key of one still in flight answers 409 request_in_flight (handler operation: checkout)', async () => {
  const shop = await createShop(app);
  const body = { tier_id: shop.ids.tiers.silver, subject: externalSubject('in-flight') };
  const create = () => call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'checkout-in-flight' } });
  // The checkout row's foreign key on its plan waits for the plan row the test holds.
  const first = await whileHeldInside('select 1 from billing.plans where id = $1 for update', [shop.ids.plans['silver-monthly']], create, async () => {
    const second = await create();
    expect([second.status, second.body.code]).toEqual([409, 'request_in_flight']);
  });
  expect(first.status).toBe(200);
  const after = await create();
  expect([after.status, after.headers.get('idempotent-replayed'), after.body.checkout_id]).toEqual([200, 'true', first.body.checkout_id]);
  const { rows } = await app.owner.query('select count(*)::int as n from billing.checkout_sessions where community_id = $1', [shop.communityId]);
  expect(rows[0].n).toBe(1);
});

test('an Idempotency-Key is 1 to 255 characters: empty and 256 answer 400 invalid_request, 255 is honoured', async () => {
  const shop = await createShop(app);
  const body = { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject('long') };
  for (const key of ['', 'k'.repeat(256)]) {
    const r = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': key } });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'invalid_request', param: 'Idempotency-Key' });
  }
  const { rows: none } = await app.owner.query('select count(*)::int as n from billing.checkout_sessions where community_id = $1', [shop.communityId]);
  expect(none[0].n).toBe(0);
  const longest = 'k'.repeat(254) + 'z';
  const first = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': longest } });
  expect(first.status).toBe(200);
  const replay = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': longest } });
  expect([replay.headers.get('idempotent-replayed'), replay.body.checkout_id]).toEqual(['true', first.body.checkout_id]);
  // A key that differs only in its 255th character is another key.
  const other = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'k'.repeat(255) } });
  expect(other.headers.get('idempotent-replayed')).toBeNull();
});

test('a key is kept 24 hours: a replay just before replays, just after is a new request', async () => {
  const shop = await createShop(app);
  const body = { tier_id: shop.ids.tiers.silver, subject: externalSubject('retention') };
  const send = () => call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body, headers: { 'idempotency-key': 'day-old' } });
  const age = (interval: string) => app.owner.query(
    `update billing.idempotency_keys set created_at = created_at - $2::interval, expires_at = expires_at - $2::interval where community_id = $1`,
    [shop.communityId, interval]);
  const first = await send();
  expect(first.status).toBe(200);
  await age('23 hours 59 minutes'); // the record is now 23 h 59 min old
  const within = await send();
  expect([within.headers.get('idempotent-replayed'), within.body.checkout_id]).toEqual(['true', first.body.checkout_id]);
  await age('2 minutes'); // 24 h 01 min old
  const after = await send();
  expect(after.status).toBe(200);
  expect(after.headers.get('idempotent-replayed')).toBeNull();
  expect(after.body.checkout_id).not.toBe(first.body.checkout_id);
});
