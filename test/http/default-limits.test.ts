// Spec "Limits" with the DEFAULT limits, not lifted (every other test lifts or narrows
// them): per API key 300 requests per minute with a burst of 60, per client IP 20 per
// minute with a burst of 10 (missing or invalid keys only), RateLimit-Remaining never
// above 60.
import { loadConfig } from '../../src/core/config';
import { call, createTenant, Reply, startApp, TestApp } from '../support/app';

let app: TestApp;
const defaults = loadConfig({ NODE_ENV: 'production' }).rateLimits;

beforeAll(async () => { app = await startApp({ rateLimits: defaults, trustProxy: true }); });
afterAll(() => app.close());

test('the defaults are the spec\'s: 300 per minute with a burst of 60 per key, 20 per minute with a burst of 10 per IP', () => {
  expect(defaults).toEqual({ key_per_minute: 300, key_burst: 60, ip_per_minute: 20, ip_burst: 10 });
});

test('a key gets its burst of 60 (plus what refills at 5 per second), then 429 with Retry-After; Remaining never above 60', async () => {
  const t = await createTenant(app.owner);
  const replies: Reply[] = [];
  const started = Date.now();
  // Batches of 10 at once until refused (bounded: far more than burst plus refill).
  while (!replies.some((r) => r.status === 429) && replies.length < 200) {
    replies.push(...await Promise.all(Array.from({ length: 10 }, () => call(app.url, 'GET', '/v1/plans', { key: t.key }))));
  }
  const seconds = (Date.now() - started) / 1000;
  const ok = replies.filter((r) => r.status === 200).length;
  expect(ok).toBeGreaterThanOrEqual(60);
  expect(ok).toBeLessThanOrEqual(60 + Math.ceil(seconds * 5) + 1);
  for (const r of replies) {
    expect(r.headers.get('ratelimit-limit')).toBe('300');
    const remaining = Number(r.headers.get('ratelimit-remaining'));
    expect(remaining).toBeGreaterThanOrEqual(0);
    expect(remaining).toBeLessThanOrEqual(59);
    expect(Number(r.headers.get('ratelimit-reset'))).toBeLessThanOrEqual(12); // 60 tokens at 5 per second
  }
  const refused = replies.find((r) => r.status === 429)!;
  expect(refused.body).toMatchObject({ code: 'rate_limited', status: 429 });
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(1); // one token comes back within 0.2 s
});

test('a bucket idle for an hour holds 60 tokens, not an hour of refill: Remaining is 59 after one request', async () => {
  const t = await createTenant(app.owner);
  const first = await call(app.url, 'GET', '/v1/plans', { key: t.key });
  expect(first.headers.get('ratelimit-remaining')).toBe('59');
  // An hour earlier for the row: its last update and the end of the lease it records
  // (the bucket folds its refill over its leases' ends, 000068).
  await app.owner.query(`update billing_private.rate_buckets set updated_at = updated_at - interval '1 hour',
      leases = (select coalesce(jsonb_agg(jsonb_set(e, '{u}', to_jsonb((e->>'u')::float8 - 3600))), '[]') from jsonb_array_elements(leases) e)
    where bucket = $1`, [`key:${t.keyId}`]);
  // An hour passed for the bucket; for this process's lease of the key's tokens
  // (src/operations/token-leases.ts), time passing means its lifetime runs out.
  await new Promise((resolve) => setTimeout(resolve, app.config.tokenLeaseMs + 50));
  const later = await call(app.url, 'GET', '/v1/plans', { key: t.key });
  expect(later.headers.get('ratelimit-remaining')).toBe('59');
  expect(later.headers.get('ratelimit-reset')).toBe('1');
});

test('missing or invalid keys from one client IP get a burst of 10, then 429; a valid key from that IP is not counted there', async () => {
  // An address no other test file uses: IP buckets are shared by the whole database.
  const headers = { 'x-forwarded-for': '203.0.113.201' };
  const t = await createTenant(app.owner);
  const statuses: number[] = [];
  const started = Date.now();
  for (let i = 0; !statuses.includes(429) && i < 20; i++) {
    if (i === 5) expect((await call(app.url, 'GET', '/v1/plans', { key: t.key, headers })).status).toBe(200);
    const r = await call(app.url, 'GET', '/v1/plans', { key: i % 2 ? 'garbage' : null, headers });
    statuses.push(r.status);
    expect(r.headers.get('ratelimit-limit')).toBe('20');
    expect(Number(r.headers.get('ratelimit-remaining'))).toBeLessThanOrEqual(9);
    if (r.status === 429) expect([r.body.code, Number(r.headers.get('retry-after')) >= 1]).toEqual(['rate_limited', true]);
  }
  // One token per 3 seconds refills meanwhile.
  const refilled = Math.floor((Date.now() - started) / 3000);
  expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
  expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(10 + refilled);
  expect(statuses).toContain(429);
});
