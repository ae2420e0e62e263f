// A worker killed (SIGKILL) in the middle of a renewal or a period end (issue 18, item
// 2). The job applies a community's due subscriptions in batches, one transaction each,
// then sweeps the ledger (and writes the events) in one more. It is caught inside
// either: in the batch, waiting for the subscription row the test holds; or in the
// sweep after the batch committed, when its first event's delivery row waits for the
// endpoint row the test holds (the delivery's foreign key). The worker process is
// killed there. After a new worker starts, everything due
// completes exactly as in a control community whose worker was never disturbed: one
// invoice for the period, one payment, one period advance, the same events, and every
// event delivered (the same webhook-id may arrive twice, never zero times).
// (Killed mid-delivery: test/webhooks/crash.test.ts.)
import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { call, startApp, TestApp } from '../support/app';
import type { WorkerHandle } from '../../worker';
import { createShop, Shop, subscribe } from '../support/shop';
import { createEndpoint, ENCRYPTION_KEY, isolatedDatabase, kill, Receiver, spawnWorker, startReceiver, waitFor, worker } from '../support/webhooks';

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let app: TestApp;
let receiver: Receiver;
let child: ChildProcess | null = null;
let survivor: WorkerHandle | null = null;
let locker: pg.PoolClient | null = null;

beforeAll(async () => {
  db = await isolatedDatabase();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  receiver = await startReceiver(() => 200);
});
afterEach(async () => {
  if (child) await kill(child);
  child = null;
  await locker?.query('rollback').catch(() => {});
  locker?.release();
  locker = null;
  await survivor?.stop();
  survivor = null;
});
afterAll(async () => {
  await receiver.close();
  await app.close();
  await db.drop();
});

interface Side { shop: Shop; endpointId: string; subscriptionId: string; memberId: string; periodEnd: Date; lastEventId: string }

async function side(cancel: boolean): Promise<Side> {
  const shop = await createShop(app);
  const endpoint = await createEndpoint(app.url, shop.key, { url: `${receiver.url}/${shop.communityId}` });
  const { subscriptionId, memberId } = await subscribe(app, shop, 'gold', 'gold-monthly');
  if (cancel) expect((await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: shop.key })).status).toBe(202);
  const { rows } = await app.owner.query<{ end: Date; last: string }>(
    `select s.current_period_end as end, (select max(e.id) from billing.events e where e.community_id = s.community_id) as last
     from billing.subscriptions s where s.id = $1`, [subscriptionId]);
  return { shop, endpointId: endpoint.id, subscriptionId, memberId, periodEnd: rows[0].end, lastEventId: rows[0].last };
}

/** Moves a community's clock past the period end without applying anything (the worker must). */
async function moveClock(communityId: string, days: number): Promise<void> {
  await app.owner.query(`update billing.communities set clock_offset = clock_offset + make_interval(days => $2) where id = $1`, [communityId, days]);
}

async function applyDueJob(communityId: string): Promise<void> {
  await app.owner.query(`select graphile_worker.add_job('subscriptions__apply_due', json_build_object('community_id', $1::text))`, [communityId]);
}

/** What the period end did, in terms that must match between the two sides. */
async function outcome(s: Side) {
  const sub = await app.owner.query<{ status: string; end: Date; cancelled_at: Date | null }>(
    'select status, current_period_end as end, cancelled_at from billing.subscriptions where id = $1', [s.subscriptionId]);
  const invoices = await app.owner.query<{ reason: string; status: string; total: string; period_start: Date; paid: number }>(
    `select i.billing_reason as reason, i.status, i.total_cents as total, i.period_start,
       (select count(*)::int from billing.payment_attempts a where a.community_id = i.community_id and a.invoice_id = i.id and a.status = 'succeeded') as paid
     from billing.invoices i where i.subscription_id = $1 order by i.period_start`, [s.subscriptionId]);
  const events = await app.owner.query<{ type: string; n: number }>(
    `select type, count(*)::int as n from billing.events where community_id = $1 and id > $2 group by type order by type`,
    [s.shop.communityId, s.lastEventId]);
  const ledger = await app.owner.query<{ status: string; revision: number }>(
    `select status, revision from billing.member_entitlements where community_id = $1 and member_id = $2 order by entitlement_id`,
    [s.shop.communityId, s.memberId]);
  return {
    status: sub.rows[0].status,
    periodAdvancedDays: Math.round((sub.rows[0].end.getTime() - s.periodEnd.getTime()) / 86400e3),
    cancelledAtPeriodEnd: sub.rows[0].cancelled_at?.getTime() === s.periodEnd.getTime(),
    invoices: invoices.rows.map((i) => ({ reason: i.reason, status: i.status, total: Number(i.total), paidAttempts: i.paid,
      periodStartsAtOldEnd: i.period_start.getTime() === s.periodEnd.getTime() })),
    events: events.rows,
    ledger: ledger.rows,
  };
}

async function allEventsDelivered(sides: Side[]): Promise<boolean> {
  const { rows } = await app.owner.query<{ id: string }>('select id from billing.events where community_id = any ($1)', [sides.map((s) => s.shop.communityId)]);
  const got = new Set(receiver.received.map((r) => r.headers['webhook-id']));
  return rows.length > 0 && rows.every((r) => got.has(r.id));
}

async function killMidApplyDue(cancel: boolean, where: 'batch' | 'sweep') {
  const victim = await side(cancel);
  const control = await side(cancel);
  await moveClock(victim.shop.communityId, 31);
  await moveClock(control.shop.communityId, 31);

  locker = await app.owner.connect();
  await locker.query('begin');
  const held = where === 'batch'
    ? await locker.query('select id from billing.subscriptions where community_id = $1 and id = $2 for update',
      [victim.shop.communityId, victim.subscriptionId])
    : await locker.query('select id from billing.webhook_endpoints where community_id = $1 and id = $2 for update',
      [victim.shop.communityId, victim.endpointId]);
  expect(held.rowCount).toBe(1);

  const spawned = await spawnWorker(db.url);
  child = spawned.proc;
  await applyDueJob(victim.shop.communityId);
  const blocked = await waitFor('the worker to block inside apply_due', async () => {
    const { rows } = await app.owner.query<{ pid: number }>(
      `select pid from pg_stat_activity where wait_event_type = 'Lock' and query like '%worker_apply_due%'`);
    return rows[0]?.pid;
  });
  await kill(child);
  child = null;
  await locker.query('rollback');
  locker.release();
  locker = null;
  // The dead worker's backend runs on until it finds its client gone.
  await waitFor('the orphaned backend to end', async () => {
    const { rows } = await app.owner.query('select 1 from pg_stat_activity where pid = $1', [blocked]);
    return rows.length === 0;
  });
  // A batch is one statement outside any transaction block: the backend of the dead
  // worker finishes it once the lock is free and commits it whole, or (killed before)
  // nothing of it is left; never half a period end. The sweep, in its own transaction,
  // is rolled back; the batch before it had committed.
  const between = await outcome(victim);
  const applied = cancel ? between.status === 'cancelled' : between.periodAdvancedDays > 0;
  expect({ status: between.status, invoices: between.invoices.length, advancedByAMonth: between.periodAdvancedDays >= 28 })
    .toEqual(applied
      ? { status: cancel ? 'cancelled' : 'active', invoices: cancel ? 1 : 2, advancedByAMonth: !cancel }
      : { status: cancel ? 'cancelling' : 'active', invoices: 1, advancedByAMonth: false });
  if (where === 'sweep') expect(applied).toBe(true);

  survivor = await worker({ heartbeatMs: 200, staleAfterMs: 1000 });
  await applyDueJob(control.shop.communityId);
  const done = (o: Awaited<ReturnType<typeof outcome>>) => (cancel ? o.status === 'cancelled' : o.periodAdvancedDays > 0);
  await waitFor('both period ends applied', async () => done(await outcome(victim)) && done(await outcome(control)), 20_000);
  // Every due job has run (the killed one included, released by the dead-worker reaper).
  await waitFor('the queue to drain', async () => {
    const { rows } = await app.owner.query(`select 1 from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = 'subscriptions__apply_due' and j.attempts < j.max_attempts`);
    return rows.length === 0;
  });
  await waitFor('every event delivered', () => allEventsDelivered([victim, control]), 20_000);

  const [v, c] = [await outcome(victim), await outcome(control)];
  expect(v).toEqual(c);
  return v;
}

for (const where of ['batch', 'sweep'] as const) {
  test(`a worker killed mid-renewal (in the ${where}): after restart one invoice, one payment, one period advance, the same events`, async () => {
    const o = await killMidApplyDue(false, where);
    expect(o.status).toBe('active');
    expect(o.periodAdvancedDays).toBeGreaterThanOrEqual(28);
    expect(o.invoices).toEqual([
      { reason: 'subscription_create', status: 'paid', total: 1500, paidAttempts: 1, periodStartsAtOldEnd: false },
      { reason: 'subscription_cycle', status: 'paid', total: 1500, paidAttempts: 1, periodStartsAtOldEnd: true },
    ]);
    expect(o.events.length).toBeGreaterThan(0);
  }, 60_000);

  test(`a worker killed mid-period-end of a cancelling subscription (in the ${where}): cancelled once at the period end, revoked once, no charge`, async () => {
    const o = await killMidApplyDue(true, where);
    expect(o.status).toBe('cancelled');
    expect(o.cancelledAtPeriodEnd).toBe(true);
    expect(o.invoices).toHaveLength(1);
    expect(o.events).toContainEqual({ type: 'member.entitlement.revoked', n: 2 });
    expect(o.ledger.every((l) => l.status === 'inactive')).toBe(true);
  }, 60_000);
}
