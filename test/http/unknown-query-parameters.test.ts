// Issue 26 item 7: a query parameter an operation does not take answers 400
// invalid_request naming it, on every route (enumerated from the registry), where it
// was ignored: GET /v1/subscriptions?starting_after=x answered page 1 again, so a
// Stripe-style pager looped forever. docs/decisions/unknown-query-parameters.md
import { operations } from '../../src/operations';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

const NO_SUCH_ID = 'none_0123456789abcdef0123456789';
const pathOf = (path: string) => path.replace(/\{\w+\}/g, NO_SUCH_ID);

test.each(operations.map((op) => [`${op.method} ${op.path}`, op] as const))(
  'an unknown query parameter answers 400 invalid_request naming it: %s', async (_name, op) => {
    const r = await call(app.url, op.method, `${pathOf(op.path)}?starting_after=${NO_SUCH_ID}`, { key: tenant.key });
    expect([r.status, r.body.code, r.body.param]).toEqual([400, 'invalid_request', 'starting_after']);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(r.body.detail).toContain('"starting_after"');
  });

test('Stripe-style parameters are named as sent: expand[] and created[gte]', async () => {
  for (const [query, param] of [['expand[]=member', 'expand[]'], ['created%5Bgte%5D=1700000000', 'created[gte]'], ['limit=5&Status=active', 'Status']]) {
    const r = await call(app.url, 'GET', `/v1/subscriptions?${query}`, { key: tenant.key });
    expect({ query, status: r.status, code: r.body.code, param: r.body.param }).toEqual({ query, status: 400, code: 'invalid_request', param });
  }
});

test('a pager sending starting_after never gets page 1 again; the parameters the list takes still work', async () => {
  const seed = new Seed(app.owner, tenant.communityId);
  const plan = await seed.plan(await seed.tier());
  for (let i = 0; i < 3; i++) await seed.subscription(await seed.member(), plan);
  const first = await call(app.url, 'GET', '/v1/subscriptions?limit=2&status=active', { key: tenant.key });
  expect(first.status).toBe(200);
  expect(first.body.data).toHaveLength(2);
  const last = first.body.data[1].id as string;
  const stripeStyle = await call(app.url, 'GET', `/v1/subscriptions?limit=2&starting_after=${last}`, { key: tenant.key });
  expect([stripeStyle.status, stripeStyle.body.param]).toEqual([400, 'starting_after']);
  const next = await call(app.url, 'GET', `/v1/subscriptions?limit=2&status=active&cursor=${first.body.next_cursor}`, { key: tenant.key });
  expect(next.status).toBe(200);
  expect(next.body.data.map((s: { id: string }) => s.id)).not.toContain(last);
});

test('without a valid key the answer stays 401 unauthorized, whatever the query holds', async () => {
  const noKey = await call(app.url, 'GET', '/v1/plans?expand[]=plans');
  expect([noKey.status, noKey.body.code]).toEqual([401, 'unauthorized']);
});
