// billing sql-access: a PostgreSQL login per community for direct, read-only SQL. Its
// community comes from the login itself (billing_private.operator_roles), so no
// setting, role switch, function, catalog view or COPY shows it another community.
import pg from 'pg';
import { cli } from '../support/cli';
import { grantSqlAccess } from '../../src/domain/communities/sql-access';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { TEST_APP_DB, TEST_DB, TEST_WORKER_DB } from '../support/app';

let owner: pg.Pool;
let a: string;
let b: string;
let granted: { community_id: string; role: string; created_at: string; connection_string: string };
let op: pg.Pool;


async function seed(name: string, clockDays: number): Promise<string> {
  const q = async (sql: string, values: unknown[] = []) => (await owner.query(sql, values)).rows[0];
  const community = (await q(`insert into billing.communities (name, clock_offset) values ($1, make_interval(days => $2)) returning id`, [name, clockDays])).id;
  const tier = (await q(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold') returning id`, [community])).id;
  const plan = (await q(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval) values ($1, $2, 'gold-m', 1500, 'usd', 'month') returning id`, [community, tier])).id;
  const member = (await q(`insert into billing.members (community_id) values ($1) returning id`, [community])).id;
  await q(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end) values ($1, $2, $3, 'active', now() + interval '30 days')`, [community, member, plan]);
  await q(`insert into billing_private.api_keys (community_id, prefix, key_hash, scopes) values ($1, 'bk_x', $2, '{}')`, [community, `hash-${community}`]);
  return community;
}

/** One statement (or a few) on one operator connection. */
async function asOperator<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await op.connect();
  try {
    return await fn(client);
  } finally {
    await client.query('rollback').catch(() => {});
    await client.query('reset all').catch(() => {});
    client.release();
  }
}

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  process.env.DATABASE_URL = TEST_DB();
  a = await seed('operator A', 0);
  b = await seed('operator B', 100);
  const r = await cli('sql-access', 'grant', '--community', a, '--json');
  expect(r.code).toBe(0);
  granted = JSON.parse(r.out);
  op = new pg.Pool({ connectionString: granted.connection_string, max: 2 });
});
afterAll(async () => {
  await op?.end();
  await cli('sql-access', 'revoke', '--community', a, '--json');
  await owner.end();
});

test('grant prints one JSON document with a connection string for a random role name', () => {
  expect(granted).toEqual({ community_id: a, role: expect.stringMatching(/^billing_op_[0-9a-f]{16}$/), created_at: expect.any(String),
    connection_string: expect.stringContaining(`${granted.role}:`) });
  expect(granted.role).not.toContain(a);
});

test('list shows the login; a second grant for the community fails with one line on stderr', async () => {
  const list = await cli('sql-access', 'list', '--json');
  expect(list.code).toBe(0);
  expect(JSON.parse(list.out).data).toContainEqual({ community_id: a, role: granted.role, created_at: granted.created_at });
  const again = await cli('sql-access', 'grant', '--community', a, '--json');
  expect(again.code).toBe(1);
  expect(again.out).toBe('');
  expect(again.err.trim().split('\n')).toHaveLength(1);
  const unknown = await cli('sql-access', 'grant', '--community', 'com_nope', '--json');
  expect([unknown.code, unknown.err]).toEqual([1, expect.stringMatching(/no community com_nope/)]);
});

test('the login is a member of billing_operator only, with a statement_timeout and a connection limit', async () => {
  const { rows } = await owner.query(`select rolconnlimit, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls,
      array(select g.rolname::text from pg_auth_members m join pg_roles g on g.oid = m.roleid where m.member = r.oid) as groups
    from pg_roles r where rolname = $1`, [granted.role]);
  expect(rows[0]).toEqual({ rolconnlimit: 5, rolsuper: false, rolcreaterole: false, rolcreatedb: false, rolbypassrls: false, groups: ['billing_operator'] });
  const settings = await asOperator((c) => c.query(`select current_setting('statement_timeout') as st, current_setting('default_transaction_read_only') as ro`));
  expect(settings.rows[0]).toEqual({ st: '30s', ro: 'on' });
});

/** Every community id the operator sees in every table of billing and view of analytics. */
async function visibleCommunities(c: pg.PoolClient): Promise<string[]> {
  const { rows: tables } = await c.query<{ t: string; col: string }>(`
    select format('%I.%I', n.nspname, c.relname) as t, case when c.relname = 'communities' then 'id' else 'community_id' end as col
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where (n.nspname = 'billing' and c.relkind = 'r') or (n.nspname = 'analytics' and c.relkind = 'v')`);
  expect(tables.length).toBeGreaterThan(25);
  const seen = new Set<string>();
  for (const { t, col } of tables) {
    const { rows } = await c.query(`select distinct ${col}::text as id from ${t}`);
    for (const r of rows) seen.add(r.id);
  }
  return [...seen].sort();
}

test('it reads its own community in every billing table and analytics view, and only that one', async () => {
  expect(await asOperator(visibleCommunities)).toEqual([a]);
  const mrr = await asOperator((c) => c.query('select community_id, mrr_cents from analytics.mrr'));
  expect(mrr.rows).toEqual([{ community_id: a, mrr_cents: 1500 }]);
});

test('setting app.community_id (SET, set_config, in a transaction) changes nothing', async () => {
  await asOperator(async (c) => {
    await c.query(`set app.community_id = '${b}'`);
    expect(await visibleCommunities(c)).toEqual([a]);
    await c.query('begin');
    await c.query(`select set_config('app.community_id', $1, true)`, [b]);
    expect((await c.query('select billing.current_community_id() as id')).rows[0].id).toBe(a);
    expect(await visibleCommunities(c)).toEqual([a]);
  });
});

test('SET ROLE to the API role, the owner or postgres is refused; to billing_operator it changes nothing', async () => {
  const ownerName = (await owner.query('select current_user as u')).rows[0].u;
  for (const target of ['billing_api', 'billing_writer', 'billing_app', 'billing_worker', ownerName, 'postgres']) {
    await asOperator(async (c) => {
      await expect(c.query(`set role ${pg.escapeIdentifier(target)}`)).rejects.toThrow(/permission denied to set role/);
    });
  }
  await asOperator(async (c) => {
    await c.query('set role billing_operator');
    await c.query(`set app.community_id = '${b}'`);
    expect((await c.query('select billing.current_community_id() as id')).rows[0].id).toBe(a);
    const { rows } = await c.query('select distinct community_id from billing.subscriptions');
    expect(rows).toEqual([{ community_id: a }]);
  });
});

test('the API login and the owner (SET ROLE billing_api) are bound by app.community_id; no login is a member of the owner probe', async () => {
  const api = createApiPool(TEST_APP_DB(), 1);
  const ownerClient = await owner.connect();
  try {
    for (const c of [api, ownerClient]) {
      await c.query('begin');
      if (c === ownerClient) await c.query('set local role billing_api');
      await c.query(`select set_config('app.community_id', $1, true)`, [b]);
      expect((await c.query('select billing.current_community_id() as id')).rows[0].id).toBe(b);
      expect((await c.query('select distinct community_id from billing.subscriptions')).rows).toEqual([{ community_id: b }]);
      await c.query('rollback');
    }
    // Superusers and the owner are members of every role they made; the service's and
    // the operator's logins are not (else they would read app.community_id).
    const { rows } = await owner.query(`select r.rolname::text as name, pg_has_role(r.oid, 'billing_owner_probe', 'MEMBER') as probe
      from pg_roles r where r.rolname = any($1) order by 1`, [[granted.role, 'billing_app', 'billing_api', 'billing_worker', 'billing_writer']]);
    expect(rows).toHaveLength(5);
    expect(rows.filter((r) => r.probe)).toEqual([]);
  } finally {
    ownerClient.release();
    await api.end();
  }
});

test('billing.current_community_id() is inlined into the statements that call it (planned once, not per statement)', async () => {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query('set local role billing_api');
    const plan = (await c.query(`explain verbose select id from billing.subscriptions where community_id = billing.current_community_id()`))
      .rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain('pg_has_role(SESSION_USER');
    expect(plan).not.toContain('current_community_id()');
  } finally {
    await c.query('rollback');
    c.release();
  }
});

test('every function of ours it can execute is on a short list, and none shows the other community', async () => {
  const { rows } = await owner.query(`
    select p.oid::regprocedure::text as fn from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname in ('billing', 'billing_api', 'billing_private', 'analytics', 'graphile_worker')
      and has_function_privilege($1, p.oid, 'execute') order by 1`, [granted.role]);
  expect(rows.map((r) => r.fn)).toEqual([
    'billing.community_now(text)', 'billing.current_community_id()', 'billing.iso(timestamp with time zone)', 'billing.now()',
    'billing.subscription_discount_cents(billing.subscriptions,bigint,timestamp with time zone)',
    'billing_private.operator_community_id()',
  ]);
  await asOperator(async (c) => {
    await c.query(`set app.community_id = '${b}'`);
    const r = (await c.query(`select billing.current_community_id() as cur, billing_private.operator_community_id() as op,
      extract(epoch from billing.now() - now())::int as own_offset, extract(epoch from billing.community_now($1) - now())::int as other_offset`, [b])).rows[0];
    // B's clock is 100 days ahead; the operator of A cannot read it.
    expect(r).toEqual({ cur: a, op: a, own_offset: 0, other_offset: 0 });
  });
  for (const sql of ['select billing_api.subscriptions_list(\'{}\')', `select billing.gate_open(null, null, '{}', null)`, `select billing.apply_due('${b}')`]) {
    await asOperator(async (c) => { await expect(c.query(sql)).rejects.toThrow(/permission denied/); });
  }
});

test('billing_private, graphile_worker and writes are refused', async () => {
  for (const sql of ['select * from billing_private.api_keys', 'select * from billing_private.operator_roles',
    'select * from billing_private.webhook_secrets', 'select * from graphile_worker._private_jobs', 'select * from graphile_worker.jobs',
    `update billing.communities set clock_offset = '0'`, `insert into billing.members (community_id) values ('${a}')`]) {
    await asOperator(async (c) => {
      await expect(c.query(sql)).rejects.toThrow(/permission denied|read-only transaction/);
    });
  }
  await asOperator(async (c) => {
    await c.query('begin read write');
    await expect(c.query(`insert into billing.members (community_id) values ('${a}')`)).rejects.toThrow(/permission denied/);
  });
});

test("the catalog's role settings show no community, and COPY TO PROGRAM is refused", async () => {
  await asOperator(async (c) => {
    const { rows } = await c.query(`select coalesce(string_agg(r.rolname || ' ' || coalesce(r.rolconfig::text, ''), ' '), '') as roles,
      (select coalesce(string_agg(s.setconfig::text, ' '), '') from pg_db_role_setting s) as settings from pg_roles r`);
    for (const id of [a, b]) {
      expect(rows[0].roles).not.toContain(id);
      expect(rows[0].settings).not.toContain(id);
    }
  });
  await asOperator(async (c) => {
    await expect(c.query(`copy (select 1) to program 'true'`)).rejects.toThrow(/permission denied|must be superuser|pg_execute_server_program/);
  });
  await asOperator(async (c) => {
    await expect(c.query(`copy billing.subscriptions to '/tmp/billing-op-copy'`)).rejects.toThrow(/permission denied|must be superuser|pg_write_server_files/);
  });
});

// ---- issue 27 item 5: statistics, and read-only as rights ---------------------------------

const STAT_READS = [
  `select n_live_tup from pg_stat_user_tables where relname = 'subscriptions'`,
  'select * from pg_stat_all_tables limit 1', 'select * from pg_stat_xact_user_tables limit 1',
  'select * from pg_statio_user_tables limit 1', 'select * from pg_stat_user_indexes limit 1',
  'select * from pg_stat_database limit 1', 'select * from pg_stat_user_functions limit 1',
  `select reltuples from pg_class where oid = 'billing.subscriptions'::regclass`,
  `select relpages from pg_class where oid = 'billing.events'::regclass`,
  `select * from pg_class where oid = 'billing.events'::regclass`,
  `select pg_relation_size('billing.subscriptions')`, `select pg_total_relation_size('billing.events')`,
  `select pg_table_size('billing.events')`, `select pg_indexes_size('billing.events')`,
  'select pg_database_size(current_database())',
  `select pg_stat_get_live_tuples('billing.subscriptions'::regclass)`,
  `select pg_stat_get_tuples_inserted('billing.events'::regclass)`,
];

test('an operator login reads no statistic or size that counts other communities\' rows', async () => {
  await owner.query('analyze billing.subscriptions');
  for (const sql of STAT_READS) {
    await asOperator(async (c) => { await expect(c.query(sql)).rejects.toThrow(/permission denied/); });
  }
  await asOperator(async (c) => {
    // Every statistics view and function of the catalog, not only those tried above.
    const views = await c.query(`select relname::text as v from pg_class where relnamespace = 'pg_catalog'::regnamespace and relkind = 'v'
      and (relname like 'pg\\_stat\\_%' or relname like 'pg\\_statio\\_%') and has_table_privilege(oid, 'select') order by 1`);
    expect(views.rows.map((r) => r.v)).toEqual(['pg_stat_activity', 'pg_stat_gssapi', 'pg_stat_ssl']);
    const fns = await c.query(`select distinct proname::text as f from pg_proc where pronamespace = 'pg_catalog'::regnamespace
      and proname like 'pg\\_stat\\_get\\_%' and has_function_privilege(oid, 'execute') order by 1`);
    expect(fns.rows.map((r) => r.f)).toEqual(['pg_stat_get_activity']);
    // pg_stats shows no table whose row security applies to the login.
    expect((await c.query(`select count(*)::int as n from pg_stats where schemaname = 'billing'`)).rows[0].n).toBe(0);
    // What tools need still works: names and kinds of relations, its own sessions.
    const names = await c.query(`select relname::text as name, relkind::text as kind from pg_class where oid = 'billing.subscriptions'::regclass`);
    expect(names.rows).toEqual([{ name: 'subscriptions', kind: 'r' }]);
    expect((await c.query('select count(*)::int as n from pg_stat_activity where pid = pg_backend_pid()')).rows[0].n).toBe(1);
  });
  expect((await owner.query(`select count(*)::int as n from pg_stats where schemaname = 'billing' and tablename = 'subscriptions'`)).rows[0].n).toBeGreaterThan(0);
  expect((await owner.query('select billing_private.operator_fence_gaps() as g')).rows[0].g).toEqual([]);
});

test("the service's roles and the owner keep the statistics and sizes", async () => {
  const sql = `select (select sum(n_tup_ins) from pg_stat_user_tables where schemaname = 'billing') >= 0 as stats,
    (select reltuples from pg_class where oid = 'pg_catalog.pg_class'::regclass) is not null as reltuples,
    pg_relation_size('pg_catalog.pg_class') >= 0 as size, pg_stat_get_live_tuples('pg_catalog.pg_class'::regclass) >= 0 as fn,
    (select count(*) from pg_stat_xact_user_functions) >= 0 as fns`;
  const all = { stats: true, reltuples: true, size: true, fn: true, fns: true };
  expect((await owner.query(sql)).rows[0]).toEqual(all);
  for (const url of [TEST_APP_DB(), TEST_WORKER_DB()]) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      expect((await c.query(sql)).rows[0]).toEqual(all);
    } finally {
      await c.end();
    }
  }
  const c = await owner.connect();
  try {
    for (const role of ['billing_api', 'billing_writer']) {
      await c.query('begin');
      await c.query(`set local role ${role}`);
      expect((await c.query(sql)).rows[0]).toEqual(all);
      await c.query('rollback');
    }
  } finally {
    c.release();
  }
});

test('read-only is the rights of the role: with default_transaction_read_only off, nothing can be written', async () => {
  const attempts = [
    `insert into billing.members (community_id) values ('${a}')`, `update billing.communities set name = 'x'`,
    `delete from billing.events`, `truncate billing.events`,
    'create temporary table scratch (x int)', 'create table public.scratch (x int)', 'create schema scratch',
    'create function pg_temp.f() returns int language sql as $$ select 1 $$',
    'select lo_create(0)', 'select lo_creat(-1)', `select lo_from_bytea(0, '\\x00')`,
    `create view billing.scratch as select 1`, `create table analytics.scratch (x int)`,
  ];
  for (const sql of attempts) {
    await asOperator(async (c) => {
      await c.query('set default_transaction_read_only = off');
      await c.query('begin read write');
      expect((await c.query(`select current_setting('transaction_read_only') as ro`)).rows[0].ro).toBe('off');
      await expect(c.query(sql)).rejects.toThrow(/permission denied/);
    });
  }
  // And by the catalog: no write right on any relation, sequence, schema or the database.
  const { rows } = await owner.query(`select
      -- pg_settings: PUBLIC may UPDATE it, which is SET (this session's settings only).
      (select count(*)::int from pg_class c where c.relkind in ('r', 'p', 'v', 'm', 'f') and c.oid <> 'pg_catalog.pg_settings'::regclass
         and has_table_privilege($1, c.oid, 'insert, update, delete, truncate, references, trigger')) as tables,
      (select count(*)::int from pg_class c where case when c.relkind = 'S' then has_sequence_privilege($1, c.oid, 'usage, update') end) as sequences,
      (select count(*)::int from pg_namespace n where has_schema_privilege($1, n.oid, 'create')) as schemas,
      has_database_privilege($1, current_database(), 'create, temporary') as database,
      has_function_privilege($1, 'pg_catalog.lo_create(oid)', 'execute') as large_objects`, [granted.role]);
  expect(rows[0]).toEqual({ tables: 0, sequences: 0, schemas: 0, database: false, large_objects: false });
});

test('grant refuses while the fence has a gap, unless told to accept it', async () => {
  // The gap exists only inside this transaction, so other files' grants never see it.
  const client = await owner.connect();
  try {
    await client.query('begin');
    await client.query('grant select on pg_catalog.pg_stat_user_tables to billing_operator');
    expect((await client.query('select billing_private.operator_fence_gaps() as g')).rows[0].g).toEqual(['pg_stat_user_tables']);
    const inTransaction = { query: client.query.bind(client), connect: async () => { throw new Error('no login may be made'); } } as unknown as pg.Pool;
    await expect(grantSqlAccess(inTransaction, TEST_DB(), b)).rejects.toThrow(/pg_stat_user_tables.*operator_fence.*--allow-shared-statistics/s);
    await expect(grantSqlAccess(inTransaction, TEST_DB(), b, { allowSharedStatistics: true })).rejects.toThrow(/no login may be made/);
  } finally {
    await client.query('rollback');
    client.release();
  }
  const accepted = await cli('sql-access', 'grant', '--community', b, '--allow-shared-statistics', '--json');
  try {
    expect(accepted.code).toBe(0);
    expect(JSON.parse(accepted.out).community_id).toBe(b);
  } finally {
    await cli('sql-access', 'revoke', '--community', b, '--json');
  }
});

test('revoke drops the login: it can no longer connect, and list no longer shows it', async () => {
  const grantB = JSON.parse((await cli('sql-access', 'grant', '--community', b, '--json')).out);
  const pool = new pg.Pool({ connectionString: grantB.connection_string, max: 1 });
  // revoke ends the idle session: the pool hears of it as an error event.
  const ended: Error[] = [];
  pool.on('error', (err) => { ended.push(err); });
  expect((await pool.query('select distinct community_id from billing.subscriptions')).rows).toEqual([{ community_id: b }]);
  const r = await cli('sql-access', 'revoke', '--community', b, '--json');
  expect([r.code, JSON.parse(r.out)]).toEqual([0, { community_id: b, revoked: [grantB.role] }]);
  await expect(pool.query('select 1')).rejects.toThrow();
  await pool.end().catch(() => {});
  // Whether the pool saw the termination as an idle-client error or on its query is a race.
  for (const e of ended) expect(e.message).toMatch(/terminating connection|Connection terminated/);
  const fresh = new pg.Client({ connectionString: grantB.connection_string });
  await expect(fresh.connect()).rejects.toThrow(/does not exist|authentication failed/);
  await fresh.end().catch(() => {});
  expect(JSON.parse((await cli('sql-access', 'list', '--json')).out).data.map((x: { role: string }) => x.role)).not.toContain(grantB.role);
});
