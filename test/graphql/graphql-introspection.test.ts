// Issue 27 item 10: production is closed by default. GraphQL introspection is the
// operator's choice (GRAPHQL_INTROSPECTION, read once in src/core/config.ts), off by
// default when NODE_ENV=production, on by default elsewhere.
import { loadConfig } from '../../src/core/config';
import { createTenant, startApp, Tenant, TestApp } from '../support/app';

interface GqlReply { status: number; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

async function gql(app: TestApp, t: Tenant, query: string): Promise<GqlReply> {
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${t.key}` },
    body: JSON.stringify({ query }),
  });
  return { status: res.status, body: await res.json() };
}

test('GRAPHQL_INTROSPECTION: off by default in production, on elsewhere, and the operator decides', () => {
  expect(loadConfig({ NODE_ENV: 'production' }).graphqlIntrospection).toBe(false);
  expect(loadConfig({ NODE_ENV: 'production', GRAPHQL_INTROSPECTION: 'true' }).graphqlIntrospection).toBe(true);
  expect(loadConfig({ NODE_ENV: 'development' }).graphqlIntrospection).toBe(true);
  expect(loadConfig({}).graphqlIntrospection).toBe(true);
  expect(loadConfig({ GRAPHQL_INTROSPECTION: 'false' }).graphqlIntrospection).toBe(false);
  expect(loadConfig({ GRAPHQL_INTROSPECTION: '0' }).graphqlIntrospection).toBe(false);
  expect(() => loadConfig({ GRAPHQL_INTROSPECTION: 'yes please' })).toThrow(/GRAPHQL_INTROSPECTION: expected true or false/);
});

describe('with introspection off (production\'s default)', () => {
  let app: TestApp;
  let t: Tenant;
  beforeAll(async () => {
    const production = loadConfig({ NODE_ENV: 'production' });
    app = await startApp({ graphqlIntrospection: production.graphqlIntrospection, graphiql: production.graphiql });
    t = await createTenant(app.owner);
  });
  afterAll(() => app.close());

  test('__schema and __type are refused for any valid key, naming the setting', async () => {
    for (const query of ['{ __schema { types { name } } }', '{ __type(name: "Subscription") { fields { name } } }',
      '{ plans(first: 1) { nodes { id } } s: __schema { queryType { name } } }']) {
      const r = await gql(app, t, query);
      expect(r.body.data).toBeUndefined();
      expect(r.body.errors).toEqual([expect.objectContaining({ extensions: { code: 'INTROSPECTION_DISABLED' } })]);
      expect(r.body.errors[0].message).toMatch(/GRAPHQL_INTROSPECTION/);
    }
    // Hidden in a fragment too.
    const fragment = await gql(app, t, '{ ...Q } fragment Q on Query { __schema { types { name } } }');
    expect(fragment.body.errors[0].extensions.code).toBe('INTROSPECTION_DISABLED');
  });

  test('queries, and __typename, still answer', async () => {
    const r = await gql(app, t, '{ __typename plans(first: 1) { __typename nodes { id } } }');
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data).toEqual({ __typename: 'Query', plans: { __typename: 'PlanConnection', nodes: [] } });
  });
});

test('with introspection on, a key reads the schema', async () => {
  const app = await startApp({ graphqlIntrospection: true });
  try {
    const t = await createTenant(app.owner);
    const r = await gql(app, t, '{ __schema { queryType { name } } }');
    expect(r.body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  } finally {
    await app.close();
  }
});
