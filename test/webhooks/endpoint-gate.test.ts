// The endpoint gate (worker/tasks/webhook_deliveries__send.ts): a delivery job fetched
// while its endpoint already holds its share of the worker's slots goes back to the
// queue due at once, and runs as soon as a slot frees. Idle slots fetch at once, so
// under a backlog a fifth of the jobs meet that race; put back with a delay (200 ms, as
// it was), the last jobs of a backlog waited for it and the drain ran at 72% of the
// rate before per-endpoint jobs (bench/RESULTS.md, House A/B).
import { webhookJobsPutBack } from '../../src/core/metrics';
import { createTenant, startApp, TestApp } from '../support/app';
import type { WorkerHandle } from '../../worker';
import { createEndpoint, ENCRYPTION_KEY, insertEvents, isolatedDatabase, Receiver, startReceiver, verify, waitFor, worker } from '../support/webhooks';

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let app: TestApp;
let receiver: Receiver;
let running: WorkerHandle | null = null;

beforeAll(async () => {
  db = await isolatedDatabase();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  // Each delivery takes 30 ms, so the jobs of the endpoint overlap.
  receiver = await startReceiver(() => ({ status: 200, delayMs: 30 }));
});
afterAll(async () => {
  await running?.stop();
  await receiver.close();
  await app.close();
  await db.drop();
});

const putBack = async () => (await webhookJobsPutBack.get()).values[0]?.value ?? 0;

test('jobs put back by the endpoint gate are due at once, and every delivery arrives once', async () => {
  const tenant = await createTenant(app.owner);
  const endpoint = await createEndpoint(app.url, tenant.key, { url: `${receiver.url}/gate` });
  // Twelve commits, so twelve jobs for one endpoint, queued before any worker runs: a
  // new endpoint may hold one slot, and the worker's four idle slots fetch at once.
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) {
    ids.push(...await insertEvents(app.owner, tenant.communityId, [{ type: 'member.entitlement.granted', data: { n: i } }]));
  }
  const before = await putBack();
  let futureJobs = 0;
  let watching = true;
  // Every 5 ms until the last delivery: is any delivery job of this database due later?
  const watch = (async () => {
    while (watching) {
      const { rows } = await app.owner.query<{ n: number }>(
        `select count(*)::int as n from graphile_worker._private_jobs j
         join graphile_worker._private_tasks t on t.id = j.task_id
         where t.identifier = 'webhook_deliveries__send' and j.run_at > now() + interval '20 milliseconds'`);
      futureJobs = Math.max(futureJobs, rows[0].n);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  running = await worker({ concurrency: 4 });
  try {
    await waitFor('all twelve deliveries', () => receiver.received.length >= 12, 15_000);
  } finally {
    watching = false;
    await watch;
  }
  // The race happened (otherwise this test shows nothing), and no job was put off.
  expect(await putBack()).toBeGreaterThan(before);
  expect(futureJobs).toBe(0);
  const got = receiver.received.map((r) => verify(endpoint.secret, r).id).sort();
  expect(got).toEqual([...ids].sort());
});
