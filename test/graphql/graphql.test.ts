// GraphQL at /graphql ("Operators' own doors", item 1): the same bearer keys, the same
// rate bucket and the same RLS fence as REST; scopes enforced by the billing_graphql
// views in SQL (db/migrations/fixtures/functions/95-graphql.sql) and named in an error when a key
// lacks one; read-only; depth and cost limits (more in graphql-cost.test.ts).
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';
import { MAX_DEPTH } from '../../src/graphql/graphql-limits';

let app: TestApp;
let a: Tenant;
let b: Tenant;
const ids: Record<string, string> = {};

interface GqlReply { status: number; headers: Headers; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

async function gql(base: string, key: string | null, query: string, variables?: Record<string, unknown>): Promise<GqlReply> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${base}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  app = await startApp();
  a = await createTenant(app.owner);
  b = await createTenant(app.owner);
  for (const [t, name] of [[a, 'a'], [b, 'b']] as const) {
    const seed = new Seed(app.owner, t.communityId);
    const tier = await seed.tier({ name: `Tier ${name}` });
    const plan = await seed.plan(tier, { amount: name === 'a' ? 1000 : 2000 });
    const member = await seed.member({ discord: `d-${name}-${t.communityId}` });
    ids[`sub_${name}`] = await seed.subscription(member, plan);
    ids[`member_${name}`] = member;
    ids[`tier_${name}`] = tier;
  }
});
afterAll(() => app.close());

const SUBSCRIPTIONS = `{ subscriptions(first: 10) { totalCount nodes { id status memberByMemberId { id } planByPlanId { amountCents tierByTierId { name } } } } }`;

test('a key reads its own community through GraphQL, with relations', async () => {
  const r = await gql(app.url, a.key, SUBSCRIPTIONS);
  expect(r.status).toBe(200);
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.subscriptions).toEqual({
    totalCount: 1,
    nodes: [{ id: ids.sub_a, status: 'active', memberByMemberId: { id: ids.member_a }, planByPlanId: { amountCents: 1000, tierByTierId: { name: 'Tier a' } } }],
  });
  expect(r.headers.get('ratelimit-limit')).toBeTruthy();
  expect(r.headers.get('ratelimit-remaining')).toBeTruthy();
});

test('cross-community queries return nothing of the other community', async () => {
  const r = await gql(app.url, a.key, `query($id: String!, $m: String!, $t: String!) {
    subscriptionById(id: $id) { id } memberById(id: $m) { id } tierById(id: $t) { id }
    members(first: 100) { nodes { id } } tiers(first: 100) { nodes { id name } }
    memberIdentities(first: 100) { nodes { platformUid } } }`, { id: ids.sub_b, m: ids.member_b, t: ids.tier_b });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.subscriptionById).toBeNull();
  expect(r.body.data.memberById).toBeNull();
  expect(r.body.data.tierById).toBeNull();
  expect(r.body.data.members.nodes).toEqual([{ id: ids.member_a }]);
  expect(r.body.data.tiers.nodes).toEqual([{ id: ids.tier_a, name: 'Tier a' }]);
  expect(r.body.data.memberIdentities.nodes).toEqual([{ platformUid: `d-a-${a.communityId}` }]);
});

test('a key without subscriptions:read is told so, naming the scope, instead of reading an empty list', async () => {
  const limited = await createTenant(app.owner, ['members:read']);
  const seed = new Seed(app.owner, limited.communityId);
  const member = await seed.member();
  await seed.subscription(member, await seed.plan(await seed.tier()));
  const r = await gql(app.url, limited.key, `{ subscriptions(first: 10) { totalCount nodes { id } } members(first: 10) { nodes { id } } plans(first: 5) { totalCount } }`);
  expect(r.body.data).toBeUndefined();
  expect(r.body.errors.map((e: { extensions: { required_scope: string } }) => e.extensions.required_scope).sort()).toEqual(['plans:read', 'subscriptions:read']);
  expect(r.body.errors[0].message).toBe('This key lacks the scope subscriptions:read, which subscriptions needs.');
  expect(r.body.errors[0].extensions.code).toBe('MISSING_SCOPE');
  // What the key may read, it reads.
  const ok = await gql(app.url, limited.key, '{ members(first: 10) { nodes { id } } }');
  expect(ok.body.data.members.nodes).toEqual([{ id: member }]);
  // REST for the same key still answers 403 as before.
  expect((await call(app.url, 'GET', '/v1/subscriptions', { key: limited.key })).status).toBe(403);
});

test('a missing, unknown or revoked key is 401 with the same problem as REST', async () => {
  const rest = await call(app.url, 'GET', '/v1/plans', { key: null });
  const revoked = await createTenant(app.owner);
  await app.owner.query('update billing_private.api_keys set revoked_at = now() where id = $1', [revoked.keyId]);
  for (const key of [null, 'bk_live_nope', revoked.key]) {
    const r = await gql(app.url, key, SUBSCRIPTIONS);
    expect(r.status).toBe(401);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(r.body).toEqual(rest.body);
    expect(r.headers.get('ratelimit-limit')).toBeTruthy();
  }
});

test('GraphQL and REST draw on one rate bucket per key', async () => {
  const limited = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 3, ip_per_minute: 1e6, ip_burst: 1e6 } });
  try {
    const t = await createTenant(limited.owner);
    // One root field of at most 100 rows: one token, as a REST request.
    const cheap = '{ subscriptions(first: 10) { nodes { id status } } }';
    expect((await gql(limited.url, t.key, cheap)).status).toBe(200);
    expect((await call(limited.url, 'GET', '/v1/plans', { key: t.key })).status).toBe(200);
    expect((await gql(limited.url, t.key, cheap)).status).toBe(200);
    const gqlLimited = await gql(limited.url, t.key, cheap);
    expect(gqlLimited.status).toBe(429);
    expect(gqlLimited.body.code).toBe('rate_limited');
    expect(gqlLimited.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(Number(gqlLimited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(gqlLimited.headers.get('ratelimit-remaining')).toBe('0');
    expect((await call(limited.url, 'GET', '/v1/plans', { key: t.key })).status).toBe(429);
  } finally {
    await limited.close();
  }
});

test('there is no mutation type: the schema is read-only', async () => {
  const r = await gql(app.url, a.key, '{ __schema { mutationType { name } subscriptionType { name } } }');
  expect(r.body.data.__schema).toEqual({ mutationType: null, subscriptionType: null });
  const m = await gql(app.url, a.key, 'mutation { deleteSubscription(input: { id: "x" }) { clientMutationId } }');
  expect(m.body.errors?.[0]?.message).toBe('This API is read-only: it has no mutations.');
  expect(m.body.data).toBeUndefined();
});

test('only billing_graphql is exposed: no table, private schema, worker queue or API function', async () => {
  const r = await gql(app.url, a.key, '{ __schema { queryType { fields { name } } } }');
  const names: string[] = r.body.data.__schema.queryType.fields.map((f: { name: string }) => f.name);
  expect(names).toEqual(expect.arrayContaining(['subscriptions', 'invoices', 'paymentAttempts', 'memberEntitlements', 'events', 'mrrDailies']));
  expect(names.filter((n) => /apiKey|job|rateBucket|webhookSecret|apiCall|subscriptionsList|idempotency|webhook/i.test(n))).toEqual([]);
});

test(`a query deeper than ${MAX_DEPTH} levels is refused before it reaches the database`, async () => {
  let inner = 'id';
  for (let i = 0; i < 6; i++) inner = `memberByMemberId { subscriptionsByMemberId(first: 1) { nodes { ${inner} } } }`;
  const r = await gql(app.url, a.key, `{ subscriptions(first: 1) { nodes { ${inner} } } }`);
  expect(r.body.data).toBeUndefined();
  expect(r.body.errors.map((e: { extensions?: { code?: string } }) => e.extensions?.code)).toContain('QUERY_TOO_DEEP');
});

test('a page is at most 100 rows, and nested pages may not multiply past the row budget', async () => {
  const big = await gql(app.url, a.key, '{ subscriptions(first: 1000) { nodes { id } } }');
  expect(big.body.errors[0].message).toMatch(/from 0 to 100/);
  const nested = await gql(app.url, a.key, `{ members(first: 100) { nodes { subscriptions(first: 100) {
    nodes { invoices(first: 100) { nodes { id } } } } } } }`);
  expect(nested.body.errors[0].extensions.code).toBe('QUERY_TOO_COSTLY');
  const variable = await gql(app.url, a.key, 'query($n: Int) { subscriptions(first: $n) { nodes { id } } }', { n: 5000 });
  expect(variable.body.errors[0].message).toMatch(/page size/);
  const ok = await gql(app.url, a.key, 'query($n: Int) { subscriptions(first: $n) { nodes { id } } }', { n: 2 });
  expect(ok.body.data.subscriptions.nodes).toEqual([{ id: ids.sub_a }]);
});

test('connections page with keyset cursors', async () => {
  const seed = new Seed(app.owner, a.communityId);
  const tier = await seed.tier();
  const made = [];
  for (let i = 0; i < 5; i++) made.push(await seed.member());
  const all = [ids.member_a, ...made].sort();
  const seen: string[] = [];
  let after: string | null = null;
  for (;;) {
    const r: GqlReply = await gql(app.url, a.key, 'query($after: Cursor) { members(first: 2, after: $after, orderBy: PRIMARY_KEY_ASC) { nodes { id } pageInfo { hasNextPage endCursor } } }', { after });
    seen.push(...r.body.data.members.nodes.map((n: { id: string }) => n.id));
    if (!r.body.data.members.pageInfo.hasNextPage) break;
    after = r.body.data.members.pageInfo.endCursor;
  }
  expect(seen).toEqual(all);
  expect(tier).toBeTruthy();
});

test('Ruru (GraphiQL) is not served in production', async () => {
  // Served in development: test/main/main.test.ts loads it from `npm start` (Ruru loads
  // itself with a dynamic import, which jest's module sandbox cannot run).
  const prod = await startApp({ graphiql: false });
  try {
    const r = await fetch(`${prod.url}/graphiql`, { headers: { accept: 'text/html' } });
    expect(r.status).not.toBe(200);
    expect(r.headers.get('content-type')).not.toMatch(/html/);
  } finally {
    await prod.close();
  }
});
