// Issue 27 item 3: a JSON body nested deeper than MAX_JSON_DEPTH is a 400
// invalid_request problem on every door that takes JSON (REST /v1, MCP /mcp, GraphQL
// /graphql), in development and production, never a 500 from a walker's stack
// overflowing (a 40 kB body nests 20,000 levels). The NUL/surrogate scan is iterative.
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { unstorablePath } from '../../src/operations/executor';
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from '../../src/web/json-body';
import { toolCallMessage } from '../support/mcp-client';
import { raw } from './raw';

let dev: TestApp;
let prod: TestApp;
let t: Tenant;
beforeAll(async () => {
  dev = await startApp();
  prod = await startApp({ production: true, graphiql: false, publicBaseUrl: 'https://billing.example.com' }, { NODE_ENV: 'production' });
  t = await createTenant(dev.owner);
});
afterAll(async () => {
  await dev.close();
  await prod.close();
});

const nested = (levels: number, inner = '"x"') => '['.repeat(levels) + inner + ']'.repeat(levels);
const DEEP = nested(20_000);

const json = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });
const mcpHeaders = (key: string) => ({ ...json(key), accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' });

function expectDepthRefusal(r: { status: number; headers: Record<string, unknown>; body: any }) { // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(r.status).toBe(400);
  expect(String(r.headers['content-type'])).toMatch(/^application\/problem\+json/);
  expect(r.body).toMatchObject({ code: 'invalid_request', status: 400 });
  expect(r.body.detail).toContain(`more than ${MAX_JSON_DEPTH} levels`);
}

describe.each([['development', () => dev], ['production', () => prod]])('in %s', (_name, appOf) => {
  test('REST: a 40 kB body nested 20,000 levels deep answers 400 invalid_request, after authentication', async () => {
    const body = `{"tier_id":${DEEP}}`;
    expect(body.length).toBeGreaterThan(40_000);
    expect(body.length).toBeLessThan(100_000);
    const r = await raw(appOf().url, 'POST', '/v1/checkout-links', { headers: json(t.key), body });
    expectDepthRefusal(r);
    expect(r.headers['ratelimit-remaining']).toBeDefined();
    const whole = await raw(appOf().url, 'POST', '/v1/checkout-links', { headers: json(t.key), body: DEEP });
    expectDepthRefusal(whole);
    const anonymous = await raw(appOf().url, 'POST', '/v1/checkout-links', { headers: { 'content-type': 'application/json' }, body });
    expect(anonymous.status).toBe(401);
  });

  test('MCP: a JSON-RPC message with arguments nested 20,000 levels deep answers 400 invalid_request', async () => {
    const message = JSON.stringify(toolCallMessage('create_checkout_link', { tier_id: 'PLACEHOLDER' })).replace('"PLACEHOLDER"', DEEP);
    const r = await raw(appOf().url, 'POST', '/mcp', { headers: mcpHeaders(t.key), body: message });
    expectDepthRefusal(r);
    const batch = await raw(appOf().url, 'POST', '/mcp', { headers: mcpHeaders(t.key), body: DEEP });
    expectDepthRefusal(batch);
  });

  test('GraphQL: variables nested 20,000 levels deep answer 400 invalid_request', async () => {
    const body = `{"query":"query($v: Int) { __typename }","variables":{"v":${DEEP}}}`;
    const r = await raw(appOf().url, 'POST', '/graphql', { headers: json(t.key), body });
    expectDepthRefusal(r);
  });
});

test(`bodies nested exactly ${MAX_JSON_DEPTH} levels pass the bound on each door (and get their usual answer)`, async () => {
  // Depth MAX_JSON_DEPTH: the outer object plus MAX_JSON_DEPTH - 1 arrays.
  const rest = await raw(dev.url, 'POST', '/v1/checkout-links', { headers: json(t.key), body: `{"tier_id":${nested(MAX_JSON_DEPTH - 1)}}` });
  expect(rest.status).toBe(422);
  const gql = await raw(dev.url, 'POST', '/graphql', {
    headers: json(t.key), body: `{"query":"{ __typename }","variables":{"v":${nested(MAX_JSON_DEPTH - 2)}}}`,
  });
  expect(gql.status).toBe(200);
  expect(gql.body).toEqual({ data: { __typename: 'Query' } });
  const mcp = await raw(dev.url, 'POST', '/mcp', {
    headers: mcpHeaders(t.key),
    // message > params > arguments > tier_id: 3 objects, then arrays.
    body: JSON.stringify(toolCallMessage('create_checkout_link', { tier_id: 'P' })).replace('"P"', nested(MAX_JSON_DEPTH - 3)),
  });
  expect(mcp.status).toBe(200);
  expect(mcp.body.result.isError).toBe(true);
});

test('the depth scan counts brackets outside strings only, escapes included', () => {
  const enc = (s: string) => Buffer.from(s, 'utf8');
  expect(jsonNestsDeeperThan(enc(nested(3)), 3)).toBe(false);
  expect(jsonNestsDeeperThan(enc(nested(4)), 3)).toBe(true);
  expect(jsonNestsDeeperThan(enc(`{"a":"${'['.repeat(1000)}"}`), 3)).toBe(false);
  expect(jsonNestsDeeperThan(enc(`{"a\\"[[[[":"\\\\"}`), 1)).toBe(false);
  expect(jsonNestsDeeperThan(enc(`{"a":"\\\\",${'['.repeat(5)}`), 3)).toBe(true);
  expect(jsonNestsDeeperThan(enc('[{},{},{},{},{}]'), 2)).toBe(false);
  expect(jsonNestsDeeperThan(enc(DEEP))).toBe(true);
});

test('the NUL/surrogate scan walks a value 100,000 levels deep without recursion', () => {
  let value: unknown = 'a\u0000b';
  for (let i = 0; i < 100_000; i++) value = { k: value };
  const found = unstorablePath(value);
  expect(found?.split('.').length).toBe(100_000);
  expect(unstorablePath({ a: [1, { b: 'ok' }], c: { '\ud800': 1 } })).toBe('c.\ud800');
  expect(unstorablePath({ a: { b: 'ok' }, c: ['x', 'y\u0000'] })).toBe('c.1');
});
