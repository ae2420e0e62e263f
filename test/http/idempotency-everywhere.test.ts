// Issue 26 item 8: Idempotency-Key is never silently ignored. Every POST, PATCH and
// DELETE of the registry either honours it (a retry with the same key and body replays
// the first answer with Idempotent-Replayed: true) or refuses it with 400
// invalid_request; the OpenAPI document says which. Enumerated from the registry, so a
// new route cannot slip through. docs/decisions/idempotency-on-every-write.md
import { z } from 'zod';
import type { Operation } from '../../src/domain/operation';
import { operations } from '../../src/operations';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { WORKER_CONFIG } from '../support/webhooks';

let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  app = await startApp(WORKER_CONFIG);
  tenant = await createTenant(app.owner);
});
afterAll(() => app.close());

const NO_SUCH_ID = 'none_0123456789abcdef0123456789';
const HOOK_URL = 'http://127.0.0.1:8080/hook';
const writes = operations.filter((op) => op.method !== 'GET');

/**
 * A valid body for each write whose body has required fields: the request must get
 * past validation (a 422 is answered before the key is looked at) to show the key's
 * effect. Ids name nothing, so most answers are a kept 404.
 */
const BODIES: Record<string, Record<string, unknown>> = {
  switch_subscription: { plan_id: NO_SUCH_ID },
  create_grant: { tier_id: NO_SUCH_ID },
  create_checkout_link: { tier_id: NO_SUCH_ID, subject: { member_id: NO_SUCH_ID } },
  attach_external_subject: { namespace: 'idem-ns', external_user_id: 'u-1' },
  redeem_link_code: { code: 'NOSUCHCODE', platform: 'discord', platform_uid: '1' },
  create_webhook_endpoint: { url: HOOK_URL },
  create_link_code: { intended_platform: 'discord' },
  create_catalog_platform: { key: 'idem-pc', platform: 'telegram', settings: { chat_id: '-1001234567890' } },
  create_catalog_tier: { key: 'idem-tier', name: 'Idem' },
  create_catalog_plan: { key: 'idem-plan', tier_id: NO_SUCH_ID, amount_cents: 100, currency: 'usd', interval: 'month' },
  create_catalog_entitlement: { key: 'idem-ent', name: 'Idem' },
  create_catalog_discount: { code: 'IDEM', value_type: 'percent', percent_off: 5 },
};

function requiredBodyFields(op: Operation): string[] {
  return Object.entries(op.body?.shape ?? {}).filter(([, field]) => !z.safeParse(field, undefined).success).map(([name]) => name);
}

const pathOf = (op: Operation) => op.path.replace(/\{\w+\}/g, NO_SUCH_ID);
const send = (op: Operation, key: string | null, t: Tenant = tenant) => call(app.url, op.method, pathOf(op), {
  key: t.key, body: BODIES[op.name] ?? (op.body ? {} : undefined), headers: key === null ? {} : { 'idempotency-key': key },
});

test('every POST, PATCH and DELETE says whether it honours Idempotency-Key or why it refuses it, never both', () => {
  expect(writes.length).toBeGreaterThanOrEqual(20);
  for (const op of writes) {
    expect({ op: op.name, declared: [op.idempotent === true, typeof op.idempotencyRefused === 'string'].filter(Boolean).length }).toEqual({ op: op.name, declared: 1 });
    // The replay test below needs a body that passes validation.
    if (op.idempotent && requiredBodyFields(op).length > 0) expect({ op: op.name, body: op.name in BODIES }).toEqual({ op: op.name, body: true });
  }
});

test('the OpenAPI document documents the header where it is honoured and says where it is refused', async () => {
  const doc = (await call(app.url, 'GET', '/v1/openapi.json')).body as { paths: Record<string, Record<string, { parameters: { name: string; in: string }[]; description: string }>> };
  for (const op of writes) {
    const entry = doc.paths[op.path][op.method.toLowerCase()];
    const header = entry.parameters.some((p) => p.in === 'header' && p.name === 'Idempotency-Key');
    expect({ op: op.name, header, refusedSaid: /Idempotency-Key is refused/.test(entry.description) })
      .toEqual({ op: op.name, header: op.idempotent === true, refusedSaid: op.idempotent !== true });
  }
});

test.each(writes.filter((op) => op.idempotent).map((op) => [`${op.method} ${op.path}`, op] as const))(
  'honoured: a retry with the same key replays the first answer: %s', async (_name, op) => {
    const t = await createTenant(app.owner);
    const first = await send(op, `replay-${op.name}`, t);
    const again = await send(op, `replay-${op.name}`, t);
    expect(first.status).not.toBe(400);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect({ status: again.status, replayed: again.headers.get('idempotent-replayed'), body: again.body })
      .toEqual({ status: first.status, replayed: 'true', body: first.body });
  });

test.each(writes.filter((op) => !op.idempotent).map((op) => [`${op.method} ${op.path}`, op] as const))(
  'refused: a request with Idempotency-Key answers 400 invalid_request naming the header: %s', async (_name, op) => {
    const r = await send(op, 'refused-key');
    expect([r.status, r.body.code, r.body.param]).toEqual([400, 'invalid_request', 'Idempotency-Key']);
    expect(r.body.detail).toContain(op.idempotencyRefused);
    // Without the header the same request is not refused for it.
    const plain = await send(op, null);
    expect(plain.body?.param).not.toBe('Idempotency-Key');
  });

test('two creates of a webhook endpoint with one key make one endpoint, and the replay carries the same secret', async () => {
  const t = await createTenant(app.owner);
  const create = () => call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: HOOK_URL }, headers: { 'idempotency-key': 'create-once' } });
  const first = await create();
  const second = await create();
  expect(first.status).toBe(201);
  expect(first.body.secret).toMatch(/^whsec_/);
  expect([second.status, second.headers.get('idempotent-replayed'), second.body]).toEqual([201, 'true', first.body]);
  const { rows } = await app.owner.query('select count(*)::int as n from billing.webhook_endpoints where community_id = $1', [t.communityId]);
  expect(rows[0].n).toBe(1);
  // Another body under the same key is refused, as for every idempotent operation.
  const other = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: `${HOOK_URL}2` }, headers: { 'idempotency-key': 'create-once' } });
  expect([other.status, other.body.code]).toEqual([422, 'idempotency_key_reuse']);
});

test('an idempotency record of a secret-bearing answer holds the secret encrypted, never in clear', async () => {
  const t = await createTenant(app.owner);
  const created = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: HOOK_URL }, headers: { 'idempotency-key': 'sealed' } });
  const rotated = await call(app.url, 'POST', `/v1/webhooks/endpoints/${created.body.id}/rotate-secret`, { key: t.key, headers: { 'idempotency-key': 'sealed' } });
  expect(rotated.body.secret).not.toBe(created.body.secret);
  const { rows } = await app.owner.query<{ body: string }>('select response_body::text as body from billing.idempotency_keys where community_id = $1', [t.communityId]);
  expect(rows).toHaveLength(2);
  for (const secret of [created.body.secret, rotated.body.secret] as string[]) {
    for (const row of rows) {
      expect(row.body).not.toContain(secret);
      expect(row.body).not.toContain(secret.slice('whsec_'.length));
    }
  }
});

test('a retried rotation rotates once: the replay has the same secret', async () => {
  const t = await createTenant(app.owner);
  const created = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: HOOK_URL } });
  const rotate = (key?: string) => call(app.url, 'POST', `/v1/webhooks/endpoints/${created.body.id}/rotate-secret`, { key: t.key, headers: key ? { 'idempotency-key': key } : {} });
  const first = await rotate('rotate-once');
  const again = await rotate('rotate-once');
  expect([again.status, again.headers.get('idempotent-replayed'), again.body.secret]).toEqual([200, 'true', first.body.secret]);
  const fresh = await rotate();
  expect(fresh.body.secret).not.toBe(first.body.secret);
});

test('a retried delete with its key answers 204 again, without the key 404', async () => {
  const t = await createTenant(app.owner);
  const created = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: HOOK_URL } });
  const del = (key?: string) => call(app.url, 'DELETE', `/v1/webhooks/endpoints/${created.body.id}`, { key: t.key, headers: key ? { 'idempotency-key': key } : {} });
  const first = await del('delete-once');
  const again = await del('delete-once');
  expect([first.status, again.status, again.headers.get('idempotent-replayed')]).toEqual([204, 204, 'true']);
  expect((await del()).status).toBe(404);
});

test('a GET ignores Idempotency-Key: it is idempotent by definition (as at Stripe)', async () => {
  const r = await call(app.url, 'GET', '/v1/plans', { key: tenant.key, headers: { 'idempotency-key': 'read' } });
  expect(r.status).toBe(200);
  expect(r.headers.get('idempotent-replayed')).toBeNull();
});
