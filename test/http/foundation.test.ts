import { revokeKey } from '../../src/domain/communities/community-admin';
import { operations } from '../../src/operations';
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

test('a revoked key answers 401 on the next request, with the same body as an unknown key', async () => {
  const t = await createTenant(app.owner);
  expect((await call(app.url, 'GET', '/v1/plans', { key: t.key })).status).toBe(200);
  await revokeKey(app.owner, t.keyId);
  const revoked = await call(app.url, 'GET', '/v1/plans', { key: t.key });
  const unknown = await call(app.url, 'GET', '/v1/plans', { key: 'bk_AAAAAAAA_' + 'x'.repeat(43) });
  expect(revoked.status).toBe(401);
  expect(revoked.text).toBe(unknown.text);
});

test('a key lacking the route scope answers 403 missing_scope naming the scope', async () => {
  const t = await createTenant(app.owner, ['members:read']);
  const r = await call(app.url, 'GET', '/v1/plans', { key: t.key });
  expect(r.status).toBe(403);
  expect(r.body).toMatchObject({ code: 'missing_scope', status: 403, required_scope: 'plans:read' });
  expect(r.body.detail).toContain('plans:read');
  expect(r.body.type).toMatch(/#missing_scope$/);
});

test('scope is checked before input validation', async () => {
  const t = await createTenant(app.owner, ['members:read']);
  const r = await call(app.url, 'GET', '/v1/plans/%20', { key: t.key });
  expect(r.status).toBe(403);
});

test('Api-Version: the current one is accepted, an unknown one answers 400 invalid_request', async () => {
  const ok = await call(app.url, 'GET', '/v1/plans', { key: tenant.key, headers: { 'api-version': '2026-08' } });
  expect(ok.status).toBe(200);
  const old = await call(app.url, 'GET', '/v1/plans', { key: tenant.key, headers: { 'api-version': '2026-07' } });
  expect(old.status).toBe(400);
  expect(old.body).toMatchObject({ code: 'invalid_request', param: 'Api-Version' });
  expect(old.headers.get('api-version')).toBe('2026-08');
  expect(old.headers.get('ratelimit-remaining')).not.toBeNull();
});

test('the OpenAPI document is 3.1, versioned 2026-08, and lists every operation', async () => {
  const r = await call(app.url, 'GET', '/v1/openapi.json');
  expect(r.status).toBe(200);
  expect(r.body.openapi).toBe('3.1.0');
  expect(r.body.info.version).toBe('2026-08');
  for (const op of operations) {
    expect(r.body.paths[op.path]?.[op.method.toLowerCase()]?.operationId).toBe(op.name);
  }
});

test('unknown routes answer 404 not_found; invalid JSON answers 400 invalid_request', async () => {
  const r = await call(app.url, 'GET', '/v1/nothing-here', { key: tenant.key });
  expect(r.status).toBe(404);
  expect(r.body).toMatchObject({ code: 'not_found', type: expect.stringMatching(/#not_found$/), title: 'Not found' });
  const bad = await call(app.url, 'POST', '/v1/plans', { key: tenant.key, rawBody: '{"a":', headers: { 'content-type': 'application/json' } });
  expect(bad.status).toBe(400);
  expect(bad.body.code).toBe('invalid_request');
});

test('a tampered cursor answers 400 invalid_request', async () => {
  const list = operations.find((op) => op.query?.shape && 'cursor' in op.query.shape && op.method === 'GET' && !op.path.includes('{'));
  if (!list) throw new Error('no paginated list operation is registered');
  for (const cursor of ['abc', Buffer.from('{"id":1}').toString('base64url'), Buffer.from('{"id":"x\' or 1=1"}').toString('base64url')]) {
    const r = await call(app.url, 'GET', `${list.path}?cursor=${cursor}`, { key: tenant.key });
    expect([list.path, r.status, r.body.code]).toEqual([list.path, 400, 'invalid_request']);
  }
});

test('/healthz answers without a key; /readyz checks the database', async () => {
  expect((await call(app.url, 'GET', '/healthz')).status).toBe(200);
  expect((await call(app.url, 'GET', '/readyz')).status).toBe(200);
});
