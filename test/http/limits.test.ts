// Spec "Limits": token buckets per key and per client IP, held in PostgreSQL.
import { call, createTenant, startApp, TestApp } from '../support/app';

// Counting tests refill slowly (one token per 20 s), so a slow, loaded machine cannot
// earn an extra token between requests; the refill test uses one token per second.
const slow = { key_per_minute: 3, key_burst: 5, ip_per_minute: 3, ip_burst: 3 };
const limits = { key_per_minute: 60, key_burst: 5, ip_per_minute: 60, ip_burst: 3 };
let app1: TestApp;
let app2: TestApp;
let refilling: TestApp;

beforeAll(async () => {
  app1 = await startApp({ rateLimits: slow });
  app2 = await startApp({ rateLimits: slow });
  refilling = await startApp({ rateLimits: limits });
});
afterAll(async () => { await app1.close(); await app2.close(); await refilling.close(); });

test('a key gets its burst, then 429 rate_limited with Retry-After, across two API processes', async () => {
  const t = await createTenant(app1.owner);
  const statuses: number[] = [];
  const remaining: string[] = [];
  for (let i = 0; i < 6; i++) {
    const r = await call(i % 2 ? app2.url : app1.url, 'GET', '/v1/plans', { key: t.key });
    statuses.push(r.status);
    remaining.push(r.headers.get('ratelimit-remaining')!);
    expect(r.headers.get('ratelimit-limit')).toBe('3');
    expect(Number(r.headers.get('ratelimit-reset'))).toBeGreaterThanOrEqual(0);
    if (r.status === 429) {
      expect(r.body).toMatchObject({ code: 'rate_limited', status: 429 });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(r.headers.get('content-type')).toMatch(/problem\+json/);
    }
  }
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  expect(remaining.slice(0, 5)).toEqual(['4', '3', '2', '1', '0']);
});

test('errors carry the rate headers too, and count against the key', async () => {
  const t = await createTenant(app1.owner);
  const r = await call(app1.url, 'GET', '/v1/plans/tier_00000000000000000000000000', { key: t.key });
  expect(r.status).toBe(404);
  expect(r.headers.get('ratelimit-remaining')).toBe('4');
  const unknownRoute = await call(app1.url, 'GET', '/v1/nope', { key: t.key });
  expect(unknownRoute.status).toBe(404);
  expect(unknownRoute.body.code).toBe('not_found');
  expect(unknownRoute.headers.get('ratelimit-remaining')).toBe('3');
});

test('the bucket refills continuously (one token per second at 60 per minute)', async () => {
  const t = await createTenant(refilling.owner);
  let status = 200;
  for (let i = 0; i < 10 && status === 200; i++) status = (await call(refilling.url, 'GET', '/v1/plans', { key: t.key })).status;
  expect(status).toBe(429);
  await new Promise((r) => setTimeout(r, 1100));
  expect((await call(refilling.url, 'GET', '/v1/plans', { key: t.key })).status).toBe(200);
});

test('missing or invalid keys are limited per client IP, with the 401 body until the bucket is empty', async () => {
  // The IP bucket is shared by every unauthenticated request from 127.0.0.1 in this
  // process's database, so drain it from a clean state: use a distinct forwarded IP.
  const app = await startApp({ rateLimits: slow, trustProxy: true });
  try {
    const headers = { 'x-forwarded-for': '198.51.100.23' };
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      const r = await call(app.url, 'GET', '/v1/plans', { key: i % 2 ? 'garbage' : null, headers });
      statuses.push(r.status);
      expect(r.headers.get('ratelimit-limit')).toBe('3');
    }
    expect(statuses).toEqual([401, 401, 401, 429]);
    // Valid keys are not limited by the IP bucket.
    const t = await createTenant(app.owner);
    expect((await call(app.url, 'GET', '/v1/plans', { key: t.key, headers })).status).toBe(200);
  } finally {
    await app.close();
  }
});
