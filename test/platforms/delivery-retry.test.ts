// An operator retries a member's deliveries (issue 29 item 5): POST
// /v1/members/{id}/deliveries/retry queues the member's delivery job now (skipping a
// backoff) and answers 202 with the member's entitlements and each benefit's delivery.
// Only a member of the caller's community, only with members:write.
// docs/decisions/platform-delivery-views.md
import { call, createTenant, startApp, TestApp } from '../support/app';
import { deliveryWorld, queuedJob } from './delivery-views-fixture';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

test('a retry queues the member\'s delivery job to run now and answers 202 with each benefit\'s delivery', async () => {
  const w = await deliveryWorld(app.owner);
  expect(await queuedJob(app.owner, w)).toBeNull();
  const r = await call(app.url, 'POST', `/v1/members/${w.memberId}/deliveries/retry`, { key: w.tenant.key });
  expect(r.status).toBe(202);
  const benefits = r.body.data.flatMap((e: { benefits: { type: string; delivery: { status: string; error: string | null } }[] }) => e.benefits);
  expect(benefits.map((b: { type: string; delivery: { status: string; error: string | null } }) => [b.type, b.delivery.status, b.delivery.error])).toEqual([
    ['channel', 'delivered', null], ['role', 'action_required', w.errors.role], ['chat', 'action_required', w.errors.chat]]);
  // Queued for now. A delivery worker of another test file (one database) may take it at
  // once; then it has run: the deliveries were recorded again after the retry.
  const job = await queuedJob(app.owner, w);
  if (job) {
    expect(job.run_at.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  } else {
    const { rows } = await app.owner.query<{ attempts: number }>(
      `select attempts from billing.benefit_deliveries where community_id = $1 and member_id = $2 and type = 'role'`, [w.tenant.communityId, w.memberId]);
    expect(rows[0].attempts).toBeGreaterThan(1);
  }
  // Again: still one job for the member (the job key), the same answer.
  const again = await call(app.url, 'POST', `/v1/members/${w.memberId}/deliveries/retry`, { key: w.tenant.key });
  expect(again.status).toBe(202);
  const { rows: [{ n }] } = await app.owner.query<{ n: number }>(
    `select count(*)::int as n from graphile_worker._private_jobs where key = $1`, [`deliver:${w.tenant.communityId}:${w.memberId}`]);
  expect(n).toBeLessThanOrEqual(1);
});

test('a retry for a job waiting out its backoff makes it run now', async () => {
  const w = await deliveryWorld(app.owner);
  await app.owner.query(`select billing_private.enqueue_deliveries(array[$1], array[$2])`, [w.tenant.communityId, w.memberId]);
  await app.owner.query(`update graphile_worker._private_jobs set run_at = now() + interval '1 hour' where key = $1`,
    [`deliver:${w.tenant.communityId}:${w.memberId}`]);
  const r = await call(app.url, 'POST', `/v1/members/${w.memberId}/deliveries/retry`, { key: w.tenant.key });
  expect(r.status).toBe(202);
  // Due now, or (in a shared database) already run by another test file's delivery worker.
  const job = await queuedJob(app.owner, w);
  if (job) {
    expect(job.run_at.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
  } else {
    const { rows } = await app.owner.query<{ attempts: number }>(
      `select attempts from billing.benefit_deliveries where community_id = $1 and member_id = $2 and type = 'role'`, [w.tenant.communityId, w.memberId]);
    expect(rows[0].attempts).toBeGreaterThan(1);
  }
});

test('another community\'s member is 404, and a key without members:write is refused', async () => {
  const w = await deliveryWorld(app.owner);
  const other = await createTenant(app.owner);
  const foreign = await call(app.url, 'POST', `/v1/members/${w.memberId}/deliveries/retry`, { key: other.key });
  expect([foreign.status, foreign.body.code]).toEqual([404, 'not_found']);
  expect(await queuedJob(app.owner, w)).toBeNull();
  const reader = await createTenant(app.owner, ['members:read']);
  const refused = await call(app.url, 'POST', `/v1/members/${w.memberId}/deliveries/retry`, { key: reader.key });
  expect([refused.status, refused.body.code]).toEqual([403, 'missing_scope']);
  const unknown = await call(app.url, 'POST', '/v1/members/mem_00000000000000000000000000/deliveries/retry', { key: w.tenant.key });
  expect(unknown.status).toBe(404);
});
