// The entitlement check reads its member's ledger rows by index, not the community's
// whole ledger. Under the tenant policy only a leakproof condition can become an index
// condition: `me.member_id = coalesce(v_member, (select ...))` is not one (coalesce is
// not leakproof), and migration 000067's check read every row of the community, about
// 300 ms a check at 100,000 members (bench/renewals). Counted with the transaction's own
// table statistics, which do not depend on timing.
import pg from 'pg';
import { hashKey } from '../../src/core/ids';
import { createTenant, TEST_DB } from '../support/app';
import { Seed } from '../support/seed';

const MEMBERS = 3000;

let owner: pg.Pool;
beforeAll(() => { owner = new pg.Pool({ connectionString: TEST_DB(), max: 2 }); });
afterAll(() => owner.end());

test("a check reads its member's ledger rows, not the community's", async () => {
  const tenant = await createTenant(owner);
  const c = tenant.communityId;
  const seed = new Seed(owner, c);
  const chat = await seed.entitlement('chat');
  // Many members, each holding the entitlement, written in bulk (no triggers).
  const bulk = await owner.connect();
  try {
    await bulk.query('begin');
    await bulk.query('set local session_replication_role = replica');
    await bulk.query(`create temp table plan_members on commit drop as
      select g, billing.gen_id('mem') as id from generate_series(1, ${MEMBERS}) g`);
    await bulk.query('insert into billing.members (community_id, id) select $1, id from plan_members', [c]);
    await bulk.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
      select $1, id, 'discord', 'plan-' || g, 'user' || g from plan_members`, [c]);
    await bulk.query(`insert into billing.external_subjects (community_id, member_id, namespace, external_user_id)
      select $1, id, 'crm', 'plan-' || g from plan_members`, [c]);
    await bulk.query(`insert into billing.member_entitlements (community_id, member_id, entitlement_id, status, revision, sources, benefits, granted_at)
      select $1, id, $2, 'active', 1, '[]', '[]', now() from plan_members`, [c, chat]);
    await bulk.query('commit');
  } finally {
    bulk.release();
  }
  await owner.query('analyze billing.member_entitlements');
  await owner.query('analyze billing.member_identities');

  // As the API calls it (billing_api, a leased token); then the rows this transaction
  // read from member_entitlements, by sequential scan or through an index.
  const rowsRead = async (args: Record<string, string>): Promise<{ entitled: boolean; read: number }> => {
    const client = await owner.connect();
    try {
      await client.query('begin');
      await client.query('set local role billing_api');
      const { rows: [{ r }] } = await client.query(
        `select billing.api_call($1, null, null, 'members:read', 'entitlements_check', $2, null, true) as r`,
        [hashKey(tenant.key), args]);
      await client.query('reset role');
      const { rows: [s] } = await client.query<{ read: string }>(
        `select coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) as read from pg_stat_xact_user_tables
         where relid = 'billing.member_entitlements'::regclass`);
      return { entitled: r.result.entitled, read: Number(s.read) };
    } finally {
      await client.query('rollback');
      client.release();
    }
  };
  // The usual request (a platform pair), and one through billing.resolve_identity.
  const requests: Record<string, string>[] = [{ platform: 'discord', platform_uid: 'plan-1234' }, { namespace: 'crm', external_user_id: 'plan-77' }];
  for (const args of requests) {
    const { entitled, read } = await rowsRead(args);
    expect(entitled).toBe(true);
    expect(read).toBeLessThanOrEqual(5);
  }
  // An unknown identity reads nothing of the ledger either.
  const unknown = await rowsRead({ platform: 'discord', platform_uid: 'plan-nobody' });
  expect(unknown.entitled).toBe(false);
  expect(unknown.read).toBeLessThanOrEqual(5);
});
