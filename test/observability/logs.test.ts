// Structured logs: one access line per request (route template, status, duration,
// community, key id, request id), X-Request-Id honoured or generated, stacks only in
// the log, one line per worker job, and no key, secret or pay token anywhere in the
// output of a realistic flow.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../src/app';
import { loadConfig } from '../../src/core/config';
import { captureLogs } from '../../src/core/log';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import type { WorkerHandle } from '../../worker';
import { checkout, createShop, externalSubject, pay } from '../support/shop';
import { call, createTenant, startApp, TestApp } from '../support/app';
import { deliver, SECRET_KEY, startStripeMock, StripeMock, WEBHOOK_SECRET } from '../support/stripe-mock';
import { createEndpoint, ENCRYPTION_KEY, isolatedDatabase, Receiver, startReceiver, waitFor, worker } from '../support/webhooks';

interface Line { [field: string]: unknown }

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
let mock: StripeMock;
let app: TestApp;
let receiver: Receiver;
let handle: WorkerHandle;
let logs: ReturnType<typeof captureLogs>;
const parsed = (): Line[] => logs.lines.map((l) => JSON.parse(l) as Line);

beforeAll(async () => {
  logs = captureLogs('debug');
  db = await isolatedDatabase();
  mock = await startStripeMock();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true }, mock.env);
  receiver = await startReceiver();
  handle = await worker();
});
afterAll(async () => {
  await handle?.stop();
  await receiver?.close();
  await app?.close();
  await mock?.close();
  await db?.drop();
  logs.stop();
});

test('a realistic flow logs one JSON line per request and per job, and never a key, secret or token', async () => {
  const secrets: string[] = [SECRET_KEY, WEBHOOK_SECRET];
  // Key creation (the operator's door) and a sandbox shop: checkout, pay page, portal.
  const tenant = await createTenant(app.owner);
  secrets.push(tenant.key);
  const shop = await createShop(app);
  secrets.push(shop.key);
  const endpoint = await createEndpoint(app.url, shop.key, { url: receiver.url });
  expect(endpoint.secret).toMatch(/^whsec_/);
  secrets.push(endpoint.secret);

  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  expect(link.status).toBe(200);
  const payToken = new URL(link.body.url).searchParams.get('t');
  expect(payToken).toBeTruthy();
  secrets.push(payToken!);
  expect((await pay(link.body.url)).status).toBe(303);
  const portal = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/portal-sessions`, { key: shop.key, body: { return_url: 'https://shop.example/account' } });
  expect(portal.status).toBe(200);
  const portalToken = new URL(portal.body.url).searchParams.get('t');
  expect(portalToken).toBeTruthy();
  secrets.push(portalToken!);
  await fetch(portal.body.url).then((r) => r.text());

  // A Stripe shop: a checkout through Stripe and a signed event.
  const stripeShop = await createShop(app, { type: 'stripe' });
  secrets.push(stripeShop.key);
  const stripeLink = await checkout(app, stripeShop, { tier_id: stripeShop.ids.tiers.silver, subject: externalSubject() });
  expect(stripeLink.status).toBe(200);
  const event = mock.signedEvent('checkout.session.completed', {
    id: 'cs_test_logs', object: 'checkout.session', mode: 'payment', status: 'complete', payment_status: 'paid',
    client_reference_id: stripeLink.body.checkout_id, metadata: { checkout_id: stripeLink.body.checkout_id },
  });
  await deliver(app.url, stripeShop.communityId, event);

  // A wrong key, sent as a well-formed one.
  const wrong = `bk_AAAAAAAA_${'x'.repeat(32)}`;
  secrets.push(wrong);
  expect((await call(app.url, 'GET', '/v1/plans', { key: wrong })).status).toBe(401);

  // The worker delivers the shop's events to the endpoint: its job lines.
  await waitFor('a delivered webhook', () => receiver.received.length > 0);
  await waitFor('a job line', () => parsed().some((l) => l.kind === 'job' && l.task === 'webhook_deliveries__send'));

  const lines = parsed();
  const access = lines.filter((l) => l.kind === 'access');
  const created = access.find((l) => l.route === '/v1/checkout-links' && l.community_id === shop.communityId);
  expect(created).toMatchObject({ level: 30, msg: 'request', method: 'POST', status: 200, key_id: shop.keyId });
  expect(typeof created!.duration_ms).toBe('number');
  expect(created!.request_id).toMatch(/^[0-9a-f-]{36}$/);
  expect(access.find((l) => l.route === '/v1/members/{id}/portal-sessions')).toMatchObject({ method: 'POST', status: 200, community_id: shop.communityId });
  // Pages and webhooks are logged by their templates, never by the raw path.
  expect(access.some((l) => typeof l.route === 'string' && l.route.startsWith('/webhooks/stripe/{'))).toBe(true);
  expect(access.find((l) => l.status === 401)).toMatchObject({ route: '/v1/plans', key_id: null, community_id: null });

  const job = lines.find((l) => l.kind === 'job' && l.task === 'webhook_deliveries__send')!;
  expect(job).toMatchObject({ outcome: 'success', msg: 'job' });
  expect(['string', 'number']).toContain(typeof job.job_id);
  expect(typeof job.duration_ms).toBe('number');

  const text = logs.text();
  for (const s of secrets) expect(text).not.toContain(s);
  expect(text).not.toMatch(/bk_|whsec_|sk_test|sk_live/);
  expect(text).not.toMatch(/[?&]t=/);
});

test('X-Request-Id: a printable one up to 128 characters is kept and echoed, anything else replaced', async () => {
  const kept = await fetch(`${app.url}/healthz`, { headers: { 'x-request-id': 'req-abc.123' } });
  expect(kept.headers.get('x-request-id')).toBe('req-abc.123');
  const long = await fetch(`${app.url}/healthz`, { headers: { 'x-request-id': 'a'.repeat(129) } });
  expect(long.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  const spaced = await fetch(`${app.url}/healthz`, { headers: { 'x-request-id': 'has space' } });
  expect(spaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  const none = await fetch(`${app.url}/v1/plans`);
  expect(none.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  await waitFor('the access line', () => parsed().find((l) => l.kind === 'access' && l.request_id === 'req-abc.123'));
  expect(parsed().find((l) => l.kind === 'access' && l.request_id === 'req-abc.123')).toMatchObject({ route: '/healthz', status: 200 });
});

test('an unexpected error: its stack in the log with the request id, a bare 500 problem in the response', async () => {
  const owner = createOwnerPool(db.url);
  const api = createApiPool(db.url, 2);
  const { app: express } = createApp({
    config: loadConfig({ NODE_ENV: 'test' }), apiPool: api, ownerPool: owner,
    mount: (a) => { a.get('/boom', () => { throw new Error('kaboom in the handler'); }); },
  });
  const server = http.createServer(express);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/boom`, { headers: { 'x-request-id': 'boom-1' } });
    const body = await res.text();
    expect(res.status).toBe(500);
    expect(body).not.toContain('kaboom');
    expect(body).not.toContain('at ');
    const line = await waitFor('the error line', () => parsed().find((l) => l.request_id === 'boom-1' && l.msg === 'unexpected error'));
    expect(line).toMatchObject({ level: 50, route: '/boom', method: 'GET' });
    expect((line.err as { stack: string }).stack).toContain('kaboom in the handler');
    expect(parsed().find((l) => l.request_id === 'boom-1' && l.kind === 'access')).toMatchObject({ status: 500, level: 50 });
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await api.end();
    await owner.end();
  }
});
