// Spec "Limits", idempotency rules 1-3, exercised through the Executor that REST and
// MCP share, with a handler operation whose effect is countable.
import { z } from 'zod';
import { createServices } from '../../src/app';
import { Executor } from '../../src/operations/executor';
import { defineOperation } from '../../src/domain/operation';
import { createTenant, startApp, TestApp, Tenant } from '../support/app';

let app: TestApp;
let tenant: Tenant;
let executor: Executor;

const createMember = defineOperation({
  name: 'test_create_member', method: 'POST', path: '/v1/test-members', scope: 'members:write', tag: 'Test',
  summary: 'creates a member slowly', idempotent: true, status: 201,
  body: z.object({ note: z.string() }),
  // Writes go through operations (billing_api only reads tables): each run adds one
  // link code row, which is what the tests count.
  handler: async (ctx, input) => {
    const { rows } = await ctx.query<{ r: { code: string } }>(
      `select billing_api.link_code_create(jsonb_build_object('id', (select m.id from billing.members m order by m.id limit 1),
        'intended_platform', 'discord')) as r`);
    await ctx.query('select pg_sleep(0.3)');
    if (input.note === 'fail') throw Object.assign(new Error('nope'), { code: 'BL409', message: 'State does not allow it.' });
    return { id: rows[0].r.code, note: input.note };
  },
});

/** Each tenant gets one member, for whom the handler writes link codes. */
async function withMember(communityId: string): Promise<void> {
  await app.owner.query('insert into billing.members (community_id) values ($1)', [communityId]);
}

/** Operations that took effect: link codes written by the handler. */
async function memberCount(): Promise<number> {
  const { rows } = await app.owner.query('select count(*)::int as n from billing.link_codes where community_id = $1', [tenant.communityId]);
  return rows[0].n;
}

beforeAll(async () => {
  app = await startApp();
  executor = new Executor(app.api, app.config, createServices(app.config));
});
beforeEach(async () => {
  tenant = await createTenant(app.owner);
  await withMember(tenant.communityId);
});
afterAll(() => app.close());

const caller = () => ({ key: tenant.key, ip: '127.0.0.1' });

test('20 identical requests at once take effect exactly once; the rest replay or answer request_in_flight', async () => {
  const outcomes = await Promise.all(Array.from({ length: 20 }, () =>
    executor.run(createMember, caller(), { body: { note: 'a' }, idempotencyKey: 'same-key' })));
  expect(await memberCount()).toBe(1);
  const created = outcomes.filter((o) => o.status === 201);
  const inFlight = outcomes.filter((o) => o.status === 409);
  expect(created.length + inFlight.length).toBe(20);
  for (const o of inFlight) expect(o.body).toMatchObject({ code: 'request_in_flight' });
  const ids = new Set(created.map((o) => (o.body as { id: string }).id));
  expect(ids.size).toBe(1);
  // After the first finished, the same key replays the original answer.
  const again = await executor.run(createMember, caller(), { body: { note: 'a' }, idempotencyKey: 'same-key' });
  expect(again).toMatchObject({ status: 201, replayed: true, body: created[0].body });
  expect(await memberCount()).toBe(1);
});

test('the same key with a different body answers 422 idempotency_key_reuse and changes nothing', async () => {
  await executor.run(createMember, caller(), { body: { note: 'a' }, idempotencyKey: 'k1' });
  const other = await executor.run(createMember, caller(), { body: { note: 'b' }, idempotencyKey: 'k1' });
  expect(other.status).toBe(422);
  expect(other.body).toMatchObject({ code: 'idempotency_key_reuse' });
  expect(await memberCount()).toBe(1);
});

test('keys are scoped per community: another community may use the same key', async () => {
  const other = await createTenant(app.owner);
  await withMember(other.communityId);
  const r1 = await executor.run(createMember, caller(), { body: { note: 'a' }, idempotencyKey: 'shared' });
  const r2 = await executor.run(createMember, { key: other.key, ip: '127.0.0.1' }, { body: { note: 'a' }, idempotencyKey: 'shared' });
  expect(r1.replayed).toBeFalsy();
  expect(r2.replayed).toBeFalsy();
  expect((r1.body as { id: string }).id).not.toBe((r2.body as { id: string }).id);
});

test('a failed request is remembered: the same key fails the same way and its writes were rolled back', async () => {
  const first = await executor.run(createMember, caller(), { body: { note: 'fail' }, idempotencyKey: 'k-fail' });
  expect(first.status).toBe(409);
  expect(await memberCount()).toBe(0);
  const second = await executor.run(createMember, caller(), { body: { note: 'fail' }, idempotencyKey: 'k-fail' });
  expect(second).toMatchObject({ status: 409, replayed: true, body: first.body });
});

test('without a key every request takes effect', async () => {
  await executor.run(createMember, caller(), { body: { note: 'a' } });
  await executor.run(createMember, caller(), { body: { note: 'a' } });
  expect(await memberCount()).toBe(2);
});

test('records expire after 24 hours', async () => {
  await executor.run(createMember, caller(), { body: { note: 'a' }, idempotencyKey: 'old' });
  await app.owner.query(`update billing.idempotency_keys set expires_at = now() - interval '1 second' where community_id = $1`, [tenant.communityId]);
  const again = await executor.run(createMember, caller(), { body: { note: 'a' }, idempotencyKey: 'old' });
  expect(again.replayed).toBeFalsy();
  expect(await memberCount()).toBe(2);
});
