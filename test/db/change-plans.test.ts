// A subscription's change plans nothing again once its statements are warm: each
// change plans only its own UPDATE (bench/ledger's single-row change, issue 28).
//
// What this caught: the events' foreign key check on billing.communities. The ledger's
// refresh runs with enable_seqscan off and force_generic_plan, so the check's generic
// plan was made there (an index scan); outside it, in the outbox trigger that writes
// the subscription's own event, a one-row communities table made that generic plan
// look dearer than a custom sequential scan, and PostgreSQL planned the check again on
// every change, for ever. Counted with debug_print_plan: one LOG notice per plan made.
import pg from 'pg';
import { createTenant } from '../support/app';
import { Seed } from '../support/seed';
import { isolatedDatabase } from '../support/webhooks';

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let owner: pg.Pool;

beforeAll(async () => {
  db = await isolatedDatabase();
  owner = new pg.Pool({ connectionString: db.url, max: 2 });
}, 60_000);
afterAll(async () => {
  await owner.end();
  await db.drop();
});

test('a single-row status change plans only itself once warm, in a one-community database', async () => {
  // One community, as most deployments run: its communities table holds one row.
  const { communityId: c } = await createTenant(owner);
  const seed = new Seed(owner, c);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const chat = await seed.entitlement('chat');
  await owner.query('insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)', [c, tier, chat]);
  const subs: string[] = [];
  for (let i = 0; i < 12; i++) subs.push(await seed.subscription(await seed.member({ discord: `plans-${i}` }), plan));
  // A live database's statistics (autovacuum's analyze).
  await owner.query('analyze');

  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  let plans = 0;
  client.on('notice', (n) => { if (n.message?.startsWith('plan')) plans += 1; });
  try {
    const flip = (id: string) => client.query(
      `update billing.subscriptions set status = case when status = 'active' then 'past_due' else 'active' end
       where community_id = $1 and id = $2`, [c, id]);
    // Warm: every statement of both directions (revoke, grant) more than five times.
    for (let round = 0; round < 2; round++) for (const id of subs) { await flip(id); await flip(id); }
    await client.query('set debug_print_plan = on');
    await client.query('set client_min_messages = log');
    plans = 0;
    for (const id of subs.slice(0, 10)) await flip(id);
    await client.query('reset client_min_messages');
    // One plan per change: its UPDATE (an unnamed statement, planned at each call).
    expect(plans).toBe(10);
  } finally {
    await client.end();
  }
});
