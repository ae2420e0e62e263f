// Issue 26 item 13: small things a newcomer hit. `billing --version`; webhook.ping in
// GET /v1/webhooks/event-types (and the ping a receiver gets matches its schema);
// /readyz follows start-up; the CLI's sign-in links name the running server's address;
// an event's timestamp follows the community's clock, as its invoice does
// (docs/decisions/first-start-and-clocks.md). test/main/first-start.test.ts starts
// the real process for the rest.
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import Ajv2020 from 'ajv/dist/2020';
import { loadConfig } from '../../src/core/config';
import { createApp } from '../../src/app';
import { dashboardBaseUrl } from '../../src/cli/operators-commands';
import { recordServerUrl } from '../../src/db/server-url';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { call, startApp, TEST_APP_DB, TEST_DB, TestApp } from '../support/app';
import { runCli } from '../support/cli-process';
import { ENCRYPTION_KEY } from '../support/webhooks';
import { advance, createShop, subscribe } from '../support/shop';

let app: TestApp;
beforeAll(async () => { app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true }); });
afterAll(() => app.close());

const DAY = 86_400_000;

test('billing --version prints the package and API versions', async () => {
  const { version } = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../package.json'), 'utf8')) as { version: string };
  const plain = await runCli(['--version']);
  expect(plain).toMatchObject({ code: 0, stderr: '' });
  expect(plain.stdout).toBe(`billing ${version} (API version 2026-08)\n`);
  const json = await runCli(['--version', '--json']);
  expect(JSON.parse(json.stdout)).toEqual({ version, api_version: '2026-08' });
});

test('GET /v1/webhooks/event-types lists webhook.ping, and the test ping a receiver gets satisfies its schema', async () => {
  const shop = await createShop(app);
  const cat = await call(app.url, 'GET', '/v1/webhooks/event-types', { key: shop.key });
  const ping = cat.body.data.find((t: { type: string }) => t.type === 'webhook.ping');
  expect(ping).toMatchObject({ description: expect.stringContaining('/test') });

  const bodies: string[] = [];
  const receiver = http.createServer((req, res) => {
    let b = '';
    req.on('data', (c) => (b += c));
    req.on('end', () => { bodies.push(b); res.end('ok'); });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const endpoint = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: shop.key, body: { url, event_types: ['invoice.paid'] } });
    expect(endpoint.status).toBe(201);
    const sent = await call(app.url, 'POST', `/v1/webhooks/endpoints/${endpoint.body.id}/test`, { key: shop.key });
    expect(sent.status).toBe(200);
    const envelope = JSON.parse(bodies[0]);
    expect(envelope.type).toBe('webhook.ping');
    const validate = new Ajv2020({ strict: false }).compile(ping.data_schema);
    expect([validate(envelope.data), validate.errors]).toEqual([true, null]);
    // Not a type to subscribe to: it reaches the endpoint tested whatever its event_types.
    const subscribe = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: shop.key, body: { url, event_types: ['webhook.ping'] } });
    expect([subscribe.status, subscribe.body.param]).toEqual([422, 'event_types.0']);
  } finally {
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
});

test('/readyz answers 503 until start-up says it is complete, then ready', async () => {
  const owner = createOwnerPool(TEST_DB());
  const api = createApiPool(TEST_APP_DB(), 1);
  const startup = { done: false };
  const { app: express } = createApp({ config: loadConfig({ NODE_ENV: 'test' }), apiPool: api, ownerPool: owner, started: () => startup.done });
  const server = http.createServer(express);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const starting = await call(url, 'GET', '/readyz');
    expect(starting.status).toBe(503);
    expect(starting.body).toMatchObject({ code: 'service_unavailable', detail: 'The service is starting.' });
    expect((await call(url, 'GET', '/healthz')).status).toBe(200);
    startup.done = true;
    expect((await call(url, 'GET', '/readyz')).body).toEqual({ status: 'ready' });
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await api.end();
    await owner.end();
  }
});

test('the CLI\'s sign-in links: PUBLIC_BASE_URL, else the URL the running server recorded, else localhost:PORT', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-server-url-'));
  try {
    const env = { BILLING_DATA_DIR: dataDir };
    expect(dashboardBaseUrl(loadConfig(env))).toBe('http://localhost:3000');
    recordServerUrl(dataDir, 'http://localhost:4123', () => {});
    expect(dashboardBaseUrl(loadConfig(env))).toBe('http://localhost:4123');
    expect(dashboardBaseUrl(loadConfig({ ...env, PORT: '5000' }))).toBe('http://localhost:4123');
    expect(dashboardBaseUrl(loadConfig({ ...env, PUBLIC_BASE_URL: 'https://billing.example.com/' }))).toBe('https://billing.example.com');
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('in a sandbox whose clock was advanced, event timestamps follow the community clock, as the invoices they report', async () => {
  const shop = await createShop(app);
  const sub = await subscribe(app, shop, 'gold', 'gold-monthly');
  await advance(app, shop, 40);
  const feed = await call(app.url, 'GET', '/v1/events?type=invoice.paid&limit=10', { key: shop.key });
  expect(feed.status).toBe(200);
  const paid = feed.body.data.filter((e: { data: { invoice: { subscription_id: string } } }) => e.data.invoice.subscription_id === sub.subscriptionId);
  expect(paid.length).toBe(2);
  const now = Date.now();
  const at = (t: string) => Date.parse(t);
  type Paid = { timestamp: string; data: { invoice: { billing_reason: string; paid_at: string } } };
  const first: Paid = paid.find((e: Paid) => e.data.invoice.billing_reason === 'subscription_create');
  const renewal: Paid = paid.find((e: Paid) => e.data.invoice.billing_reason !== 'subscription_create');
  // Paid at checkout: the event is written as the invoice is paid, in the same time.
  expect(Math.abs(at(first.timestamp) - at(first.data.invoice.paid_at))).toBeLessThan(5_000);
  // The renewal, caught up when the clock jumped 40 days: its invoice is paid at the
  // period's end (day 30) and the event is written at the community's day 40, never
  // at the wall clock's day 0 (as before).
  expect(at(renewal.data.invoice.paid_at) - now).toBeGreaterThan(29 * DAY);
  expect(at(renewal.timestamp)).toBeGreaterThanOrEqual(at(renewal.data.invoice.paid_at));
  expect(at(renewal.timestamp) - now).toBeGreaterThan(39 * DAY);
  expect(at(renewal.timestamp) - now).toBeLessThan(41 * DAY);
  // Every event after the advance is in the community's time; ids still sort as timestamps.
  const all = await call(app.url, 'GET', '/v1/events?limit=100', { key: shop.key });
  const times = all.body.data.map((e: { timestamp: string }) => Date.parse(e.timestamp));
  expect(times).toEqual([...times].sort((a, b) => b - a));
});
