// The rate token is taken last (billing.gate_close, docs/decisions/rate-bucket-last.md):
// when the key's bucket empties while a request works, the request is undone whole and
// answered 429, for a SQL operation (one api_call statement) and a handler alike. A
// transaction of the test empties the bucket and holds its row, so the request's
// gate_close waits for it and then finds no token.
import pg from 'pg';
import { z } from 'zod';
import { defineOperation } from '../../src/domain/operation';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { createExecutor } from '../support/dashboard';
import { waitFor } from '../support/webhooks';

let app: TestApp;

beforeAll(async () => {
  // A burst under 20: no leases, every request takes its own token. One token a minute
  // refills nothing while a test runs.
  app = await startApp({ rateLimits: { key_per_minute: 1, key_burst: 5, ip_per_minute: 1000, ip_burst: 1000 } });
});
afterAll(() => app.close());

/** A tenant with one member, whose bucket exists with tokens to spare. */
async function tenantWithMember(): Promise<{ tenant: Tenant; memberId: string }> {
  const tenant = await createTenant(app.owner);
  const { rows } = await app.owner.query<{ id: string }>('insert into billing.members (community_id) values ($1) returning id', [tenant.communityId]);
  expect((await call(app.url, 'GET', '/v1/plans', { key: tenant.key })).status).toBe(200);
  return { tenant, memberId: rows[0].id };
}

/** Runs request while another transaction empties the key's bucket and holds its row until request waits for it. */
async function withBucketEmptied<T>(tenant: Tenant, request: () => Promise<T>): Promise<T> {
  const holder: pg.PoolClient = await app.owner.connect();
  try {
    await holder.query('begin');
    const { rows } = await holder.query<{ pid: number }>(
      `update billing_private.rate_buckets set tokens = 0, updated_at = clock_timestamp() where bucket = $1 returning pg_backend_pid() as pid`,
      [`key:${tenant.keyId}`]);
    expect(rows).toHaveLength(1);
    const pending = request();
    await waitFor('the request waiting for the bucket', async () => (await app.owner.query(
      'select 1 from pg_stat_activity where $1 = any (pg_blocking_pids(pid))', [rows[0].pid])).rowCount === 1, 10_000);
    await holder.query('commit');
    return await pending;
  } finally {
    holder.release();
  }
}

const linkCodes = async (communityId: string) =>
  (await app.owner.query('select count(*)::int as n from billing.link_codes where community_id = $1', [communityId])).rows[0].n;

test('a SQL operation whose bucket emptied meanwhile is undone and answers 429', async () => {
  const { tenant, memberId } = await tenantWithMember();
  const r = await withBucketEmptied(tenant, () =>
    call(app.url, 'POST', `/v1/members/${memberId}/link-codes`, { key: tenant.key, body: { intended_platform: 'discord' } }));
  expect([r.status, r.body.code]).toEqual([429, 'rate_limited']);
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(await linkCodes(tenant.communityId)).toBe(0);
});

test('a handler whose bucket emptied meanwhile is undone and answers 429', async () => {
  const { tenant, memberId } = await tenantWithMember();
  const op = defineOperation({
    name: 'test_link_code', method: 'POST', path: '/v1/test-link-codes', scope: 'members:write', tag: 'Test',
    summary: 'writes a link code from a handler', idempotencyRefused: 'a test', body: z.object({}),
    handler: (ctx) => ctx.call('link_code_create', { id: memberId, intended_platform: 'discord' }),
  });
  const outcome = await withBucketEmptied(tenant, () => createExecutor(app).run(op, { key: tenant.key, ip: '127.0.0.1' }, { body: {} }));
  expect([outcome.status, (outcome.body as { code: string }).code]).toEqual([429, 'rate_limited']);
  expect(outcome.rateLimit?.retry_after).toBeGreaterThan(0);
  expect(await linkCodes(tenant.communityId)).toBe(0);
});
