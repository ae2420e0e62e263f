// Spec "Limits": MCP requests draw on the same per-key and per-IP buckets as REST.
// Accounting (docs/decisions/mcp-rate-accounting.md): one token per HTTP request, like REST; a
// tools/call request's token is the one its operation takes, not a second one.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { initializeMessage, rpc, toolCallMessage } from '../support/mcp-client';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  // One token a minute: nothing refills during the test, so counts are exact.
  app = await startApp({ trustProxy: true, rateLimits: { key_per_minute: 1, key_burst: 7, ip_per_minute: 1, ip_burst: 2 } });
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

const remaining = (r: { headers: Headers }) => Number(r.headers.get('ratelimit-remaining'));

test('each MCP request takes one token from the key\'s bucket, shared with REST, and an empty bucket answers HTTP 429', async () => {
  const steps: [string, number, () => Promise<{ status: number; headers: Headers }>][] = [
    ['initialize', 200, () => rpc(app.url, tenant.key, initializeMessage())],
    ['notifications/initialized', 202, () => rpc(app.url, tenant.key, { jsonrpc: '2.0', method: 'notifications/initialized' })],
    ['tools/list', 200, () => rpc(app.url, tenant.key, { jsonrpc: '2.0', id: 2, method: 'tools/list' })],
    ['tools/call', 200, () => rpc(app.url, tenant.key, toolCallMessage('list_plans'))],
    ['REST', 200, () => call(app.url, 'GET', '/v1/plans', { key: tenant.key })],
    ['tools/call with bad input', 200, () => rpc(app.url, tenant.key, toolCallMessage('list_members', { limit: 0 }))],
    ['tools/call the transport refuses', 406, () => rpc(app.url, tenant.key, toolCallMessage('list_plans'), { accept: 'application/json' })],
  ];
  const seen = [];
  for (const [step, , run] of steps) {
    const r = await run();
    seen.push({ step, status: r.status, remaining: remaining(r) });
  }
  expect(seen).toEqual(steps.map(([step, status], i) => ({ step, status, remaining: 6 - i })));

  for (const message of [toolCallMessage('list_plans'), initializeMessage()]) {
    const limited = await rpc(app.url, tenant.key, message);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.body).toMatchObject({ code: 'rate_limited', status: 429 });
  }
  const rest = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
  expect(rest.status).toBe(429);
});

test('requests with a bad key draw on the client IP\'s bucket, as in REST', async () => {
  const ip = { 'x-forwarded-for': '203.0.113.77' };
  const first = await rpc(app.url, null, initializeMessage(), ip);
  const second = await rpc(app.url, 'nonsense', toolCallMessage('list_plans'), ip);
  const third = await rpc(app.url, null, toolCallMessage('list_plans'), ip);
  expect([first.status, second.status, third.status]).toEqual([401, 401, 429]);
  expect(third.body).toMatchObject({ code: 'rate_limited' });
  // A valid key from that IP is not affected.
  expect((await rpc(app.url, (await createTenant(app.owner)).key, initializeMessage(), ip)).status).toBe(200);
});
