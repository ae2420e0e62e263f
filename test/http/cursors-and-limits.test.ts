// Issue 27 item 9: a cursor continues only the list and filters that issued it, and
// limit is decimal digits only (spec "Common parameters": an invalid cursor answers 400
// invalid_request; limit 1 to 100). docs/decisions/cursors-bound-to-their-list.md
import { callTool, connect } from '../support/mcp-client';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
const members: string[] = [];

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  const plan = await seed.plan(await seed.tier());
  for (let i = 0; i < 4; i++) {
    const m = await seed.member();
    members.push(m);
    await seed.subscription(m, plan, { status: i % 2 ? 'cancelled' : 'active' });
    await seed.subscription(m, plan, { status: 'active' });
  }
});
afterAll(() => app.close());

async function firstCursor(path: string): Promise<string> {
  const r = await call(app.url, 'GET', path, { key: tenant.key });
  expect(r.status).toBe(200);
  expect(typeof r.body.next_cursor).toBe('string');
  return r.body.next_cursor as string;
}

function expectBadCursor(r: { status: number; body: { code?: string; param?: string; detail?: string } }, why: RegExp) {
  expect([r.status, r.body.code, r.body.param]).toEqual([400, 'invalid_request', 'cursor']);
  expect(r.body.detail).toMatch(why);
}

test('a cursor of one list is refused by another with 400 invalid_request', async () => {
  const membersCursor = await firstCursor('/v1/members?limit=1');
  const r = await call(app.url, 'GET', `/v1/subscriptions?cursor=${membersCursor}`, { key: tenant.key });
  expectBadCursor(r, /another list \(list_members\)/);
  // ... and by a list of another resource with the same id space, in either direction.
  const subsCursor = await firstCursor('/v1/subscriptions?limit=1');
  for (const path of ['/v1/members', '/v1/purchases', '/v1/invoices', '/v1/events']) {
    expectBadCursor(await call(app.url, 'GET', `${path}?cursor=${subsCursor}`, { key: tenant.key }), /another list/);
  }
  // Its own list takes it.
  expect((await call(app.url, 'GET', `/v1/members?cursor=${membersCursor}`, { key: tenant.key })).status).toBe(200);
});

test('a cursor is bound to its filters: other filters are refused, the same filters and another limit continue', async () => {
  const cursor = await firstCursor('/v1/subscriptions?limit=2&status=active');
  expectBadCursor(await call(app.url, 'GET', `/v1/subscriptions?cursor=${cursor}`, { key: tenant.key }), /other filters/);
  expectBadCursor(await call(app.url, 'GET', `/v1/subscriptions?status=cancelled&cursor=${cursor}`, { key: tenant.key }), /other filters/);
  expectBadCursor(await call(app.url, 'GET', `/v1/subscriptions?status=active&member_id=${members[0]}&cursor=${cursor}`, { key: tenant.key }), /other filters/);
  const same = await call(app.url, 'GET', `/v1/subscriptions?status=active&limit=2&cursor=${cursor}`, { key: tenant.key });
  expect(same.status).toBe(200);
  const otherLimit = await call(app.url, 'GET', `/v1/subscriptions?limit=50&cursor=${cursor}&status=active`, { key: tenant.key });
  expect(otherLimit.status).toBe(200);
  expect(otherLimit.body.data.every((s: { status: string }) => s.status === 'active')).toBe(true);
});

test('a cursor is bound to its path: another member\'s list refuses it', async () => {
  const cursor = await firstCursor(`/v1/subscriptions?member_id=${members[0]}&limit=1`);
  expectBadCursor(await call(app.url, 'GET', `/v1/subscriptions?member_id=${members[1]}&limit=1&cursor=${cursor}`, { key: tenant.key }), /other filters/);
});

test('a cursor from before binding ({"id"} only) answers a clear 400, and forged or tampered ones too', async () => {
  const cursor = await firstCursor('/v1/subscriptions?limit=1');
  const { id } = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { id: string };
  const legacy = Buffer.from(JSON.stringify({ id }), 'utf8').toString('base64url');
  expectBadCursor(await call(app.url, 'GET', `/v1/subscriptions?cursor=${legacy}`, { key: tenant.key }), /before cursors were bound.*first page/);
  const forged = (o: unknown) => Buffer.from(JSON.stringify(o), 'utf8').toString('base64url');
  for (const bad of [
    forged({ id, list: 'list_subscriptions' }),
    forged({ id, list: 'list_subscriptions', filters: 'x' }),
    forged({ id, list: 'list_subscriptions', filters: 'AAAAAAAAAAAAAAAA', extra: 1 }),
    forged({ id: 'x', list: 'list_subscriptions', filters: 'AAAAAAAAAAAAAAAA' }),
    forged([id]), `${cursor}=`, cursor.replace(/.$/, '\u0000'), 'a'.repeat(201),
  ]) {
    const r = await call(app.url, 'GET', `/v1/subscriptions?cursor=${encodeURIComponent(bad)}`, { key: tenant.key });
    expect({ bad, status: r.status, code: r.body.code }).toEqual({ bad, status: 400, code: 'invalid_request' });
  }
  expectBadCursor(await call(app.url, 'GET', `/v1/subscriptions?cursor=${forged({ id, list: 'list_subscriptions', filters: 'AAAAAAAAAAAAAAAA' })}`, { key: tenant.key }), /other filters/);
});

test('MCP tools get the same binding: a REST cursor of another list is a tool error, the same list continues', async () => {
  const client = await connect(app.url, tenant.key);
  try {
    const subsCursor = await firstCursor('/v1/subscriptions?limit=1');
    const wrong = await callTool(client, 'list_members', { cursor: subsCursor });
    expect(wrong.isError).toBe(true);
    expect(JSON.stringify(wrong.content)).toMatch(/another list/);
    const right = await callTool(client, 'list_subscriptions', { cursor: subsCursor, limit: 1 });
    expect(right.isError).toBeFalsy();
  } finally {
    await client.close();
  }
});

test.each(['0x10', ' 5', '5 ', '1e2', '5.0', '+5', '-5', '', '0', '101', '١٢', '5,6'])(
  'limit=%j is refused with 422 invalid_request naming limit: decimal digits 1 to 100 only', async (limit) => {
    const r = await call(app.url, 'GET', `/v1/subscriptions?limit=${encodeURIComponent(limit)}`, { key: tenant.key });
    expect([r.status, r.body.code, r.body.param]).toEqual([422, 'invalid_request', 'limit']);
  });

test('decimal limits still work, leading zeros included; MCP takes a JSON integer', async () => {
  for (const [limit, n] of [['1', 1], ['007', 7], ['100', 8]] as const) {
    const r = await call(app.url, 'GET', `/v1/subscriptions?limit=${limit}`, { key: tenant.key });
    expect({ limit, status: r.status, n: r.body.data.length }).toEqual({ limit, status: 200, n });
  }
  const client = await connect(app.url, tenant.key);
  try {
    const r = await callTool(client, 'list_subscriptions', { limit: 3 });
    expect(r.isError).toBeFalsy();
    expect((r.structuredContent as { data: unknown[] }).data).toHaveLength(3);
  } finally {
    await client.close();
  }
});
