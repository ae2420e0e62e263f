// The audit log is append-only (issue 31 item 3, docs/decisions/audit-log.md): every role
// the service has (the API's billing_api and billing_app, the definer role
// billing_writer, the worker's login, an operator's SQL login) and even the owner is
// refused UPDATE, DELETE and TRUNCATE; only the retention purge deletes, and only rows
// past their community's retention. And the login's own changes, were it given a write
// right, are lines of the log naming it.
import pg from 'pg';
import { createOwnerPool } from '../../src/db/pool';
import { createCommunity } from '../../src/domain/communities/community-admin';
import { TEST_APP_DB, TEST_DB, TEST_WORKER_DB } from '../support/app';
import { cli } from '../support/cli';

let owner: pg.Pool;
let communityId: string;
let login: pg.Pool;

const ATTEMPTS = [
  `update billing.audit_log set actor_id = 'forged'`,
  'delete from billing.audit_log',
  'truncate billing.audit_log',
];

/** The community's audit rows as they are now (to prove nothing changed). */
const snapshot = async () => (await owner.query('select * from billing.audit_log where community_id = $1 order by id', [communityId])).rows;

/** Runs sql in its own transaction on pool (after the given setup statements); answers its error message. */
async function refusal(pool: pg.Pool, sql: string, setup: string[] = []): Promise<string> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    for (const s of setup) await client.query(s);
    await client.query(sql);
    await client.query('commit');
    return 'allowed';
  } catch (err) {
    return (err as Error).message;
  } finally {
    await client.query('rollback').catch(() => {});
    client.release();
  }
}

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  process.env.DATABASE_URL = TEST_DB();
  ({ id: communityId } = await createCommunity(owner, 'Append-only audit'));
  // A few lines: the community itself, a tier, its change.
  await owner.query(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold')`, [communityId]);
  await owner.query(`update billing.tiers set name = 'Golden' where community_id = $1`, [communityId]);
  const granted = await cli('sql-access', 'grant', '--community', communityId, '--json');
  expect(granted.code).toBe(0);
  login = new pg.Pool({ connectionString: (JSON.parse(granted.out) as { connection_string: string }).connection_string, max: 1 });
});
afterAll(async () => {
  await login?.end();
  await cli('sql-access', 'revoke', '--community', communityId, '--json');
  await owner.end();
});

test('the log holds the seeded changes (the attempts below have rows to change)', async () => {
  const rows = await snapshot();
  expect(rows.map((r) => [r.table_name, r.operation])).toEqual([['communities', 'insert'], ['tiers', 'insert'], ['tiers', 'update'],
    ['operator_roles', 'insert']]);
});

test.each([
  ['billing_api', () => owner, [`set local role billing_api`]],
  ['billing_writer', () => owner, [`set local role billing_writer`]],
])('%s cannot update, delete or truncate the log', async (_role, pool, setup) => {
  const before = await snapshot();
  for (const sql of ATTEMPTS) {
    expect([sql, await refusal(pool(), sql, [...setup, `select set_config('app.community_id', '${communityId}', true)`])])
      .toEqual([sql, expect.stringMatching(/permission denied for table audit_log/)]);
  }
  expect([_role, await refusal(pool(), `insert into billing.audit_log (community_id, actor_type, table_name, operation) values ('${communityId}', 'service', 'tiers', 'insert')`, setup)])
    .toEqual([_role, expect.stringMatching(/permission denied for table audit_log/)]);
  expect(await snapshot()).toEqual(before);
});

test('the API login (billing_app) and the worker login (billing_worker) cannot update, delete or truncate it', async () => {
  const before = await snapshot();
  for (const url of [TEST_APP_DB(), TEST_WORKER_DB()]) {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      for (const sql of ATTEMPTS) {
        // Neither login may even use the schema: the API switches to billing_api, the worker calls its doors.
        expect([url.split('//')[1].split(':')[0], sql, await refusal(pool, sql)])
          .toEqual([expect.any(String), sql, expect.stringMatching(/permission denied for (table audit_log|schema billing)/)]);
      }
      // Setting the purge's flag by hand gives no right.
      expect(await refusal(pool, 'delete from billing.audit_log', [`set local app.audit_purge = 'on'`])).toMatch(/permission denied/);
      expect(await refusal(pool, 'select billing_private.audit_purge()')).toMatch(/permission denied/);
    } finally {
      await pool.end();
    }
  }
  expect(await snapshot()).toEqual(before);
});

test("an operator's SQL login reads its community's log and cannot change it, even with read-only off", async () => {
  const before = await snapshot();
  const { rows } = await login.query('select table_name, operation from billing.audit_log order by id');
  expect(rows).toEqual(before.map((r) => ({ table_name: r.table_name, operation: r.operation })));
  for (const sql of ATTEMPTS) {
    expect([sql, await refusal(login, sql, ['set transaction read write'])])
      .toEqual([sql, expect.stringMatching(/permission denied for table audit_log/)]);
  }
  expect(await snapshot()).toEqual(before);
});

test('the owner is refused UPDATE and TRUNCATE, and DELETE outside the purge', async () => {
  const before = await snapshot();
  for (const sql of ATTEMPTS) {
    expect([sql, await refusal(owner, `${sql}${sql.startsWith('truncate') ? '' : ` where community_id = '${communityId}'`}`)])
      .toEqual([sql, expect.stringMatching(/billing\.audit_log is append-only/)]);
  }
  // With the purge's flag, a row within the community's retention still cannot go.
  expect(await refusal(owner, `delete from billing.audit_log where community_id = '${communityId}'`, [`set local app.audit_purge = 'on'`]))
    .toMatch(/within its community's audit_retention_days cannot be deleted/);
  expect(await snapshot()).toEqual(before);
});

test("an operator's SQL login, were it ever given a write right, is named by its login role in the log", async () => {
  const { rows: [{ role }] } = await owner.query('select role_name as role from billing_private.operator_roles where community_id = $1', [communityId]);
  await owner.query(`grant update (name) on billing.tiers to ${role}`);
  try {
    const client = await login.connect();
    try {
      await client.query('begin read write');
      // A request's settings cannot pass the login off as a key.
      await client.query(`select set_config('app.key_id', 'key_forged', true), set_config('app.request_id', 'forged', true)`);
      await client.query(`update billing.tiers set name = 'Gold by SQL' where key = 'gold'`);
      await client.query('commit');
    } finally {
      client.release();
    }
  } finally {
    await owner.query(`revoke update (name) on billing.tiers from ${role}`);
  }
  const rows = await snapshot();
  expect(rows.at(-1)).toMatchObject({ table_name: 'tiers', operation: 'update', actor_type: 'sql_login', actor_id: role, key_id: null,
    request_id: null, changed: ['name'], before: expect.objectContaining({ name: 'Golden' }), after: expect.objectContaining({ name: 'Gold by SQL' }) });
});
