// Audit item 8: the HTTP details of the edge. Oversize bodies 413, oversize headers
// 431, both problem+json; 401 names its scheme; a known path with another method 405
// with Allow; the HTML pages refuse framing, script and sniffing; answers carrying
// secrets or pay tokens are not stored by caches.
import { createShop, externalSubject } from '../support/shop';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { ENCRYPTION_KEY } from '../support/webhooks';
import { raw } from './raw';

let app: TestApp;
let t: Tenant;
beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  t = await createTenant(app.owner);
});
afterAll(() => app.close());

const auth = () => ({ authorization: `Bearer ${t.key}` });
const isProblem = (r: { headers: Record<string, unknown> | Headers }) => {
  const ct = r.headers instanceof Headers ? r.headers.get('content-type') : r.headers['content-type'];
  return /^application\/problem\+json/.test(String(ct));
};

test('a body over 100 kB answers 413 payload_too_large, on /v1 and /mcp', async () => {
  const big = JSON.stringify({ tier_id: 'x'.repeat(200_000) });
  for (const path of ['/v1/checkout-links', '/mcp']) {
    const r = await raw(app.url, 'POST', path, { headers: { ...auth(), 'content-type': 'application/json' }, body: big });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: 'payload_too_large', status: 413 });
    expect(isProblem(r)).toBe(true);
  }
});

test('a 100 kB Authorization header or a URL over the header limit answers 431 as problem+json', async () => {
  const header = await raw(app.url, 'GET', '/v1/plans', { headers: { authorization: `Bearer ${'k'.repeat(100_000)}` } });
  expect(header.status).toBe(431);
  expect(header.body).toMatchObject({ code: 'request_header_too_large', status: 431 });
  expect(isProblem(header)).toBe(true);
  const types = Array.from({ length: 2000 }, () => 'member.entitlement.granted').join(',');
  const url = await raw(app.url, 'GET', `/v1/events?type=${types}`, { headers: auth() });
  expect(url.status).toBe(431);
  expect(url.body.code).toBe('request_header_too_large');
  // Within the header limit, a long filter is an ordinary validation error.
  const within = await call(app.url, 'GET', `/v1/events?type=${types.slice(0, 4000)}`, { key: t.key });
  expect(within.status).toBe(422);
  expect(within.body.code).toBe('invalid_request');
});

test('401 answers carry WWW-Authenticate: Bearer, on REST and MCP', async () => {
  for (const r of [
    await call(app.url, 'GET', '/v1/plans'),
    await call(app.url, 'GET', '/v1/plans', { key: 'bk_nope' }),
    await call(app.url, 'POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }),
  ]) {
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
  }
});

test('a known path with a method it does not take answers 405 method_not_allowed with Allow', async () => {
  const cases: [string, string, string][] = [
    ['PUT', '/v1/plans', 'GET, HEAD'],
    ['DELETE', '/v1/checkout-links', 'POST'],
    ['POST', '/v1/members/lookup', 'GET, HEAD'],
    ['PUT', '/v1/webhooks/endpoints/we_1', 'GET, HEAD, PATCH, DELETE'],
    ['POST', '/v1/subscriptions/sub_1', 'GET, HEAD'],
  ];
  for (const [method, path, allow] of cases) {
    const r = await call(app.url, method, path, { key: t.key });
    expect([method, path, r.status]).toEqual([method, path, 405]);
    expect(r.headers.get('allow')).toBe(allow);
    expect(r.body).toMatchObject({ code: 'method_not_allowed', status: 405 });
    expect(r.headers.get('ratelimit-remaining')).not.toBeNull();
  }
  const options = await call(app.url, 'OPTIONS', '/v1/plans', { key: t.key });
  expect(options.status).toBe(204);
  expect(options.headers.get('allow')).toBe('GET, HEAD');
  expect((await call(app.url, 'PUT', '/v1/nowhere', { key: t.key })).status).toBe(404);
});

test('the sandbox checkout and portal pages forbid framing, script and sniffing; API answers are nosniff', async () => {
  const shop = await createShop(app);
  const link = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject() } });
  const portal = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/portal-sessions`, { key: shop.key, body: {} });
  for (const url of [link.body.url, portal.body.url, `${app.url}/sandbox/checkout/cs_missing?t=x`]) {
    const page = await fetch(url);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'.*frame-ancestors 'none'/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
  }
  expect(link.headers.get('x-content-type-options')).toBe('nosniff');
  expect((await call(app.url, 'GET', '/v1/plans')).headers.get('x-content-type-options')).toBe('nosniff');
});

test('answers carrying pay tokens, portal urls or whsec_ secrets are Cache-Control: no-store', async () => {
  const shop = await createShop(app);
  const link = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject() } });
  const portal = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/portal-sessions`, { key: shop.key, body: {} });
  const endpoint = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: 'https://hooks.example.com/x' } });
  expect(endpoint.status).toBe(201);
  const rotated = await call(app.url, 'POST', `/v1/webhooks/endpoints/${endpoint.body.id}/rotate-secret`, { key: t.key });
  for (const r of [link, portal, endpoint, rotated]) {
    expect(r.status).toBeLessThan(300);
    expect(r.headers.get('cache-control')).toBe('no-store');
  }
});

test('checkout and portal tokens are stored as sha256 only; the pages find the session by hash', async () => {
  const shop = await createShop(app);
  const link = await call(app.url, 'POST', '/v1/checkout-links', { key: shop.key, body: { tier_id: shop.ids.tiers.silver, subject: externalSubject() } });
  const portal = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/portal-sessions`, { key: shop.key, body: {} });
  const tokenOf = (url: string) => new URL(url).searchParams.get('t')!;
  const { rows: cs } = await app.owner.query(
    `select access_token, encode(access_token_sha256, 'hex') as h, to_jsonb(c)::text as row from billing.checkout_sessions c where id = $1`, [link.body.checkout_id]);
  expect(cs[0].access_token).toBeNull();
  expect(cs[0].h).toBe(require('node:crypto').createHash('sha256').update(tokenOf(link.body.url)).digest('hex'));
  expect(cs[0].row).not.toContain(tokenOf(link.body.url).slice(0, 20));
  const { rows: ps } = await app.owner.query(
    `select access_token, access_token_sha256 is not null as hashed, to_jsonb(p)::text as row from billing.portal_sessions p where member_id = $1`, [link.body.member_id]);
  expect(ps[0].access_token).toBeNull();
  expect(ps[0].hashed).toBe(true);
  expect(ps[0].row.replace(portal.body.url.replace(/\//g, '\\/'), '')).not.toContain(tokenOf(portal.body.url).slice(0, 20));
  expect((await fetch(link.body.url)).status).toBe(200);
  expect((await fetch(portal.body.url)).status).toBe(200);
  const wrong = link.body.url.replace(/t=[^&]+/, 't=' + 'a'.repeat(64));
  expect((await fetch(wrong)).status).toBe(404);
  expect((await fetch(`${app.url}/sandbox/checkout/%00?t=x`)).status).toBe(404);
  expect((await fetch(`${app.url}/sandbox/portal/ps_1?t=%00`)).status).toBe(404);
});

test('an idle keep-alive connection is kept 65 s, longer than a proxy\'s 60, so the client closes it first', async () => {
  const r = await fetch(`${app.url}/healthz`);
  await r.text();
  expect(r.headers.get('keep-alive')).toBe('timeout=65');
});
