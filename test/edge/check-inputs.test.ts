// The entitlement check's one-statement path (migration 000065) against hostile query
// strings: NUL bytes, an invalid UTF-8 sequence (a lone surrogate's bytes), a huge uid,
// a platform it does not know, a pair repeated, and many checks of one member at once.
// Every answer is a 200 or a problem+json 4xx, never a 500.
import { createTenant, startApp, TestApp, Tenant } from '../support/app';
import { raw } from './raw';

let app: TestApp;
let tenant: Tenant;
beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

const queries = [
  'platform=discord&platform_uid=%00',
  'platform=discord&platform_uid=a%00b',
  'platform=%00&platform_uid=1',
  'platform=discord&platform_uid=%ED%A0%80',
  'platform=discord&platform_uid=%F0%9F',
  `platform=discord&platform_uid=${'9'.repeat(20_000)}`,
  'platform=myspace&platform_uid=1',
  'platform=discord&platform_uid=1&platform=telegram&platform_uid=2',
  'platform=discord&platform_uid=1&tier_id=%00',
  'platform=discord&platform_uid=1&namespace=app&external_user_id=u',
  'platform[$gt]=&platform_uid=1',
];

test.each(queries)('GET /v1/entitlements/check?%s answers without a 500', async (q) => {
  const r = await raw(app.url, 'GET', `/v1/entitlements/check?${q}`, { headers: { authorization: `Bearer ${tenant.key}` } });
  expect([q.slice(0, 60), r.status < 500]).toEqual([q.slice(0, 60), true]);
  if (r.status >= 400) expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
});

test('fifty checks of one member at once all answer 200 alike', async () => {
  const answers = await Promise.all(Array.from({ length: 50 }, () =>
    raw(app.url, 'GET', '/v1/entitlements/check?platform=discord&platform_uid=42', { headers: { authorization: `Bearer ${tenant.key}` } })));
  expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200]));
  expect(new Set(answers.map((a) => a.text)).size).toBe(1);
});
