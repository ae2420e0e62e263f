// test/support/tenant.ts's asTenant: the one way tests run SQL as a community. It holds
// what the tests built on it rely on: settings local to its transaction, a rollback
// unless asked to commit, and a rollback when the function throws.
import pg from 'pg';
import { TEST_DB } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';
import { asTenant } from '../support/tenant';

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB(), 1); });
afterAll(() => owner.end());

const settings = `select current_user::text as role, current_setting('app.community_id', true) as community,
  current_setting('app.scopes', true) as scopes`;

test('asTenant sets the community, role and scopes for its transaction only', async () => {
  const ownerRole = (await owner.query('select current_user::text as u')).rows[0].u;
  const inside = await asTenant(owner, 'com_as_tenant', async (c) => (await c.query(settings)).rows[0],
    { role: 'billing_api', scopes: 'analytics:read' });
  expect(inside).toEqual({ role: 'billing_api', community: 'com_as_tenant', scopes: 'analytics:read' });
  // One connection in the pool: the same session, with nothing left behind.
  const after = (await owner.query(settings)).rows[0];
  expect(after.role).toBe(ownerRole);
  expect(after.community ?? '').toBe('');
  expect(after.scopes ?? '').toBe('');
});

test('asTenant rolls back unless asked to commit, and always when the function throws', async () => {
  const name = `as-tenant-${process.pid}-${Date.now()}`;
  const count = async () => Number((await owner.query('select count(*) as n from billing.communities where name = $1', [name])).rows[0].n);
  const insert = (c: pg.PoolClient) => c.query('insert into billing.communities (name) values ($1)', [name]);
  await asTenant(owner, null, insert);
  expect(await count()).toBe(0);
  await expect(asTenant(owner, null, async (c) => { await insert(c); throw new Error('boom'); }, { commit: true })).rejects.toThrow('boom');
  expect(await count()).toBe(0);
  await asTenant(owner, null, insert, { commit: true });
  expect(await count()).toBe(1);
});
