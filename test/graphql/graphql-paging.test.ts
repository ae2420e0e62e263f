// Issue 27 item 2: a page limit cannot be nulled. A null or missing first/last reads
// the default page (DEFAULT_PAGE, REST's default limit), never every row; at most
// MAX_PAGE either way, on root connections and relation connections alike.
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';
import { DEFAULT_PAGE, MAX_PAGE } from '../../src/graphql/graphql-limits';

let app: TestApp;
let a: Tenant;
let tier: string;
const ROWS = DEFAULT_PAGE + 5;

interface GqlReply { status: number; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

async function gql(query: string, variables?: Record<string, unknown>): Promise<GqlReply> {
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${a.key}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  app = await startApp();
  a = await createTenant(app.owner);
  const seed = new Seed(app.owner, a.communityId);
  tier = await seed.tier();
  for (let i = 0; i < ROWS; i++) {
    await seed.member();
    await seed.plan(tier);
  }
});
afterAll(() => app.close());

test('a variable page size sent as null reads the default page, not every row (the audit\'s query)', async () => {
  const query = 'query($n: Int = 1) { members(first: $n) { nodes { id } pageInfo { hasNextPage } } }';
  const nulled = await gql(query, { n: null });
  expect(nulled.body.errors).toBeUndefined();
  expect(nulled.body.data.members.nodes).toHaveLength(DEFAULT_PAGE);
  expect(nulled.body.data.members.pageInfo.hasNextPage).toBe(true);
  // Left out, the variable's default applies.
  expect((await gql(query)).body.data.members.nodes).toHaveLength(1);
  expect((await gql(query, { n: 3 })).body.data.members.nodes).toHaveLength(3);
});

test('a missing or literal null first/last reads the default page', async () => {
  for (const args of ['', '(first: null)', '(last: null)', '(first: null, last: null)']) {
    const r = await gql(`{ members${args} { nodes { id } } }`);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.members.nodes).toHaveLength(DEFAULT_PAGE);
  }
  // last alone reads the last rows, not the last of a default first page.
  const all = (await gql(`{ members(first: ${MAX_PAGE}, orderBy: PRIMARY_KEY_ASC) { nodes { id } } }`)).body.data.members.nodes;
  expect(all).toHaveLength(ROWS);
  const last = await gql('{ members(last: 2, orderBy: PRIMARY_KEY_ASC) { nodes { id } } }');
  expect(last.body.data.members.nodes).toEqual(all.slice(-2));
});

test('a relation connection with a nulled page size reads the default page too', async () => {
  const r = await gql('query($n: Int, $t: String!) { tierById(id: $t) { plans(first: $n) { nodes { id } } } }', { n: null, t: tier });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.tierById.plans.nodes).toHaveLength(DEFAULT_PAGE);
  const deprecatedName = await gql('query($t: String!) { tierById(id: $t) { plansByTierId(last: null) { nodes { id } } } }', { t: tier });
  expect(deprecatedName.body.data.tierById.plansByTierId.nodes).toHaveLength(DEFAULT_PAGE);
});

test(`a page size over ${MAX_PAGE} or below 0 is refused, as a literal or a variable`, async () => {
  for (const [query, variables] of [
    [`{ members(first: ${MAX_PAGE + 1}) { nodes { id } } }`, undefined],
    ['query($n: Int) { members(last: $n) { nodes { id } } }', { n: MAX_PAGE + 1 }],
    ['query($n: Int) { members(first: $n) { nodes { id } } }', { n: -1 }],
  ] as const) {
    const r = await gql(query, variables);
    expect(r.body.data).toBeUndefined();
    expect(r.body.errors[0].message).toMatch(new RegExp(`a page size is a number from 0 to ${MAX_PAGE}`));
  }
});

test('nested pages given as variables count at their values, not at the maximum', async () => {
  // Counted at 100 each, these pages would be 1,010,100 rows, past the 25,000-row budget.
  const r = await gql('query($a: Int, $b: Int, $c: Int) { tiers(first: $a) { nodes { plans(first: $b) { nodes { subscriptions(first: $c) { nodes { id } } } } } } }', { a: 2, b: 2, c: 2 });
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.tiers.nodes[0].plans.nodes).toHaveLength(2);
  const big = await gql('query($a: Int, $b: Int, $c: Int) { tiers(first: $a) { nodes { plans(first: $b) { nodes { subscriptions(first: $c) { nodes { id } } } } } } }', { a: 100, b: 100, c: 100 });
  expect(big.body.errors[0].extensions.code).toBe('QUERY_TOO_COSTLY');
});
