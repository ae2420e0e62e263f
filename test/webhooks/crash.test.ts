// At least once across a crash: a worker killed (SIGKILL) in the middle of an attempt
// leaves its job locked; a live worker notices the dead one's heartbeat stopped,
// hands the job back to the queue, and the delivery is sent again with the same
// webhook-id.
import type { ChildProcess } from 'node:child_process';
import { call, createTenant, startApp, TestApp } from '../support/app';
import type { WorkerHandle } from '../../worker';
import { createEndpoint, ENCRYPTION_KEY, insertEvents, isolatedDatabase, Receiver, spawnWorker, startReceiver, verify, waitFor, worker } from '../support/webhooks';

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let app: TestApp;
let receiver: Receiver;
let child: ChildProcess | null = null;
let survivor: WorkerHandle | null = null;

beforeAll(async () => {
  db = await isolatedDatabase();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
});
afterEach(async () => {
  await survivor?.stop();
  survivor = null;
  await receiver?.close();
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await survivor?.stop();
  await receiver?.close();
  await app.close();
  await db.drop();
});

test('a delivery cut off by a killed worker is retried by another with the same webhook-id', async () => {
  let hung = 0;
  receiver = await startReceiver(() => (hung++ === 0 ? 'hang' : 200));
  const tenant = await createTenant(app.owner);
  const endpoint = await createEndpoint(app.url, tenant.key, { url: receiver.url });

  const spawned = await spawnWorker(db.url);
  child = spawned.proc;
  const [eventId] = await insertEvents(app.owner, tenant.communityId, [{ type: 'member.entitlement.granted', data: { n: 1 } }]);
  await waitFor('the first attempt to hang', () => receiver.received.length === 1);
  // The job is held by the child process's worker.
  const locked = await app.owner.query('select locked_by from graphile_worker._private_jobs where locked_at is not null');
  expect(locked.rows.map((r) => r.locked_by)).toEqual([expect.any(String)]);
  expect(spawned.workerIds).toContain(locked.rows[0].locked_by);

  const exited = new Promise((resolve) => child!.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  child = null;
  const pending = await app.owner.query('select status, attempt_count from billing.webhook_deliveries where event_id = $1', [eventId]);
  expect(pending.rows).toEqual([{ status: 'pending', attempt_count: 0 }]);

  const started = Date.now();
  survivor = await worker({ heartbeatMs: 200, staleAfterMs: 1000 });
  await waitFor('the redelivery', () => receiver.received.length === 2, 15_000);
  expect(Date.now() - started).toBeLessThan(10_000);
  const [first, second] = receiver.received;
  expect(second.headers['webhook-id']).toBe(eventId);
  expect(first.headers['webhook-id']).toBe(eventId);
  verify(endpoint.secret, first);
  verify(endpoint.secret, second);
  const log = await waitFor('the attempt logged', async () => {
    const r = await call(app.url, 'GET', `/v1/webhooks/endpoints/${endpoint.id}/deliveries`, { key: tenant.key });
    return r.body.data[0]?.status === 'succeeded' ? r.body.data : null;
  });
  expect(log[0]).toMatchObject({ event_id: eventId, attempt_count: 1, last_status_code: 200 });
  const jobs = await app.owner.query('select count(*)::int as n from graphile_worker._private_jobs');
  expect(jobs.rows[0].n).toBe(0);
});

test('a worker stopped gracefully mid-attempt records the cut attempt, and the retry carries the same webhook-id', async () => {
  let n = 0;
  receiver = await startReceiver(() => (n++ === 0 ? 'hang' : 200));
  const tenant = await createTenant(app.owner);
  const endpoint = await createEndpoint(app.url, tenant.key, { url: receiver.url });
  const first = await worker({ shutdownAbortMs: 200 });
  const [eventId] = await insertEvents(app.owner, tenant.communityId, [{ type: 'member.entitlement.granted', data: { n: 2 } }]);
  await waitFor('the first attempt to hang', () => receiver.received.length === 1);
  await first.stop();
  const cut = await app.owner.query('select status, attempt_count, last_error from billing.webhook_deliveries where event_id = $1', [eventId]);
  expect(cut.rows).toEqual([{ status: 'pending', attempt_count: 1, last_error: 'worker shutting down' }]);

  survivor = await worker();
  await waitFor('the retry', () => receiver.received.length === 2);
  expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
  verify(endpoint.secret, receiver.received[1]);
  const log = await waitFor('the retry logged', async () => {
    const r = await call(app.url, 'GET', `/v1/webhooks/endpoints/${endpoint.id}/deliveries`, { key: tenant.key });
    return r.body.data[0]?.status === 'succeeded' ? r.body.data : null;
  });
  expect(log[0].attempts.map((a: { attempt: number; status_code: number | null; error: string | null }) => [a.attempt, a.status_code, a.error]))
    .toEqual([[1, null, 'worker shutting down'], [2, 200, null]]);
});
