// The synchronous test ping waits for the receiver outside the request's transaction:
// a slow receiver holds no database connection (ctx.afterCommit).
import { call, createTenant, startApp, TestApp } from '../support/app';
import { ENCRYPTION_KEY, startReceiver } from '../support/webhooks';

let app: TestApp;
beforeAll(async () => { app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true }); });
afterAll(() => app.close());

test('while a ping waits for a slow receiver, its transaction is over (no session idles in it)', async () => {
  let release: () => void = () => {};
  const answered = new Promise<void>((resolve) => { release = resolve; });
  const receiver = await startReceiver(() => 204);
  const slow = await startReceiver(() => 'hang');
  try {
    const t = await createTenant(app.owner);
    const created = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: slow.url } });
    expect(created.status).toBe(201);
    const ping = call(app.url, 'POST', `/v1/webhooks/endpoints/${created.body.id}/test`, { key: t.key }).finally(() => release());
    ping.catch(() => {}); // awaited below; never an unhandled rejection if an assertion fails first
    // Wait until the receiver holds the request.
    for (let i = 0; i < 100 && slow.received.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(slow.received.length).toBe(1);
    const { rows } = await app.owner.query(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and application_name = 'billing-api'
         and state like 'idle in transaction%' and query like '%webhook_test_target%'`);
    expect(rows[0].n).toBe(0);
    await slow.down();
    const r = await ping;
    await answered;
    expect(r.status).toBe(200);
    expect(r.body.status_code).toBeNull();
    expect(typeof r.body.error).toBe('string');
  } finally {
    await slow.down();
    await receiver.down();
  }
});
