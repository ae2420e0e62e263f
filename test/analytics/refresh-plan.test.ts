// The rollup's refresh (billing_private.analytics_refresh) runs with one kept generic
// plan, which expects about ten subscriptions per statement. A part of it that looks
// up the statement's own list once per row is then a nested loop, quadratic in the
// statement's rows: whether a subscription had recorded MRR movements was such a
// search, 60 ms of a 1,000-row cancel batch's 100 in bench/ledger's database. Which
// join the planner picks depends on the tables' statistics, so this test takes hash
// and merge joins away before the plan is made (a new session, whose first call plans
// the statement): then every join is a nested loop, and a part that searches the
// movements' CTE (rec) per row shows it. rec is read once, whatever the join method.
import pg from 'pg';
import { createTenant, TEST_DB } from '../support/app';

let owner: pg.Pool;
beforeAll(() => { owner = new pg.Pool({ connectionString: TEST_DB(), max: 2 }); });
afterAll(() => owner.end());

const ROWS = 300;

test('a batch of subscription changes reads its recorded movements once, not once per row', async () => {
  const { communityId: c } = await createTenant(owner);
  await owner.query(`insert into billing.tiers (community_id, key, name, rank) values ($1, 'gold', 'Gold', 0)`, [c]);
  await owner.query(`insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
    select $1, t.id, 'gold-m', 'Gold monthly', 1000, 'usd', 'month' from billing.tiers t where t.community_id = $1`, [c]);
  await owner.query(`insert into billing.members (community_id, id) select $1, billing.gen_id('mem') from generate_series(1, ${ROWS})`, [c]);
  await owner.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end, price_cents)
    select $1, m.id, p.id, 'active', now(), now() + interval '30 days', 1000
    from billing.members m join billing.plans p on p.community_id = m.community_id where m.community_id = $1`, [c]);
  const { rows: [{ n }] } = await owner.query(`select count(distinct subscription_id)::int as n from billing.mrr_movements where community_id = $1`, [c]);
  expect(n).toBe(ROWS); // each has recorded movements: the path that searched the batch

  const client = new pg.Client({ connectionString: TEST_DB() });
  await client.connect();
  const plans: string[] = [];
  client.on('notice', (msg) => { if (/Insert on analytics_deltas/.test(msg.message ?? '')) plans.push(msg.message!); });
  try {
    await client.query('set enable_hashjoin = off');
    await client.query('set enable_mergejoin = off');
    await client.query('begin');
    await client.query(`load 'auto_explain'`);
    for (const s of ['log_min_duration = 0', 'log_analyze = on', 'log_timing = off', 'log_nested_statements = on', 'log_level = notice']) {
      await client.query(`set local auto_explain.${s}`);
    }
    await client.query(`update billing.subscriptions set status = 'cancelling', cancel_at = current_period_end where community_id = $1`, [c]);
    await client.query('rollback');
  } finally {
    await client.end();
  }
  expect(plans).toHaveLength(1);
  const perRow = plans[0].split('\n').filter((l) => /CTE Scan on rec\b/.test(l) && Number(/loops=(\d+)/.exec(l)?.[1] ?? 1) > 1);
  expect(perRow).toEqual([]);
});
