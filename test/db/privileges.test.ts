// Execute rights are opt-in (db/migrations/fixtures/tables/00-foundation.sql): no function is
// executable by PUBLIC, and billing_api gets only what it calls. Owner-only
// operations (time, the test clock, completing checkouts, provider state) have no grant.
import pg from 'pg';
import { TEST_DB } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';
import { asTenant } from '../support/tenant';

let owner: pg.Pool;

beforeAll(() => { owner = createOwnerPool(TEST_DB()); });
afterAll(() => owner.end());

const OWNER_ONLY = [
  'billing.apply_due(text)', 'billing.apply_due_all()', 'billing.sandbox_advance(text, numeric)',
  'billing.complete_checkout(text, jsonb)', 'billing.apply_provider_subscription(jsonb)',
  'billing.expire_checkout(text)', 'billing.refund_purchase(text)', 'billing.record_provider_event(text, text, text)',
  'billing.ledger_sweep(text)', 'billing_private.add_job(text, json[], timestamptz, integer, text)',
  'billing_private.purge_expired(interval)', 'billing_private.webhook_record_attempts(text, integer, boolean, jsonb, timestamptz, interval)',
  'billing.checkout_apply_discount(text, text)', 'billing_private.operator_invite(text, text, text, text, interval)',
  'billing.sandbox_set_card(text, boolean)',
];

test('billing_api has no execute right on owner-only functions', async () => {
  for (const fn of OWNER_ONLY) {
    const { rows } = await owner.query(`select has_function_privilege('billing_api', $1::regprocedure, 'execute') as ok`, [fn]);
    expect([fn, rows[0].ok]).toEqual([fn, false]);
  }
});

test('calling an owner-only function as billing_api is refused', async () => {
  for (const sql of [`select billing.apply_due('com_x')`, `select billing.sandbox_advance('com_x', 1)`, `select billing.complete_checkout('cs_x')`]) {
    await asTenant(owner, null, async (client) => {
      await expect(client.query(sql)).rejects.toThrow(/permission denied for function/);
    }, { role: 'billing_api' });
  }
});

test('no function of billing, billing_api, billing_private or analytics is executable by PUBLIC', async () => {
  const { rows } = await owner.query(`
    select p.oid::regprocedure::text as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname in ('billing', 'billing_api', 'billing_private', 'analytics')
      and exists (select 1 from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                  where a.grantee = 0 and a.privilege_type = 'EXECUTE')`);
  expect(rows.map((r) => r.fn)).toEqual([]);
});

test("the owner's default privileges keep new functions from PUBLIC", async () => {
  const { rows } = await owner.query(`
    select count(*)::int as n from pg_default_acl d
    where d.defaclrole = (select oid from pg_roles where rolname = current_user) and d.defaclobjtype = 'f'
      and d.defaclnamespace = 0
      and not exists (select 1 from aclexplode(d.defaclacl) a where a.grantee = 0 and a.privilege_type = 'EXECUTE')`);
  expect(rows[0].n).toBe(1);
});

test('billing_api can execute the API door (the request gate) and every billing_api operation', async () => {
  const { rows } = await owner.query(`
    select p.oid::regprocedure::text as fn, has_function_privilege('billing_api', p.oid, 'execute') as ok
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'billing_api'
    union all select 'billing.api_call', has_function_privilege('billing_api', 'billing.api_call(text, text, jsonb, text, text, jsonb, jsonb, boolean, text)', 'execute')`);
  expect(rows.length).toBeGreaterThan(30);
  for (const r of rows) expect([r.fn, r.ok]).toEqual([r.fn, true]);
});
