// The overview's rollup (billing_private.analytics_facts and analytics_deltas) stays
// equal to the views when two transactions refresh one subscription's facts at once.
// A subscription's own writers hold its row lock until they commit, but a discount
// code's, a plan's or a discounted invoice's change refreshes the facts of every
// subscription they touch without writing those rows. Such a refresh read the
// subscription as it was before a concurrent cancel committed, then, once the cancel's
// transaction let go of the facts row, wrote those stale facts over it: the cancel was
// counted again when the subscription ended (the rollup one cancel off the views, the
// flake overview-figures saw with other workers sweeping).
import pg from 'pg';
import { createTenant, TEST_DB } from '../support/app';

let owner: pg.Pool;
beforeAll(() => { owner = new pg.Pool({ connectionString: TEST_DB(), max: 4 }); });
afterAll(() => owner.end());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function cancelsBoth(c: string): Promise<{ rollup: number; views: number }> {
  const { rows: [r] } = await owner.query(`select
      (select coalesce(sum(cancels), 0)::int from billing_private.analytics_deltas where community_id = $1) as rollup,
      (select coalesce(sum(cancels), 0)::int from analytics.daily_activity where community_id = $1) as views`, [c]);
  return r;
}

test('a discount change beside a cancel of one of its subscriptions leaves the rollup equal to the views', async () => {
  const { communityId: c } = await createTenant(owner);
  await owner.query(`insert into billing.tiers (community_id, key, name, rank) values ($1, 'gold', 'Gold', 0)`, [c]);
  const { rows: [plan] } = await owner.query(`insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
    select $1, t.id, 'gold-m', 'Gold monthly', 1000, 'usd', 'month' from billing.tiers t where t.community_id = $1 returning id`, [c]);
  const { rows: [code] } = await owner.query(`insert into billing.discount_codes (community_id, code, value_type, percent_off, duration)
    values ($1, 'TEN', 'percent', 10, 'forever') returning id`, [c]);
  const { rows: [member] } = await owner.query(`insert into billing.members (community_id) values ($1) returning id`, [c]);
  const { rows: [sub] } = await owner.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status,
      current_period_start, current_period_end, price_cents, discount_id)
    values ($1, $2, $3, 'active', now(), now() + interval '30 days', 1000, $4) returning id`, [c, member.id, plan.id, code.id]);

  const canceller = await owner.connect();
  const editor = await owner.connect();
  try {
    await canceller.query('begin');
    await canceller.query(`update billing.subscriptions set status = 'cancelling', cancel_requested_at = now(),
      cancel_at = current_period_end where community_id = $1 and id = $2`, [c, sub.id]);
    // The discount's change refreshes the subscription's facts while the cancel is open.
    const edit = editor.query(`update billing.discount_codes set percent_off = 20 where community_id = $1 and id = $2`, [c, code.id]);
    await sleep(300);
    await canceller.query('commit');
    await edit;
  } finally {
    canceller.release();
    editor.release();
  }
  expect(await cancelsBoth(c)).toEqual({ rollup: 1, views: 1 });
  // The facts hold the cancel, so the subscription's end counts no second one.
  const { rows: [facts] } = await owner.query(`select cancel_day::text from billing_private.analytics_facts
    where community_id = $1 and subscription_id = $2`, [c, sub.id]);
  const { rows: [view] } = await owner.query(`select (cancel_counted_at at time zone 'UTC')::date::text as cancel_day
    from analytics.subscription_mrr where community_id = $1 and subscription_id = $2`, [c, sub.id]);
  expect(facts.cancel_day).toBe(view.cancel_day);
  await owner.query(`update billing.subscriptions set status = 'cancelled', cancelled_at = now()
    where community_id = $1 and id = $2`, [c, sub.id]);
  expect(await cancelsBoth(c)).toEqual({ rollup: 1, views: 1 });
});
