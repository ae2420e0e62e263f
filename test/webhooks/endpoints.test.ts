// Webhook endpoint management (spec: REST endpoints, Limits, Errors) and the test ping.
import { Webhook } from 'standardwebhooks';
import { EVENT_TYPES } from '../../src/domain/events/event-types';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { ENCRYPTION_KEY, Receiver, startReceiver, verify } from '../support/webhooks';

let app: TestApp;
let tenant: Tenant;
let receiver: Receiver;

beforeAll(async () => {
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  tenant = await createTenant(app.owner);
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
  await app.close();
});

const ENDPOINT_FIELDS = ['created_at', 'description', 'disabled_reason', 'enabled', 'event_types', 'id', 'updated_at', 'url'];

async function freshTenant(scopes?: Parameters<typeof createTenant>[1]) {
  return createTenant(app.owner, scopes);
}

test('create answers 201 with the endpoint and a whsec_ secret of at least 24 random bytes, shown only then', async () => {
  const t = await freshTenant();
  const r = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url, description: 'main', event_types: ['member.entitlement.granted'] } });
  expect(r.status).toBe(201);
  expect(Object.keys(r.body).sort()).toEqual([...ENDPOINT_FIELDS, 'secret'].sort());
  expect(r.body).toMatchObject({ url: receiver.url, description: 'main', event_types: ['member.entitlement.granted'], enabled: true, disabled_reason: null });
  expect(r.body.id).toMatch(/^we_/);
  expect(r.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  expect(Buffer.from(r.body.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);

  const got = await call(app.url, 'GET', `/v1/webhooks/endpoints/${r.body.id}`, { key: t.key });
  expect(got.status).toBe(200);
  expect(Object.keys(got.body).sort()).toEqual(ENDPOINT_FIELDS);
  const list = await call(app.url, 'GET', '/v1/webhooks/endpoints', { key: t.key });
  expect(list.body).toEqual({ data: [got.body], next_cursor: null });
  expect(list.text).not.toContain(r.body.secret.slice(6));
});

test('the secret is stored encrypted, and billing_api cannot read billing_private.webhook_secrets', async () => {
  const t = await freshTenant();
  const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
  const { rows } = await app.owner.query('select secret_ciphertext from billing_private.webhook_secrets where endpoint_id = $1', [e.id]);
  expect(rows).toHaveLength(1);
  expect(rows[0].secret_ciphertext).toMatch(/^v1:/);
  expect(rows[0].secret_ciphertext).not.toContain(e.secret.slice(6));
  expect(rows[0].secret_ciphertext).not.toContain(e.secret.slice(6, 20));
  await expect(app.api.query('select * from billing_private.webhook_secrets')).rejects.toThrow(/permission denied/);
});

test('a sixth endpoint answers 422 endpoint_limit', async () => {
  const t = await freshTenant();
  for (let i = 0; i < 5; i++) {
    expect((await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: `${receiver.url}/${i}` } })).status).toBe(201);
  }
  const r = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } });
  expect(r.status).toBe(422);
  expect(r.body.code).toBe('endpoint_limit');
});

test('concurrent creates never exceed 5 endpoints', async () => {
  const t = await freshTenant();
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
    call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: `${receiver.url}/${i}` } })));
  expect(results.filter((r) => r.status === 201)).toHaveLength(5);
  expect(results.filter((r) => r.status === 422 && r.body.code === 'endpoint_limit')).toHaveLength(7);
  const { rows } = await app.owner.query('select count(*)::int as n from billing.webhook_endpoints where community_id = $1', [t.communityId]);
  expect(rows[0].n).toBe(5);
});

test('invalid bodies answer 422 invalid_request naming the field', async () => {
  const cases: [unknown, string][] = [
    [{ url: 'ftp://example.com/x' }, 'url'],
    [{ url: 'not a url' }, 'url'],
    [{}, 'url'],
    [{ url: receiver.url, event_types: ['Not A Type'] }, 'event_types.0'],
    [{ url: receiver.url, event_types: ['member.entitlement.granted', 'member.entitlement.exploded'] }, 'event_types.1'],
    [{ url: receiver.url, event_types: ['member.created', 'member.created'] }, 'event_types'],
    [{ url: receiver.url, secret: 'whsec_x' }, 'secret'],
    [{ url: receiver.url, enabled: 'yes' }, 'enabled'],
  ];
  for (const [body, param] of cases) {
    const r = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: tenant.key, body });
    expect([r.status, r.body.code, r.body.param]).toEqual([422, 'invalid_request', param]);
  }
});

test('with private URLs not allowed, only https to public hosts is accepted', async () => {
  const strict = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: false });
  try {
    const t = await createTenant(strict.owner);
    for (const url of ['http://example.com/hook', 'https://127.0.0.1/hook', 'https://10.1.2.3/hook', 'https://192.168.0.1/',
      'https://[::1]/hook', 'https://localhost/hook', 'https://169.254.169.254/latest', 'https://[::ffff:127.0.0.1]/']) {
      const r = await call(strict.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url } });
      expect([url, r.status, r.body.param]).toEqual([url, 422, 'url']);
    }
    const ok = await call(strict.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: 'https://hooks.example.com/billing' } });
    expect(ok.status).toBe(201);
    const patch = await call(strict.url, 'PATCH', `/v1/webhooks/endpoints/${ok.body.id}`, { key: t.key, body: { url: 'https://127.0.0.1/' } });
    expect([patch.status, patch.body.param]).toEqual([422, 'url']);
  } finally {
    await strict.close();
  }
});

test('event_types accepts every catalog type and webhook_endpoint.disabled', async () => {
  const t = await freshTenant();
  const r = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url, event_types: [...EVENT_TYPES] } });
  expect(EVENT_TYPES).toContain('webhook_endpoint.disabled');
  expect(r.status).toBe(201);
  expect(r.body.event_types).toEqual([...EVENT_TYPES]);
});

test('PATCH changes only the fields sent; enabled false records disabled_reason manual, true clears it', async () => {
  const t = await freshTenant();
  const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url, description: 'd', event_types: ['member.entitlement.granted'] } })).body;
  let r = await call(app.url, 'PATCH', `/v1/webhooks/endpoints/${e.id}`, { key: t.key, body: { enabled: false } });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ url: receiver.url, description: 'd', event_types: ['member.entitlement.granted'], enabled: false, disabled_reason: 'manual' });
  r = await call(app.url, 'PATCH', `/v1/webhooks/endpoints/${e.id}`, { key: t.key, body: { enabled: true, event_types: [], description: null, url: `${receiver.url}/2` } });
  expect(r.body).toMatchObject({ url: `${receiver.url}/2`, description: null, event_types: [], enabled: true, disabled_reason: null });
  r = await call(app.url, 'PATCH', `/v1/webhooks/endpoints/${e.id}`, { key: t.key, body: { secret: 'x' } });
  expect([r.status, r.body.param]).toEqual([422, 'secret']);
});

test('DELETE answers 204 and the endpoint is gone', async () => {
  const t = await freshTenant();
  const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
  const r = await call(app.url, 'DELETE', `/v1/webhooks/endpoints/${e.id}`, { key: t.key });
  expect(r.status).toBe(204);
  expect(r.text).toBe('');
  expect((await call(app.url, 'GET', `/v1/webhooks/endpoints/${e.id}`, { key: t.key })).status).toBe(404);
  expect((await call(app.url, 'DELETE', `/v1/webhooks/endpoints/${e.id}`, { key: t.key })).status).toBe(404);
});

test("another community's endpoint answers 404 on every route", async () => {
  const owner = await freshTenant();
  const other = await freshTenant();
  const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: owner.key, body: { url: receiver.url } })).body;
  const routes: [string, string, unknown?][] = [
    ['GET', `/v1/webhooks/endpoints/${e.id}`], ['PATCH', `/v1/webhooks/endpoints/${e.id}`, { enabled: false }],
    ['DELETE', `/v1/webhooks/endpoints/${e.id}`], ['POST', `/v1/webhooks/endpoints/${e.id}/rotate-secret`],
    ['GET', `/v1/webhooks/endpoints/${e.id}/deliveries`], ['POST', `/v1/webhooks/endpoints/${e.id}/test`],
    ['POST', `/v1/webhooks/endpoints/${e.id}/deliveries/wd_0000000000000000000000000/redeliver`],
  ];
  for (const [method, path, body] of routes) {
    const r = await call(app.url, method, path, { key: other.key, body });
    expect([method, path, r.status, r.body.code]).toEqual([method, path, 404, 'not_found']);
  }
  expect((await call(app.url, 'GET', '/v1/webhooks/endpoints', { key: other.key })).body.data).toEqual([]);
  expect((await call(app.url, 'GET', `/v1/webhooks/endpoints/${e.id}`, { key: owner.key })).status).toBe(200);
});

test('reads need webhooks:read and changes need webhooks:write (403 missing_scope)', async () => {
  const reader = await freshTenant(['webhooks:read']);
  const writer = await freshTenant(['webhooks:write']);
  const w = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: reader.key, body: { url: receiver.url } });
  expect([w.status, w.body.code]).toEqual([403, 'missing_scope']);
  expect((await call(app.url, 'GET', '/v1/webhooks/endpoints', { key: reader.key })).status).toBe(200);
  const r = await call(app.url, 'GET', '/v1/webhooks/endpoints', { key: writer.key });
  expect([r.status, r.body.code]).toEqual([403, 'missing_scope']);
});

test('without an encryption key every webhook management route answers 503 service_unavailable', async () => {
  const bare = await startApp({ webhookEncryptionKey: null });
  try {
    const t = await createTenant(bare.owner);
    const id = 'we_0000000000000000000000000';
    const routes: [string, string, unknown?][] = [
      ['GET', '/v1/webhooks/endpoints'], ['POST', '/v1/webhooks/endpoints', { url: receiver.url }],
      ['GET', `/v1/webhooks/endpoints/${id}`], ['PATCH', `/v1/webhooks/endpoints/${id}`, { enabled: false }],
      ['DELETE', `/v1/webhooks/endpoints/${id}`], ['POST', `/v1/webhooks/endpoints/${id}/rotate-secret`],
      ['GET', `/v1/webhooks/endpoints/${id}/deliveries`], ['POST', `/v1/webhooks/endpoints/${id}/test`],
      ['POST', `/v1/webhooks/endpoints/${id}/deliveries/wd_0000000000000000000000000/redeliver`],
    ];
    for (const [method, path, body] of routes) {
      const r = await call(bare.url, method, path, { key: t.key, body });
      expect([method, path, r.status, r.body.code]).toEqual([method, path, 503, 'service_unavailable']);
    }
    // Authentication still comes first.
    expect((await call(bare.url, 'GET', '/v1/webhooks/endpoints', { key: null })).status).toBe(401);
  } finally {
    await bare.close();
  }
});

test('the endpoint list is keyset-paginated newest first', async () => {
  const t = await freshTenant();
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: `${receiver.url}/${i}` } })).body.id);
  const p1 = await call(app.url, 'GET', '/v1/webhooks/endpoints?limit=2', { key: t.key });
  expect(p1.body.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1]]);
  expect(p1.body.next_cursor).toEqual(expect.any(String));
  const p2 = await call(app.url, 'GET', `/v1/webhooks/endpoints?limit=2&cursor=${p1.body.next_cursor}`, { key: t.key });
  expect(p2.body).toEqual({ data: [expect.objectContaining({ id: ids[0] })], next_cursor: null });
  expect((await call(app.url, 'GET', '/v1/webhooks/endpoints?cursor=garbage', { key: t.key })).status).toBe(400);
});

describe('test ping', () => {
  test('sends a signed webhook.ping envelope synchronously and answers the status code', async () => {
    const t = await freshTenant();
    const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
    const before = receiver.received.length;
    receiver.respond = () => 204;
    const r = await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/test`, { key: t.key });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status_code: 204, error: null });
    expect(receiver.received).toHaveLength(before + 1);
    const envelope = verify(e.secret, receiver.received[before]);
    expect(envelope).toEqual({
      id: expect.stringMatching(/^evt_/), type: 'webhook.ping', timestamp: expect.any(String), api_version: '2026-08',
      data: { endpoint_id: e.id, message: expect.any(String) },
    });
    receiver.respond = () => ({ status: 503, body: 'down for maintenance' });
    const down = await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/test`, { key: t.key });
    expect(down.body).toEqual({ status_code: 503, error: null });
    receiver.respond = () => 200;
  });

  test('an endpoint that does not answer gives status_code null and the error', async () => {
    const t = await freshTenant();
    const dead = await startReceiver();
    const url = dead.url;
    await dead.close();
    const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url } })).body;
    const r = await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/test`, { key: t.key });
    expect(r.status).toBe(200);
    expect(r.body.status_code).toBeNull();
    expect(r.body.error).toMatch(/ECONNREFUSED/);
  });

  test('at most 10 test pings per minute per endpoint, then 429 rate_limited with Retry-After', async () => {
    const t = await freshTenant();
    const a = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
    const b = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
    for (let i = 0; i < 10; i++) {
      expect((await call(app.url, 'POST', `/v1/webhooks/endpoints/${a.id}/test`, { key: t.key })).status).toBe(200);
    }
    const r = await call(app.url, 'POST', `/v1/webhooks/endpoints/${a.id}/test`, { key: t.key });
    expect([r.status, r.body.code]).toEqual([429, 'rate_limited']);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(5);
    // The bucket is the endpoint's, not the key's.
    expect((await call(app.url, 'POST', `/v1/webhooks/endpoints/${b.id}/test`, { key: t.key })).status).toBe(200);
  });

  test('after rotation both the new and the previous secret verify, for 24 hours', async () => {
    const t = await freshTenant();
    const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
    const rotated = await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/rotate-secret`, { key: t.key });
    expect(rotated.status).toBe(200);
    expect(Object.keys(rotated.body).sort()).toEqual([...ENDPOINT_FIELDS, 'secret'].sort());
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(e.secret);

    const before = receiver.received.length;
    await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/test`, { key: t.key });
    const got = receiver.received[before];
    expect(got.headers['webhook-signature'].split(' ')).toHaveLength(2);
    verify(rotated.body.secret, got);
    verify(e.secret, got);
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(got.body, got.headers)).toThrow();

    // Once the grace period is over only the new secret signs.
    await app.owner.query(`update billing_private.webhook_secrets set previous_expires_at = now() - interval '1 second' where endpoint_id = $1`, [e.id]);
    await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/test`, { key: t.key });
    const later = receiver.received[before + 1];
    expect(later.headers['webhook-signature'].split(' ')).toHaveLength(1);
    verify(rotated.body.secret, later);
    expect(() => verify(e.secret, later)).toThrow();
  });
});

test("the README's node:crypto verifier accepts a real delivery and rejects a tampered one", async () => {
  // Keeps the documented snippet honest: it is extracted from README.md and run.
  const fs = await import('node:fs');
  const ts = await import('typescript');
  const nodeCrypto = await import('node:crypto');
  const readme = fs.readFileSync(`${__dirname}/../../README.md`, 'utf8');
  const section = readme.slice(readme.indexOf('## Verifying webhook deliveries'));
  const block = /```ts\nimport crypto from 'node:crypto';\n([\s\S]*?)```/.exec(section);
  expect(block).not.toBeNull();
  const js = ts.transpileModule(block![1].replace(/^export /m, ''), { compilerOptions: { target: ts.ScriptTarget.ES2022 } }).outputText;
  const verifyDelivery = new Function('crypto', `${js}; return verifyDelivery;`)(nodeCrypto) as (s: string, h: Record<string, string>, b: string) => unknown;

  const t = await freshTenant();
  const e = (await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: receiver.url } })).body;
  const before = receiver.received.length;
  await call(app.url, 'POST', `/v1/webhooks/endpoints/${e.id}/test`, { key: t.key });
  const got = receiver.received[before];
  expect(verifyDelivery(e.secret, got.headers, got.body)).toMatchObject({ type: 'webhook.ping' });
  expect(() => verifyDelivery(e.secret, got.headers, got.body.replace('webhook.ping', 'webhook.pong'))).toThrow('bad signature');
  expect(() => verifyDelivery(e.secret, { ...got.headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 301) }, got.body)).toThrow('timestamp');
});
