// Database roles (docs/security.md, "Database roles"): the API and the worker connect as
// logins of their own (billing_app, billing_worker), never as the owner, so no SQL they
// run can switch back to the owner, read billing_private or create roles.
import pg from 'pg';
import { TEST_APP_DB, TEST_DB, TEST_WORKER_DB } from '../support/app';
import { createApiPool, createOwnerPool } from '../../src/db/pool';

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
