// Spec: GET /v1/subscriptions (filters status, plan_id, tier_id, member_id; keyset
// pagination newest first) and GET /v1/subscriptions/{id}.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let seed: Seed;
let gold: string, silver: string, goldMonthly: string, goldAnnual: string, silverMonthly: string;
let alice: string, bob: string;
const subs: string[] = [];

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  seed = new Seed(app.owner, tenant.communityId);
  gold = await seed.tier({ name: 'Gold' });
  silver = await seed.tier({ name: 'Silver' });
  goldMonthly = await seed.plan(gold, { amount: 2000, name: 'Gold monthly' });
  goldAnnual = await seed.plan(gold, { amount: 20000, interval: 'year', name: null });
  silverMonthly = await seed.plan(silver, { amount: 1000 });
  alice = await seed.member({ discord: '111' });
  bob = await seed.member({ telegram: '222' });
  subs.push(await seed.subscription(alice, goldMonthly));
  subs.push(await seed.subscription(bob, silverMonthly, { status: 'trialing' }));
  subs.push(await seed.subscription(alice, goldAnnual, { status: 'cancelled', periodEnd: null }));
  subs.push(await seed.subscription(bob, goldMonthly, { status: 'past_due' }));
  subs.push(await seed.subscription(alice, silverMonthly));
});
afterAll(() => app.close());

const ids = (body: { data: { id: string }[] }) => body.data.map((s) => s.id);

test('the list is newest first and pages by cursor until next_cursor is null', async () => {
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const r = await call(app.url, 'GET', `/v1/subscriptions?limit=2${q}`, { key: tenant.key });
    expect(r.status).toBe(200);
    expect(r.body.data.length).toBeLessThanOrEqual(2);
    seen.push(...ids(r.body));
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor && pages < 10);
  expect(pages).toBe(3);
  expect(seen).toEqual([...subs].reverse());
});

test('a full last page answers next_cursor null', async () => {
  const r = await call(app.url, 'GET', '/v1/subscriptions?limit=5', { key: tenant.key });
  expect(ids(r.body)).toHaveLength(5);
  expect(r.body.next_cursor).toBeNull();
});

test('a subscription carries amount, currency, interval and names of its current plan, with nulls not omitted', async () => {
  const r = await call(app.url, 'GET', `/v1/subscriptions/${subs[2]}`, { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({
    id: subs[2], status: 'cancelled', plan_id: goldAnnual, plan_name: null, tier_id: gold, tier_name: 'Gold',
    member_id: alice, amount_cents: 20000, currency: 'usd', interval: 'year',
    current_period_end: null, cancel_at: null, paused_until: null, scheduled_plan_id: null, scheduled_at: null,
    created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    updated_at: expect.stringMatching(/Z$/),
  });
});

test('a plan change shows the new plan amount (amount comes from the current plan)', async () => {
  const sub = await seed.subscription(bob, silverMonthly);
  await app.owner.query('update billing.subscriptions set plan_id = $1 where id = $2', [goldMonthly, sub]);
  const r = await call(app.url, 'GET', `/v1/subscriptions/${sub}`, { key: tenant.key });
  expect(r.body).toMatchObject({ plan_id: goldMonthly, tier_id: gold, amount_cents: 2000, plan_name: 'Gold monthly' });
  await app.owner.query('delete from billing.subscriptions where id = $1', [sub]);
});

test('status, plan_id, tier_id and member_id filter the list and combine', async () => {
  const get = async (q: string) => ids((await call(app.url, 'GET', `/v1/subscriptions?${q}`, { key: tenant.key })).body);
  expect(await get('status=active')).toEqual([subs[4], subs[0]]);
  expect(await get(`plan_id=${goldMonthly}`)).toEqual([subs[3], subs[0]]);
  expect(await get(`tier_id=${gold}`)).toEqual([subs[3], subs[2], subs[0]]);
  expect(await get(`member_id=${bob}`)).toEqual([subs[3], subs[1]]);
  expect(await get(`member_id=${alice}&tier_id=${gold}&status=active`)).toEqual([subs[0]]);
  expect(await get('member_id=mem_00000000000000000000000000')).toEqual([]);
});

test('an unknown status answers 422 naming status', async () => {
  const r = await call(app.url, 'GET', '/v1/subscriptions?status=gone', { key: tenant.key });
  expect(r.status).toBe(422);
  expect(r.body).toMatchObject({ code: 'invalid_request', param: 'status' });
});

test('an invalid cursor answers 400 and a limit over 100 answers 422', async () => {
  expect((await call(app.url, 'GET', '/v1/subscriptions?cursor=nope', { key: tenant.key })).status).toBe(400);
  expect((await call(app.url, 'GET', '/v1/subscriptions?limit=101', { key: tenant.key })).status).toBe(422);
});

test('an unknown subscription id answers 404', async () => {
  const r = await call(app.url, 'GET', '/v1/subscriptions/sub_00000000000000000000000000', { key: tenant.key });
  expect(r.status).toBe(404);
  expect(r.body.code).toBe('not_found');
});

test('reading subscriptions needs subscriptions:read', async () => {
  const other = await createTenant(app.owner, ['members:read']);
  for (const path of ['/v1/subscriptions', `/v1/subscriptions/${subs[0]}`]) {
    const r = await call(app.url, 'GET', path, { key: other.key });
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ code: 'missing_scope', required_scope: 'subscriptions:read' });
  }
});

test('a list is sent as the database wrote it (jsonb text), not parsed and re-serialised in Node', async () => {
  const r = await call(app.url, 'GET', '/v1/subscriptions?limit=2', { key: tenant.key });
  expect(r.status).toBe(200);
  // PostgreSQL's jsonb text puts a space after ":" and ","; JSON.stringify never does.
  expect(r.text).toMatch(/^\{"data": \[\{/);
});
