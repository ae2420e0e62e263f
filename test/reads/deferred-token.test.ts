// billing.api_call takes the key's rate token after a read operation runs (so one
// key's requests do not queue on its bucket row). The limit must hold all the same,
// also for concurrent requests, and an empty bucket answers 429 without the answer.
import { call, createTenant, startApp, TestApp } from '../support/app';

let app: TestApp;

beforeAll(async () => {
  app = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 5, ip_per_minute: 1000, ip_burst: 1000 } });
});
afterAll(() => app.close());

test('concurrent reads of one key get exactly the burst, then 429 with Retry-After', async () => {
  const tenant = await createTenant(app.owner);
  const replies = await Promise.all(Array.from({ length: 20 }, () => call(app.url, 'GET', '/v1/subscriptions', { key: tenant.key })));
  const ok = replies.filter((r) => r.status === 200);
  const limited = replies.filter((r) => r.status === 429);
  expect(ok).toHaveLength(5);
  expect(limited).toHaveLength(15);
  expect(limited[0].body.code).toBe('rate_limited');
  expect(limited[0].body.data).toBeUndefined();
  expect(Number(limited[0].headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(ok.map((r) => Number(r.headers.get('ratelimit-remaining'))).sort()).toEqual([0, 1, 2, 3, 4]);
});

test('errors and missing scopes still take a token', async () => {
  const tenant = await createTenant(app.owner, ['members:read']);
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await call(app.url, 'GET', '/v1/members/mem_00000000000000000000000000', { key: tenant.key })).status);
  for (let i = 0; i < 3; i++) statuses.push((await call(app.url, 'GET', '/v1/subscriptions', { key: tenant.key })).status);
  expect(statuses).toEqual([404, 404, 404, 403, 403, 429]);
});
