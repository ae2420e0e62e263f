// Every door writes its own audit line (issue 31 item 3): an API key over REST (both the
// one-round-trip SQL path, leased or not, and a handler) and over MCP, the CLI; each
// names its actor and the request id. The service's own work (renewals, an owner
// session) leaves lifecycle tables out of the log and names itself on the
// operator-controlled ones. The dashboard's door: audit-browser.test.ts; an operator's
// SQL login: append-only.test.ts (one login per file: concurrent grants race on the
// catalog fence).
import { call, startApp, TestApp } from '../support/app';
import { cli } from '../support/cli';
import { callTool, connect, resultJson } from '../support/mcp-client';
import { advance, createShop, externalSubject, Shop, subscribe } from '../support/shop';
import { WORKER_CONFIG } from '../support/webhooks';

let app: TestApp;
let shop: Shop;

beforeAll(async () => {
  app = await startApp(WORKER_CONFIG);
  process.env.DATABASE_URL = process.env.BILLING_TEST_DB;
  shop = await createShop(app);
});
afterAll(() => app.close());

interface Line { table_name: string; row_id: string; operation: string; actor_type: string; actor_id: string | null;
  key_id: string | null; request_id: string | null; changed: string[]; before: Record<string, unknown> | null; after: Record<string, unknown> | null }

/** The community's audit lines of one table (and row), oldest first. */
async function lines(table: string, rowId?: string): Promise<Line[]> {
  const { rows } = await app.owner.query<Line>(`select * from billing.audit_log where community_id = $1 and table_name = $2
    and ($3::text is null or row_id = $3) order by id`, [shop.communityId, table, rowId ?? null]);
  return rows;
}

const requestId = () => `req-${Math.random().toString(36).slice(2, 10)}`;

test('an API key over REST: a handler (webhook endpoint) names the key and the X-Request-Id', async () => {
  const rid = requestId();
  const r = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: shop.key, body: { url: 'https://example.com/hook' }, headers: { 'x-request-id': rid } });
  expect(r.status).toBe(201);
  expect(r.headers.get('x-request-id')).toBe(rid);
  const [line] = await lines('webhook_endpoints', r.body.id);
  expect(line).toMatchObject({ operation: 'insert', actor_type: 'api_key', actor_id: shop.keyId, key_id: shop.keyId, request_id: rid,
    before: null, after: expect.objectContaining({ id: r.body.id, url: 'https://example.com/hook', enabled: true }) });
  // Its signing secret is recorded as a row, never as its ciphertext.
  const [secret] = await lines('webhook_secrets', r.body.id);
  expect(secret).toMatchObject({ operation: 'insert', actor_type: 'api_key', request_id: rid });
  expect(Object.keys(secret.after!).sort()).toEqual(['community_id', 'endpoint_id', 'previous_expires_at']);
});

test('an API key over REST: a lifecycle change on the leased path and with an Idempotency-Key, each with its request id', async () => {
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  // Checkout and payment are the buyer's, through no key: the subscription's creation is not the key's.
  expect(await lines('subscriptions', subscriptionId)).toEqual([]);
  const rid = requestId();
  const cancel = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key, body: {}, headers: { 'x-request-id': rid } });
  expect(cancel.status).toBe(202);
  const rid2 = requestId();
  const again = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/reactivate`,
    { key: shop.key, body: {}, headers: { 'x-request-id': rid2, 'idempotency-key': `idem-${rid2}` } });
  expect(again.status).toBe(200);
  const found = await lines('subscriptions', subscriptionId);
  expect(found.map((l) => [l.operation, l.actor_type, l.actor_id, l.request_id, l.after?.status])).toEqual([
    ['update', 'api_key', shop.keyId, rid, 'cancelling'],
    ['update', 'api_key', shop.keyId, rid2, 'active'],
  ]);
  expect(found[0].changed).toEqual(expect.arrayContaining(['cancel_at', 'status']));
  expect(found[0].before).toMatchObject({ status: 'active', cancel_at: null });

  // A SQL operation (one round trip) on a leased token: a member's email, which the log names but never holds.
  const rid3 = requestId();
  const { memberId } = await subscribe(app, shop, 'silver');
  const patch = await call(app.url, 'PATCH', `/v1/members/${memberId}`, { key: shop.key, body: { email: 'buyer@example.com' }, headers: { 'x-request-id': rid3 } });
  expect(patch.status).toBe(200);
  // The member was created by the key's checkout link, then changed by the PATCH.
  const [created, member] = await lines('members', memberId);
  expect(created).toMatchObject({ operation: 'insert', actor_type: 'api_key', request_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
  expect(member).toMatchObject({ operation: 'update', actor_type: 'api_key', request_id: rid3, changed: ['display_name', 'email', 'search_text', 'updated_at'] });
  expect(JSON.stringify(member)).not.toContain('buyer@example.com');
});

test('an API key over MCP: the tool\'s change names the key and the request id of the MCP request', async () => {
  const rid = requestId();
  const client = await connect(app.url, shop.key, { 'x-request-id': rid });
  try {
    const out = resultJson(await callTool(client, 'create_checkout_link', { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'],
      namespace: 'app', external_user_id: `mcp-${rid}` })) as { member_id: string };
    const [line] = await lines('members', out.member_id);
    expect(line).toMatchObject({ operation: 'insert', actor_type: 'api_key', actor_id: shop.keyId, request_id: rid });
  } finally {
    await client.close();
  }
});

test('the CLI: the command is the actor, the run has one request id, and the key\'s hash is never in the log', async () => {
  const r = await cli('keys', 'create', '--community', shop.communityId, '--scopes', 'plans:read', '--name', 'cli key', '--json');
  expect(r.code).toBe(0);
  const key = JSON.parse(r.out) as { id: string; key: string };
  const [line] = await lines('api_keys', key.id);
  expect(line).toMatchObject({ operation: 'insert', actor_type: 'cli', actor_id: 'keys create', key_id: null,
    request_id: expect.stringMatching(/^[0-9a-f-]{36}$/), after: expect.objectContaining({ id: key.id, name: 'cli key', scopes: ['plans:read'] }) });
  expect(line.after).not.toHaveProperty('key_hash');
  const revoked = await cli('keys', 'revoke', key.id, '--json');
  expect(revoked.code).toBe(0);
  const [, revoke] = await lines('api_keys', key.id);
  expect(revoke).toMatchObject({ operation: 'update', actor_type: 'cli', actor_id: 'keys revoke', changed: ['revoked_at'] });
  expect(revoke.request_id).not.toBe(line.request_id);
});

test('the service\'s own work: renewals leave no lifecycle line; an owner session names its role on the catalog', async () => {
  const { subscriptionId } = await subscribe(app, shop, 'gold', 'gold-monthly', externalSubject('renewed'));
  const invoicesBefore = (await lines('invoices')).length;
  await advance(app, shop, 32);
  const { rows: [renewed] } = await app.owner.query<{ n: number }>(
    `select count(*)::int as n from billing.invoices where community_id = $1 and subscription_id = $2`, [shop.communityId, subscriptionId]);
  expect(renewed.n).toBe(2);
  expect(await lines('subscriptions', subscriptionId)).toEqual([]);
  expect((await lines('invoices')).length).toBe(invoicesBefore);
  // The clock moved by the owner's hand is a change of the community: recorded, by the service.
  const [clock] = (await lines('communities')).filter((l) => l.changed.includes('clock_offset'));
  expect(clock).toMatchObject({ operation: 'update', actor_type: 'service', actor_id: expect.any(String), key_id: null, request_id: null });
});
