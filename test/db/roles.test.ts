// Database roles (docs/security.md, "Database roles"): the API and the worker connect as
// logins of their own (billing_app, billing_worker), never as the owner, so no SQL they
// run can switch back to the owner, read billing_private or create roles.
import pg from 'pg';
import { TEST_APP_DB, TEST_DB, TEST_WORKER_DB } from '../support/app';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { asTenant } from '../support/tenant';

let owner: pg.Pool;
let api: pg.Pool;
let worker: pg.Pool;
let ownerName: string;

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  api = createApiPool(TEST_APP_DB(), 2);
  worker = new pg.Pool({ connectionString: TEST_WORKER_DB(), max: 2 });
  ownerName = (await owner.query<{ u: string }>('select current_user as u')).rows[0].u;
});
afterAll(async () => {
  await api.end();
  await worker.end();
  await owner.end();
});

/** Runs statements on one client of the pool inside a transaction that is rolled back. */
async function onClient<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    return await fn(client);
  } finally {
    await client.query('rollback').catch(() => {});
    client.release();
  }
}

test('the API pool logs in as billing_app and runs as billing_api', async () => {
  const { rows } = await api.query('select session_user::text as login, current_user::text as role');
  expect(rows[0]).toEqual({ login: 'billing_app', role: 'billing_api' });
});

test('the worker logs in as billing_worker', async () => {
  const { rows } = await worker.query('select session_user::text as login, current_user::text as role');
  expect(rows[0]).toEqual({ login: 'billing_worker', role: 'billing_worker' });
});

test('billing_app is billing_api by its own role default, without a startup option (PgBouncer refuses those)', async () => {
  const c = new pg.Client({ connectionString: TEST_APP_DB() });
  await c.connect();
  try {
    const { rows } = await c.query('select session_user::text as login, current_user::text as role');
    expect(rows[0]).toEqual({ login: 'billing_app', role: 'billing_api' });
  } finally {
    await c.end();
  }
});

test('the service logins are no superusers, cannot create roles or databases, bypass no RLS', async () => {
  const { rows } = await owner.query(`
    select rolname::text, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication, rolinherit
    from pg_roles where rolname in ('billing_api', 'billing_app', 'billing_worker') order by 1`);
  expect(rows).toEqual(['billing_api', 'billing_app', 'billing_worker'].map((rolname) => ({
    rolname, rolsuper: false, rolcreaterole: false, rolcreatedb: false, rolbypassrls: false, rolreplication: false, rolinherit: false })));
});

test('no service login is a member of the owner', async () => {
  for (const role of ['billing_api', 'billing_app', 'billing_worker']) {
    const { rows } = await owner.query('select pg_has_role($1, $2, \'member\') as m', [role, ownerName]);
    expect([role, rows[0].m]).toEqual([role, false]);
  }
});

for (const [name, pool] of [['API', () => api], ['worker', () => worker]] as const) {
  test(`from the ${name} pool, SET ROLE to the owner or to postgres is refused`, async () => {
    for (const target of [ownerName, 'postgres']) {
      await onClient(pool(), async (c) => {
        await expect(c.query(`set role ${pg.escapeIdentifier(target)}`)).rejects.toThrow(/permission denied to set role/);
      });
      await onClient(pool(), async (c) => {
        await expect(c.query(`select set_config('role', $1, false)`, [target])).rejects.toThrow(/permission denied to set role/);
      });
    }
  });

  test(`from the ${name} pool, billing_private.api_keys is unreadable, even after RESET ROLE`, async () => {
    await onClient(pool(), async (c) => {
      await expect(c.query('select * from billing_private.api_keys')).rejects.toThrow(/permission denied/);
    });
    await onClient(pool(), async (c) => {
      await c.query('reset role');
      await expect(c.query('select * from billing_private.api_keys')).rejects.toThrow(/permission denied/);
    });
  });

  test(`from the ${name} pool, CREATE ROLE is refused`, async () => {
    await onClient(pool(), async (c) => {
      await expect(c.query('create role billing_escalate login superuser')).rejects.toThrow(/permission denied to create role|must be superuser/);
    });
    await onClient(pool(), async (c) => {
      await expect(c.query('create role billing_escalate')).rejects.toThrow(/permission denied to create role/);
    });
  });
}

test('the worker reads no table of billing directly: it goes through its SECURITY DEFINER doors', async () => {
  await onClient(worker, async (c) => {
    await expect(c.query('select count(*) from billing.subscriptions')).rejects.toThrow(/permission denied/);
  });
  await onClient(worker, async (c) => {
    const { rows } = await c.query('select count(*)::int as n from billing_private.worker_community_ids(null)');
    expect(rows[0].n).toBeGreaterThanOrEqual(0);
  });
});

test('each service login has a statement_timeout (and the API an idle-in-transaction timeout)', async () => {
  const apiSettings = (await api.query(`select current_setting('statement_timeout') as st, current_setting('idle_in_transaction_session_timeout') as idle`)).rows[0];
  expect(apiSettings).toEqual({ st: '15s', idle: '1min' });
  const workerSettings = (await worker.query(`select current_setting('statement_timeout') as st`)).rows[0];
  expect(workerSettings).toEqual({ st: '5min' });
});

// ---- least privilege for billing_api (audit item 5) -------------------------------------

describe('as billing_api with a community set, direct writes are refused', () => {
  let ids: { community: string; member: string; plan: string; sub: string; purchase: string; entitlement: string; invoice: string };

  beforeAll(async () => {
    const q = async (sql: string, values: unknown[] = []) => (await owner.query(sql, values)).rows[0];
    const community = (await q(`insert into billing.communities (name) values ('roles forgery') returning id`)).id;
    const tier = (await q(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold') returning id`, [community])).id;
    const plan = (await q(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval) values ($1, $2, 'gold-m', 1500, 'usd', 'month') returning id`, [community, tier])).id;
    const entitlement = (await q(`insert into billing.entitlements (community_id, key, name) values ($1, 'chat', 'Chat') returning id`, [community])).id;
    const member = (await q(`insert into billing.members (community_id) values ($1) returning id`, [community])).id;
    const sub = (await q(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end) values ($1, $2, $3, 'active', now() + interval '30 days') returning id`, [community, member, plan])).id;
    const purchase = (await q(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency) values ($1, $2, $3, 900, 'usd') returning id`, [community, member, plan])).id;
    const invoice = (await q(`insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, provider, created_at)
      values ($1, $2, $3, 'open', 'subscription_cycle', 'usd', '[{"type": "plan", "description": "Gold", "amount_cents": 1500}]', 1500, 0, 1500, 'sandbox', now()) returning id`, [community, member, sub])).id;
    ids = { community, member, plan, sub, purchase, entitlement, invoice };
  });

  /** Runs sql on the API pool (billing_app as billing_api) with the community set, rolled back. */
  async function asApiIn(sql: string, values: unknown[] = []) {
    return asTenant(api, ids.community, (c) => c.query(sql, values));
  }

  const forgeries: Array<[string, () => [string, unknown[]]]> = [
    ['a completed purchase', () => [`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency) values ($1, $2, $3, 0, 'usd')`, [ids.community, ids.member, ids.plan]]],
    ['a purchase update', () => [`update billing.purchases set amount_cents = 0 where id = $1`, [ids.purchase]]],
    ['a subscription', () => [`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end) values ($1, $2, $3, 'active', now() + interval '100 years')`, [ids.community, ids.member, ids.plan]]],
    ['a subscription update', () => [`update billing.subscriptions set current_period_end = now() + interval '100 years' where id = $1`, [ids.sub]]],
    ['a member entitlement', () => [`insert into billing.member_entitlements (community_id, member_id, entitlement_id, status) values ($1, $2, $3, 'active')`, [ids.community, ids.member, ids.entitlement]]],
    ['a member entitlement update', () => [`update billing.member_entitlements set status = 'active' where community_id = $1`, [ids.community]]],
    ['an event', () => [`insert into billing.events (community_id, type, data) values ($1, 'purchase.completed', '{}')`, [ids.community]]],
    ['an invoice', () => [`insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, provider, created_at)
      values ($1, $2, $3, 'paid', 'subscription_cycle', 'usd', '[{"type": "plan", "description": "Gold", "amount_cents": 0}]', 0, 0, 0, 'sandbox', now())`, [ids.community, ids.member, ids.sub]]],
    ['an invoice update', () => [`update billing.invoices set status = 'paid' where id = $1`, [ids.invoice]]],
    ["the community's clock", () => [`update billing.communities set clock_offset = interval '100 years' where id = $1`, [ids.community]]],
    ['an idempotency record', () => [`insert into billing.idempotency_keys (community_id, endpoint, key, request_hash, response_status, expires_at) values ($1, 'POST /x', 'k', 'h', 200, now() + interval '1 day')`, [ids.community]]],
    ['a member deletion', () => [`delete from billing.members where id = $1`, [ids.member]]],
  ];
  for (const [what, sql] of forgeries) {
    test(`forging ${what} is refused`, async () => {
      const [text, values] = sql();
      await expect(asApiIn(text, values)).rejects.toThrow(/permission denied/);
    });
  }

  test('billing_api holds no INSERT, UPDATE or DELETE on any table of billing, nor UPDATE of a column', async () => {
    const { rows } = await owner.query(`
      select format('%I.%I', n.nspname, c.relname) as t, p.privilege_type
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      cross join lateral (values ('INSERT'), ('UPDATE'), ('DELETE')) p(privilege_type)
      where n.nspname in ('billing', 'billing_private') and c.relkind in ('r', 'p')
        and (has_table_privilege('billing_api', c.oid, p.privilege_type)
          or (p.privilege_type in ('INSERT', 'UPDATE') and has_any_column_privilege('billing_api', c.oid, p.privilege_type)))
      order by 1, 2`);
    expect(rows).toEqual([]);
  });
});
