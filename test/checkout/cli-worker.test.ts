// `billing sandbox complete` / `billing sandbox advance` (operator-cli.md output
// formats) and the worker's periodic subscriptions__apply_due task.
import type { JobHelpers } from 'graphile-worker';
import { cli } from '../support/cli';
import { subscriptionsApplyDue } from '../../worker/tasks/subscriptions__apply_due';
import pg from 'pg';
import { call, startApp, TestApp, TEST_DB, TEST_WORKER_DB } from '../support/app';
import { checkout, createShop, externalSubject, subscribe } from '../support/shop';

let app: TestApp;
beforeAll(async () => {
  app = await startApp();
  process.env.DATABASE_URL = TEST_DB();
});
afterAll(() => app.close());


test('sandbox complete pays a checkout and prints {checkout_id, subscription_id, member_id}', async () => {
  const shop = await createShop(app);
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const r = await cli('sandbox', 'complete', link.body.checkout_id, '--json');
  expect(r.code).toBe(0);
  const json = JSON.parse(r.out);
  expect(json).toEqual({ checkout_id: link.body.checkout_id, subscription_id: expect.stringMatching(/^sub_/), member_id: link.body.member_id });
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${json.subscription_id}`, { key: shop.key });
  expect(sub.body.status).toBe('active');
  const purchase = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject() });
  const p = JSON.parse((await cli('sandbox', 'complete', purchase.body.checkout_id, '--json')).out);
  expect(p).toEqual({ checkout_id: purchase.body.checkout_id, purchase_id: expect.stringMatching(/^pur_/), member_id: purchase.body.member_id });
});

test('sandbox complete of an unknown checkout fails with one line on stderr', async () => {
  const r = await cli('sandbox', 'complete', 'cs_00000000000000000000000000', '--json');
  expect(r.code).toBe(1);
  expect(r.out).toBe('');
  expect(r.err.trim().split('\n')).toHaveLength(1);
});

test('sandbox advance moves the clock, applies due period ends and prints {now}', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key });
  const r = await cli('sandbox', 'advance', '--community', shop.communityId, '--days', '40', '--json');
  expect(r.code).toBe(0);
  const { now } = JSON.parse(r.out);
  expect(new Date(now).getTime() - Date.now()).toBeGreaterThan(39.9 * 86400e3);
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body.status).toBe('cancelled');
  const bad = await cli('sandbox', 'advance', '--community', shop.communityId, '--days', '-1', '--json');
  expect(bad.code).toBe(2);
});

test('sandbox advance runs again when a request deadlocks with it, and renews once', async () => {
  const shop = await createShop(app);
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  // A request holds the subscription's row and then wants the community's: the advance
  // holds the community's row (its clock) and waits for the subscription. Only the
  // advance's side detects the deadlock (the request waits 30 s before looking).
  const request = await app.owner.connect();
  try {
    await request.query(`set deadlock_timeout = '30s'`);
    await request.query('begin');
    await request.query('select 1 from billing.subscriptions where id = $1 for update', [subscriptionId]);
    const { rows: [{ pid }] } = await request.query<{ pid: number }>('select pg_backend_pid() as pid');
    const advancing = cli('sandbox', 'advance', '--community', shop.communityId, '--days', '32', '--json');
    for (let i = 0; ; i++) {
      const { rowCount } = await app.owner.query('select 1 from pg_stat_activity where $1 = any (pg_blocking_pids(pid))', [pid]);
      if (rowCount) break;
      if (i > 200) throw new Error('the advance never waited for the subscription');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await request.query('update billing.communities set name = name where id = $1', [shop.communityId]);
    await request.query('commit');
    const r = await advancing;
    expect([r.code, r.err]).toEqual([0, '']);
  } finally {
    await request.query('rollback').catch(() => {});
    request.release();
  }
  const { rows } = await app.owner.query<{ n: number }>(
    `select count(*)::int as n from billing.invoices where subscription_id = $1 and billing_reason = 'subscription_cycle'`, [subscriptionId]);
  expect(rows[0].n).toBe(1);
});

test('the worker task applies period ends (here limited to one community, as the cron job does for all)', async () => {
  const shop = await createShop(app);
  const { subscriptionId, memberId } = await subscribe(app, shop, 'silver');
  await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key });
  // The clock moved without applying anything (as if time simply passed).
  await app.owner.query(`update billing.communities set clock_offset = interval '35 days' where id = $1`, [shop.communityId]);
  // As the worker's login, as graphile-worker runs it.
  const client = new pg.Client({ connectionString: TEST_WORKER_DB() });
  await client.connect();
  const helpers = {
    withPgClient: async <T>(fn: (client: unknown) => Promise<T>) => fn(client),
    logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  } as unknown as JobHelpers;
  try {
    await subscriptionsApplyDue({ community_id: shop.communityId }, helpers);
  } finally {
    await client.end();
  }
  const sub = await call(app.url, 'GET', `/v1/subscriptions/${subscriptionId}`, { key: shop.key });
  expect(sub.body.status).toBe('cancelled');
  const ents = await call(app.url, 'GET', `/v1/members/${memberId}/entitlements`, { key: shop.key });
  expect(ents.body.data).toEqual([]);
});

test('the worker renews in batches, one transaction each: every due subscription once, charged once', async () => {
  const shop = await createShop(app);
  const subs = [];
  for (let i = 0; i < 3; i++) subs.push((await subscribe(app, shop, 'silver')).subscriptionId);
  await app.owner.query(`update billing.communities set clock_offset = interval '35 days' where id = $1`, [shop.communityId]);
  const client = new pg.Client({ connectionString: TEST_WORKER_DB() });
  await client.connect();
  const statements: string[] = [];
  const helpers = {
    withPgClient: async <T>(fn: (client: unknown) => Promise<T>) => fn({
      query: (text: string, values?: unknown[]) => { statements.push(text); return client.query(text, values); },
    }),
    logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  } as unknown as JobHelpers;
  try {
    await subscriptionsApplyDue({ community_id: shop.communityId, batch: 1 }, helpers);
  } finally {
    await client.end();
  }
  // Three batches of one (the third full, so a fourth finds nothing), then the finish.
  expect(statements.filter((t) => t.includes('worker_apply_due_batch'))).toHaveLength(4);
  expect(statements.filter((t) => t.includes('worker_apply_due_finish'))).toHaveLength(1);
  const { rows } = await app.owner.query(`select i.subscription_id, count(*)::int as invoices, count(*) filter (where i.status = 'paid')::int as paid
    from billing.invoices i where i.community_id = $1 group by 1 order by 1`, [shop.communityId]);
  expect(rows).toEqual([...subs].sort().map((id) => ({ subscription_id: id, invoices: 2, paid: 2 })));
});

test('the API role cannot pay checkouts, move the clock or apply provider events', async () => {
  for (const sql of [
    `select billing.complete_checkout('cs_x', '{}')`,
    `select billing.sandbox_advance('com_x', 1)`,
    `select billing.apply_due('com_x')`,
    `select billing.apply_due_all()`,
    `select billing.apply_due_batch('com_x', null, 1)`,
    `select billing.apply_provider_subscription('{}')`,
    `select billing.record_provider_event('stripe', 'evt_x', 'x')`,
    `select billing.expire_checkout('cs_x')`,
    `select billing.refund_purchase('pi_x')`,
  ]) {
    await expect(app.api.query(sql)).rejects.toThrow(/permission denied/);
  }
});
