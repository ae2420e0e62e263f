// GET /v1/events, GET /v1/events/{id} and GET /v1/webhooks/event-types (spec
// "Endpoints" and "Events"): newest first, keyset by id, type and after_id filters,
// and a catalog whose data schemas every emitted event satisfies.
import Ajv2020 from 'ajv/dist/2020';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { seedWorld, World } from '../support/ledger-world';
import { EVENT_TYPES } from '../../src/domain/events/event-types';

let app: TestApp;
let tenant: Tenant;
let w: World;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  w = await seedWorld(app.owner, { communityId: tenant.communityId, members: 3 });
  const com = tenant.communityId;
  // A little of everything: subscriptions, a purchase, a checkout, identities, time.
  const { rows: [s] } = await app.owner.query<{ id: string }>(
    `insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end)
     values ($1, $2, $3, 'active', billing.community_now($1) + interval '30 days') returning id`, [com, w.members[0], w.plans[1]]);
  await app.owner.query(`update billing.subscriptions set status = 'cancelling', cancel_at = current_period_end where id = $1`, [s.id]);
  await app.owner.query(
    `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
     values ($1, $2, $3, 100, 'usd', billing.community_now($1) + interval '3 days')`, [com, w.members[1], w.plans[2]]);
  const { rows: [cs] } = await app.owner.query<{ id: string }>(
    `insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency, subject_kind, provider)
     values ($1, $2, $3, $4, 500, 'usd', 'member', 'sandbox') returning id`, [com, w.members[2], w.tiers[0], w.plans[0]]);
  await app.owner.query(`update billing.checkout_sessions set status = 'expired' where id = $1`, [cs.id]);
  await app.owner.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values ($1, $2, 'telegram', '777', null)`, [com, w.members[0]]);
  await app.owner.query(`update billing.communities set clock_offset = interval '31 days' where id = $1`, [com]);
  await app.owner.query('select billing.ledger_sweep($1)', [com]);
});
afterAll(() => app.close());

async function allEvents(query = ''): Promise<{ id: string; type: string; api_version: string; timestamp: string; data: any }[]> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const out = [];
  let cursor: string | null = null;
  do {
    const r: { status: number; body: any } = await call(app.url, 'GET', `/v1/events?limit=7${query}${cursor ? `&cursor=${cursor}` : ''}`, { key: tenant.key }); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(r.status).toBe(200);
    out.push(...r.body.data);
    cursor = r.body.next_cursor;
  } while (cursor);
  return out;
}

test('the feed pages newest first by cursor, every event exactly once', async () => {
  const events = await allEvents();
  const { rows } = await app.owner.query<{ id: string }>('select id from billing.events where community_id = $1 order by id desc', [tenant.communityId]);
  expect(events.map((e) => e.id)).toEqual(rows.map((r) => r.id));
  expect(events.length).toBeGreaterThan(15);
  for (const e of events) {
    expect(Object.keys(e).sort()).toEqual(['api_version', 'data', 'id', 'timestamp', 'type']);
    expect(e.id).toMatch(/^evt_[0-9a-f]{26}$/);
    expect(e.api_version).toBe('2026-08');
  }
  const last = await call(app.url, 'GET', `/v1/events?limit=${events.length}`, { key: tenant.key });
  expect(last.body.next_cursor).toBeNull();
});

test('type filters to a comma-separated list; an unknown type answers 422 naming it', async () => {
  const events = await allEvents('&type=member.entitlement.granted,member.entitlement.revoked');
  expect(new Set(events.map((e) => e.type))).toEqual(new Set(['member.entitlement.granted', 'member.entitlement.revoked']));
  const all = await allEvents();
  expect(events.map((e) => e.id)).toEqual(all.filter((e) => /granted|revoked/.test(e.type)).map((e) => e.id));
  const twice = await allEvents('&type=member.created, member.created');
  expect(twice.map((e) => e.id)).toEqual(all.filter((e) => e.type === 'member.created').map((e) => e.id));
  const bad = await call(app.url, 'GET', '/v1/events?type=member.entitlement.granted,nope.nope', { key: tenant.key });
  expect(bad.status).toBe(422);
  expect(bad.body).toMatchObject({ code: 'invalid_request', param: 'type' });
  expect(bad.body.detail).toContain('nope.nope');
});

test('after_id returns only events newer than that id, still newest first and paged', async () => {
  const all = await allEvents();
  const pivot = all[Math.floor(all.length / 2)];
  const newer = await allEvents(`&after_id=${pivot.id}`);
  expect(newer.map((e) => e.id)).toEqual(all.filter((e) => e.id > pivot.id).map((e) => e.id));
  const none = await call(app.url, 'GET', `/v1/events?after_id=${all[0].id}`, { key: tenant.key });
  expect(none.body).toEqual({ data: [], next_cursor: null });
  const bad = await call(app.url, 'GET', '/v1/events?after_id=sub_123', { key: tenant.key });
  expect(bad.status).toBe(422);
});

test('an invalid cursor answers 400; limit outside 1..100 answers 422', async () => {
  expect((await call(app.url, 'GET', '/v1/events?cursor=garbage', { key: tenant.key })).status).toBe(400);
  expect((await call(app.url, 'GET', '/v1/events?limit=0', { key: tenant.key })).status).toBe(422);
  expect((await call(app.url, 'GET', '/v1/events?limit=101', { key: tenant.key })).status).toBe(422);
});

test('GET /v1/events/{id} answers the same envelope; another community\'s event is 404', async () => {
  const [first] = (await call(app.url, 'GET', '/v1/events?limit=1', { key: tenant.key })).body.data;
  const one = await call(app.url, 'GET', `/v1/events/${first.id}`, { key: tenant.key });
  expect(one.status).toBe(200);
  expect(one.body).toEqual(first);
  const stranger = await createTenant(app.owner);
  const r = await call(app.url, 'GET', `/v1/events/${first.id}`, { key: stranger.key });
  expect(r.status).toBe(404);
  expect(r.body.code).toBe('not_found');
  expect((await call(app.url, 'GET', '/v1/events', { key: stranger.key })).body).toEqual({ data: [], next_cursor: null });
});

test('the feed needs events:read; the event-type catalog needs any valid key', async () => {
  const narrow = await createTenant(app.owner, ['plans:read']);
  const r = await call(app.url, 'GET', '/v1/events', { key: narrow.key });
  expect(r.status).toBe(403);
  expect(r.body.code).toBe('missing_scope');
  expect((await call(app.url, 'GET', '/v1/events/evt_0123456789abcdef0123456789', { key: narrow.key })).status).toBe(403);
  const cat = await call(app.url, 'GET', '/v1/webhooks/event-types', { key: narrow.key });
  expect(cat.status).toBe(200);
  expect((await call(app.url, 'GET', '/v1/webhooks/event-types', { key: null })).status).toBe(401);
});

test('the catalog lists every event type with a JSON Schema that each emitted event\'s data satisfies', async () => {
  const cat = await call(app.url, 'GET', '/v1/webhooks/event-types', { key: tenant.key });
  // Every emitted type, then the test ping (issue 26 item 13), which the feed never holds.
  expect(cat.body.data.map((t: { type: string }) => t.type)).toEqual([...EVENT_TYPES, 'webhook.ping']);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validators = new Map<string, ReturnType<typeof ajv.compile>>();
  for (const t of cat.body.data) {
    expect(typeof t.description).toBe('string');
    validators.set(t.type, ajv.compile(t.data_schema));
  }
  const events = await allEvents();
  const seen = new Set<string>();
  for (const e of events) {
    const validate = validators.get(e.type);
    expect({ type: e.type, known: !!validate }).toEqual({ type: e.type, known: true });
    const ok = validate!(e.data);
    expect({ type: e.type, errors: ok ? null : validate!.errors }).toEqual({ type: e.type, errors: null });
    seen.add(e.type);
  }
  expect([...seen].sort()).toEqual([
    'checkout.created', 'checkout.expired', 'member.created', 'member.entitlement.granted',
    'member.entitlement.revoked', 'member.entitlement.updated', 'member.updated', 'purchase.created',
    'subscription.created', 'subscription.updated',
  ]);
  // The schemas are not vacuous: a granted event without its entitlement fails.
  const granted = events.find((e) => e.type === 'member.entitlement.granted')!;
  const { entitlement: _dropped, ...broken } = granted.data;
  expect(validators.get('member.entitlement.granted')!(broken)).toBe(false);
});
