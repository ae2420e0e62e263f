// The statements every API request runs call no SQL function that PostgreSQL plans
// again on each call (docs/development.md, speed conventions): a `language sql`
// function is fast only when it is inlined, and one that cannot be (SECURITY DEFINER,
// a SET clause, a FROM or a subquery) costs 40-190 us per call in parse and plan.
// With track_functions = 'all' PostgreSQL counts every function it calls and never
// an inlined one, so after the hot paths ran, the transaction's counts must hold no
// SQL-language function.
import pg from 'pg';
import { hashKey } from '../../src/core/ids';
import { createTenant, TEST_DB } from '../support/app';
import { Seed, subscriptionSource } from '../support/seed';

const LIMITS = { key_per_minute: 1e6, key_burst: 1e6, ip_per_minute: 1e6, ip_burst: 1e6 };

let owner: pg.Pool;
let client: pg.PoolClient;

beforeAll(async () => {
  owner = new pg.Pool({ connectionString: TEST_DB(), max: 2 });
  client = await owner.connect();
});
afterAll(async () => {
  client.release();
  await owner.end();
});

/**
 * The SQL-language functions (name: calls) that ran without being inlined when run()
 * ran a second time in this session. The first run plans every statement (and folds
 * immutable calls of constants then, which counts them once); the second shows what
 * each call costs from then on.
 */
async function plannedPerCall(run: (c: pg.PoolClient) => Promise<void>, role: string | null = 'billing_api'): Promise<Record<string, number>> {
  let seen: Record<string, number> = {};
  for (const measured of [false, true]) {
    await client.query('begin');
    try {
      // Superuser-only setting, then the API's own role, as the API's login runs it.
      await client.query(`set local track_functions = 'all'`);
      if (role) await client.query(`set local role ${role}`);
      await run(client);
      if (!measured) continue;
      const { rows } = await client.query<{ name: string; calls: string }>(
        `select f.schemaname || '.' || f.funcname as name, f.calls
         from pg_stat_xact_user_functions f join pg_proc p on p.oid = f.funcid
         where p.prolang = (select oid from pg_language where lanname = 'sql')
           -- an immutable constant (billing.api_version, the events' default) is folded
           -- when a statement is planned: counted once per plan, never per row
           and not (p.provolatile = 'i' and p.pronargs = 0)
         order by 1`);
      const all = await client.query<{ n: string }>('select count(*) as n from pg_stat_xact_user_functions');
      // The counting itself works: the plpgsql functions of the path are there.
      expect(Number(all.rows[0].n)).toBeGreaterThan(0);
      seen = Object.fromEntries(rows.map((r) => [r.name, Number(r.calls)]));
    } finally {
      await client.query('rollback');
    }
  }
  return seen;
}

test('the entitlement check, a list and the per-request token path plan no SQL function per call', async () => {
  const tenant = await createTenant(owner);
  const seed = new Seed(owner, tenant.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const chat = await seed.entitlement('chat');
  const member = await seed.member({ discord: 'hot-1' });
  const sub = await seed.subscription(member, plan);
  await seed.memberEntitlement(member, chat, { sources: [subscriptionSource(sub, tier, plan)] });
  const hash = hashKey(tenant.key);
  const check = { platform: 'discord', platform_uid: 'hot-1' };

  const seen = await plannedPerCall(async (c) => {
    // A leased token (the hot path), then the lease itself.
    const leased = await c.query(`select billing.api_call($1, null, null, 'members:read', 'entitlements_check', $2, null, true) as r`, [hash, check]);
    expect(leased.rows[0].r.result.entitled).toBe(true);
    await c.query('select billing_private.lease_key_tokens($1, 6, $2, 0)', [hash, LIMITS]);
    await c.query(`select billing.api_call($1, null, null, 'subscriptions:read', 'subscriptions_list', '{"limit": 100}', null, true) as r`, [hash]);
    // A token per request (no lease: bursts under 20, sessions).
    const perRequest = await c.query(`select billing.api_call($1, '127.0.0.1', $2, 'members:read', 'entitlements_check', $3, null) as r`, [hash, LIMITS, check]);
    expect(perRequest.rows[0].r.ok).toBe(true);
    // An unknown key: the IP's bucket.
    await c.query(`select billing.api_call($1, '127.0.0.1', $2, 'members:read', 'entitlements_check', $3, null) as r`, [hashKey('sk_test_unknown'), LIMITS, check]);
  });
  expect(seen).toEqual({});
});

test('a source change refreshes its ledger (one member, and a batch) with no SQL function planned per call', async () => {
  const tenant = await createTenant(owner);
  const seed = new Seed(owner, tenant.communityId);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const chat = await seed.entitlement('chat');
  await owner.query('insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)',
    [tenant.communityId, tier, chat]);
  const members: string[] = [];
  for (let i = 0; i < 12; i++) members.push(await seed.member({ discord: `hot-ledger-${i}` }));
  const subs: string[] = [];
  for (const m of members) subs.push(await seed.subscription(m, plan));

  // As the owner: the triggers run with the writer's rights whichever operation wrote.
  const seen = await plannedPerCall(async (c) => {
    const flip = `update billing.subscriptions set status = case when status = 'active' then 'past_due' else 'active' end
      where community_id = $1 and id = any ($2)`;
    // One row: billing.ledger_refresh_member. Twelve: billing.ledger_refresh_each.
    await c.query(flip, [tenant.communityId, [subs[0]]]);
    await c.query(flip, [tenant.communityId, subs]);
    await c.query(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency)
      select $1, m, $2, 900, 'usd' from unnest($3::text[]) m`, [tenant.communityId, plan, members]);
    const { rows: [{ n }] } = await c.query(`select count(*)::int as n from billing.events
      where community_id = $1 and type like 'member.entitlement.%'`, [tenant.communityId]);
    expect(n).toBeGreaterThan(0);
  }, null);
  expect(seen).toEqual({});
});
