// The ledger refresh keeps its plans for the session, so they must not depend on how
// big a table looked when they were made. A deployment's first purchases (or any server
// without autovacuum) plan the batch refresh while billing.purchases is empty; as
// purchases grow, a refresh must still read each member's purchases by the member's
// key, not every purchase once per member (bench/ledger's purchase phase slowed with
// each statement: 319 ms for the first 1,000, 1,582 ms for the twentieth).
// A database of its own (a clone of the migrated template), so billing.purchases
// really is empty and analyzed when the plans are made.
import pg from 'pg';
import { withDatabase } from '../../src/db/migrate';
import { createCommunity } from '../../src/domain/communities/community-admin';

const database = `billing_stale_plans_${Date.now()}_${process.pid}`;
const server = () => process.env.BILLING_TEST_SERVER!;

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: withDatabase(server(), 'postgres') });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

beforeAll(() => admin(`create database ${database} template ${process.env.BILLING_TEST_TEMPLATE}`));
afterAll(() => admin(`drop database if exists ${database} with (force)`));

test('a batch refresh planned while purchases was empty still reads a member\'s purchases by key', async () => {
  const db = new pg.Client({ connectionString: withDatabase(server(), database) });
  await db.connect();
  try {
    const { id: c } = await createCommunity(db as unknown as pg.Pool, 'Stale plans');
    const { rows: [{ tier }] } = await db.query(
      `insert into billing.tiers (community_id, key, name, billing_mode) values ($1, 't', 'T', 'one_time') returning id as tier`, [c]);
    const { rows: [{ plan }] } = await db.query(
      `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
       values ($1, $2, 'p', 'P', 900, 'usd', null) returning id as plan`, [c, tier]);
    await db.query(`with e as (insert into billing.entitlements (community_id, key, name) values ($1, 'chat', 'Chat') returning id)
      insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) select $1, $2, id from e`, [c, tier]);
    const { rows } = await db.query<{ id: string }>(
      `insert into billing.members (community_id) select $1 from generate_series(1, 2200) returning id`, [c]);
    const members = rows.map((r) => r.id);
    await db.query('analyze');

    const buy = (ids: string[]) => db.query(
      `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency)
       select $1, m, $2, 900, 'usd' from unnest($3::text[]) m`, [c, plan, ids]);
    // Ten batch refreshes (lists over 8 members) while the table is still nearly empty:
    // past the first five, the session keeps a generic plan.
    for (let i = 0; i < 10; i++) await buy(members.slice(i * 10, i * 10 + 10));
    // The table grows with nothing re-planning (no analyze), as bulk purchases would.
    await db.query('set session_replication_role = replica');
    await db.query(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency)
      select $1, m, $2, 900, 'usd' from unnest($3::text[]) m`, [c, plan, members.slice(100, 2100)]);
    await db.query('set session_replication_role = origin');

    // One more batch of 20 purchases: the purchase rows its refresh reads.
    await db.query('begin');
    await buy(members.slice(2100, 2120));
    const { rows: [read] } = await db.query<{ seq: string; idx: string; refreshed: string }>(
      `select t.seq_tup_read as seq, t.idx_tup_fetch as idx,
         (select count(*) from billing.events where community_id = $1 and type = 'member.entitlement.granted'
            and data->'member'->>'id' = any ($2)) as refreshed
       from pg_stat_xact_user_tables t where t.relid = 'billing.purchases'::regclass`, [c, members.slice(2100, 2120)]);
    await db.query('commit');
    expect(Number(read.refreshed)).toBe(20);
    // By key: each member's one purchase (and a few index probes' worth of slack). Read
    // once per member through the plan or in full, it is 2,000 rows or more per member.
    expect(Number(read.seq) + Number(read.idx)).toBeLessThan(200);
  } finally {
    await db.end();
  }
});
