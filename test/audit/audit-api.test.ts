// GET /v1/audit-log (issue 31 item 3): the scope audit:read, newest first, filters by
// actor, table, row, operation and time, cursor pages bound to their filters, strict
// query parameters; a community reads its own lines only (the API, a member portal
// session: none).
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { asTenant } from '../support/tenant';

let app: TestApp;
let t: Tenant;

beforeAll(async () => {
  app = await startApp();
  t = await createTenant(app.owner);
  // Five changes by the key: three plans' worth of catalog written as the owner first.
  await app.owner.query(`insert into billing.tiers (community_id, key, name) values ($1, 'a', 'A'), ($1, 'b', 'B')`, [t.communityId]);
});
afterAll(() => app.close());

const list = (query = '', key = t.key) => call(app.url, 'GET', `/v1/audit-log${query}`, { key });

test('needs audit:read', async () => {
  const other = await createTenant(app.owner, ['plans:read']);
  const r = await list('', other.key);
  expect([r.status, r.body.code]).toEqual([403, 'missing_scope']);
});

test('answers the community\'s lines newest first, each with its actor, row and images', async () => {
  const r = await list();
  expect(r.status).toBe(200);
  const tables = r.body.data.map((e: { table: string; operation: string }) => `${e.table}:${e.operation}`);
  expect(tables).toEqual(['tiers:insert', 'tiers:insert', 'api_keys:insert', 'communities:insert']);
  const [tier] = r.body.data;
  expect(tier).toEqual({ id: expect.stringMatching(/^aud_/), occurred_at: expect.any(String), actor_type: 'service', actor_id: expect.any(String),
    key_id: null, request_id: null, table: 'tiers', row_id: expect.stringMatching(/^tier_/), operation: 'insert', changed: [], before: null,
    after: expect.objectContaining({ key: 'b', name: 'B' }) });
  expect(r.body.next_cursor).toBeNull();
  // Another community sees none of them.
  const stranger = await createTenant(app.owner);
  const theirs = await list('?table=tiers', stranger.key);
  expect(theirs.body.data).toEqual([]);
});

test('filters by table, operation, actor, row and time, and pages with a cursor bound to them', async () => {
  const tiers = (await list('?table=tiers&operation=insert&limit=1')).body;
  expect(tiers.data).toHaveLength(1);
  expect(tiers.next_cursor).toEqual(expect.any(String));
  const page2 = await list(`?table=tiers&operation=insert&limit=1&cursor=${tiers.next_cursor}`);
  expect(page2.body.data.map((e: { after: { key: string } }) => e.after.key)).toEqual(['a']);
  expect(page2.body.next_cursor).toBeNull();
  // The cursor belongs to its filters.
  expect((await list(`?table=api_keys&limit=1&cursor=${tiers.next_cursor}`)).status).toBe(400);

  const row = tiers.data[0].row_id as string;
  expect((await list(`?row_id=${row}`)).body.data.map((e: { row_id: string }) => e.row_id)).toEqual([row]);
  expect((await list('?actor_type=api_key')).body.data).toEqual([]);
  expect((await list('?actor_type=service&table=api_keys')).body.data).toHaveLength(1);
  const by = tiers.data[0].actor_id as string;
  expect((await list(`?actor_id=${encodeURIComponent(by)}&table=tiers`)).body.data).toHaveLength(2);

  const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
  expect((await list(`?since=${day(0)}&table=tiers`)).body.data).toHaveLength(2);
  expect((await list(`?until=${day(0)}`)).body.data).toEqual([]);
  expect((await list(`?since=${day(1)}`)).body.data).toEqual([]);
  const at = tiers.data[0].occurred_at as string;
  expect((await list(`?since=${encodeURIComponent(at)}&until=${encodeURIComponent(new Date(Date.parse(at) + 1).toISOString())}&table=tiers`)).body.data).toHaveLength(2);
});

test('query parameters are strict', async () => {
  expect((await list('?tables=tiers')).status).toBe(400);
  for (const bad of ['table=nope', 'actor_type=robot', 'operation=upsert', 'since=yesterday', 'until=2026-13-01', 'limit=0']) {
    const r = await list(`?${bad}`);
    expect([bad, r.status, r.body.code]).toEqual([bad, 422, 'invalid_request']);
  }
});

test('a member portal session reads no line, whatever its community', async () => {
  const rows = await asTenant(app.owner, t.communityId, async (c) => {
    await c.query(`select set_config('app.member_id', 'mem_x', true)`);
    return (await c.query('select count(*)::int as n from billing.audit_log')).rows[0].n;
  }, { role: 'billing_api' });
  expect(rows).toBe(0);
  const own = await asTenant(app.owner, t.communityId, async (c) => (await c.query('select count(*)::int as n from billing.audit_log')).rows[0].n, { role: 'billing_api' });
  expect(own).toBeGreaterThanOrEqual(4);
});
