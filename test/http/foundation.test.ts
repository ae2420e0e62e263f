import { call, createTenant, startApp, TestApp, Tenant } from '../support/app';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

test('GET /v1/plans answers a list for a valid key, with rate and version headers', async () => {
  const r = await call(app.url, 'GET', '/v1/plans', { key: tenant.key });
  expect(r.status).toBe(200);
  expect(r.body).toEqual({ data: [] });
  expect(r.headers.get('api-version')).toBe('2026-08');
  expect(r.headers.get('ratelimit-limit')).toBeTruthy();
});

test('missing, malformed, unknown and revoked keys answer byte-identical 401 bodies', async () => {
  const bodies = [];
  for (const key of [null, 'nonsense', 'bk_AAAAAAAA_' + 'x'.repeat(43)]) {
    const r = await call(app.url, 'GET', '/v1/plans', { key });
    expect(r.status).toBe(401);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    bodies.push(r.text);
  }
  expect(new Set(bodies).size).toBe(1);
  expect(JSON.parse(bodies[0])).toMatchObject({ code: 'unauthorized', status: 401 });
});
