// Invoices through every door: GET /v1/invoices (keyset, filters, scope, tenancy) and
// GET /v1/invoices/{id}, the REST-equal MCP tools list_invoices and get_invoice,
// invoice.* events in the feed and the event-type catalog, the CLI's sandbox
// decline/accept, the sandbox page's declining card, and the catalog's dunning.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cli } from '../support/cli';
import { applyCatalog, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { call, createTenant, startApp, TestApp, TEST_DB } from '../support/app';
import { callTool, connect, resultJson } from '../support/mcp-client';
import { advance, checkout, createShop, externalSubject, Shop, subscribe } from '../support/shop';

let app: TestApp;
let shop: Shop;
let client: Client;
let silver: { subscriptionId: string; memberId: string };
let gold: { subscriptionId: string; memberId: string };

beforeAll(async () => {
  app = await startApp();
  process.env.DATABASE_URL = TEST_DB();
  shop = await createShop(app);
  silver = await subscribe(app, shop, 'silver');
  gold = await subscribe(app, shop, 'gold', 'gold-monthly');
  await advance(app, shop, 31); // one renewal each
  client = await connect(app.url, shop.key);
});
afterAll(async () => {
  await client.close();
  await app.close();
});

const get = (path: string, key = shop.key) => call(app.url, 'GET', path, { key });


test('GET /v1/invoices lists newest first with keyset pages, and filters by member, subscription and status', async () => {
  const all = await get('/v1/invoices');
  expect(all.status).toBe(200);
  expect(all.body.data).toHaveLength(4);
  const ids = all.body.data.map((i: { id: string }) => i.id);
  expect([...ids].sort().reverse()).toEqual(ids);
  const page1 = await get('/v1/invoices?limit=3');
  const page2 = await get(`/v1/invoices?limit=3&cursor=${page1.body.next_cursor}`);
  expect([...page1.body.data, ...page2.body.data].map((i: { id: string }) => i.id)).toEqual(ids);
  expect(page2.body.next_cursor).toBeNull();
  const bySub = await get(`/v1/invoices?subscription_id=${silver.subscriptionId}`);
  expect(bySub.body.data.map((i: { billing_reason: string }) => i.billing_reason)).toEqual(['subscription_cycle', 'subscription_create']);
  const byMember = await get(`/v1/invoices?member_id=${gold.memberId}`);
  expect(byMember.body.data.every((i: { subscription_id: string }) => i.subscription_id === gold.subscriptionId)).toBe(true);
  expect((await get('/v1/invoices?status=open')).body.data).toEqual([]);
  expect((await get('/v1/invoices?status=bogus')).status).toBe(422);
  const one = await get(`/v1/invoices/${ids[0]}`);
  expect(one.status).toBe(200);
  expect(one.body).toEqual(all.body.data[0]);
});

test('invoices need invoices:read, and another community\'s invoice is 404', async () => {
  const narrow = await createTenant(app.owner, ['subscriptions:read']);
  const denied = await get('/v1/invoices', narrow.key);
  expect(denied.status).toBe(403);
  expect(denied.body.code).toBe('missing_scope');
  const other = await createTenant(app.owner);
  const id = (await get('/v1/invoices')).body.data[0].id;
  expect((await get(`/v1/invoices/${id}`, other.key)).status).toBe(404);
  expect((await get('/v1/invoices', other.key)).body.data).toEqual([]);
});

test('MCP list_invoices and get_invoice answer what REST answers', async () => {
  const rest = await get(`/v1/invoices?subscription_id=${gold.subscriptionId}&limit=1`);
  const listed = await callTool(client, 'list_invoices', { subscription_id: gold.subscriptionId, limit: 1 });
  expect(listed.isError).toBeFalsy();
  expect(resultJson(listed)).toEqual(rest.body);
  const tool = await callTool(client, 'get_invoice', { invoice_id: rest.body.data[0].id });
  expect(resultJson(tool)).toEqual((await get(`/v1/invoices/${rest.body.data[0].id}`)).body);
  const tools = (await client.listTools()).tools.filter((t) => t.name.endsWith('_invoices') || t.name === 'get_invoice');
  expect(tools.map((t) => [t.name, t.annotations?.readOnlyHint])).toEqual([['list_invoices', true], ['get_invoice', true]]);
});

test('invoice events are in the feed and the event-type catalog, and webhook endpoints may subscribe to them', async () => {
  const feed = await get('/v1/events?type=invoice.created,invoice.paid');
  expect(feed.status).toBe(200);
  expect(feed.body.data.map((e: { type: string }) => e.type).sort()).toEqual([...Array(4).fill('invoice.created'), ...Array(4).fill('invoice.paid')]);
  expect(feed.body.data[0].data.invoice).toMatchObject({ id: expect.stringMatching(/^inv_/), status: expect.any(String) });
  const catalog = await get('/v1/webhooks/event-types');
  expect(catalog.body.data.map((e: { type: string }) => e.type)).toEqual(expect.arrayContaining(['invoice.created', 'invoice.paid', 'invoice.payment_failed']));
  const hook = await call(app.url, 'POST', '/v1/webhooks/endpoints', { key: shop.key, body: { url: 'https://example.com/hook', event_types: ['invoice.paid', 'invoice.payment_failed'] } });
  expect([200, 201, 503]).toContain(hook.status);
  if (hook.status !== 503) expect(hook.body.event_types).toEqual(['invoice.paid', 'invoice.payment_failed']);
});

test('billing sandbox decline/accept --subscription switch future charges, with --json', async () => {
  const { subscriptionId } = await subscribe(app, shop, 'silver');
  const d = await cli('sandbox', 'decline', '--subscription', subscriptionId, '--json');
  expect(d.code).toBe(0);
  expect(JSON.parse(d.out)).toEqual({ subscription_id: subscriptionId, declines: true });
  await advance(app, shop, 31);
  expect((await get(`/v1/subscriptions/${subscriptionId}`)).body.status).toBe('past_due');
  const a = await cli('sandbox', 'accept', '--subscription', subscriptionId);
  expect(a.code).toBe(0);
  expect(a.out).toContain('will succeed');
  await advance(app, shop, 1);
  expect((await get(`/v1/subscriptions/${subscriptionId}`)).body.status).toBe('active');
  const missing = await cli('sandbox', 'decline', '--subscription', 'sub_00000000000000000000000000', '--json');
  expect(missing.code).not.toBe(0);
  expect(missing.out).toBe('');
});

test('the sandbox page\'s declining card creates nothing; the checkout stays payable', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const page = await (await fetch(link.body.url)).text();
  expect(page).toContain('Use a card that declines');
  const declined = await fetch(link.body.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'card=decline' });
  expect(declined.status).toBe(402);
  expect(await declined.text()).toContain('Your card was declined');
  const { rows } = await app.owner.query('select status, subscription_id from billing.checkout_sessions where id = $1', [link.body.checkout_id]);
  expect(rows[0]).toEqual({ status: 'open', subscription_id: null });
  const paid = await fetch(link.body.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'card=pay' });
  expect(paid.status).toBe(303);
});

test('catalog apply sets the community\'s dunning; the database refuses a bad schedule', async () => {
  const other = await createShop(app);
  await applyCatalog(app.owner, other.communityId, parseCatalog({ dunning: { retry_days: [2, 4], final_action: 'cancel' } }));
  const { rows } = await app.owner.query('select dunning from billing.communities where id = $1', [other.communityId]);
  expect(rows[0].dunning).toEqual({ retry_days: [2, 4], final_action: 'cancel' });
  expect(() => parseCatalog({ dunning: { retry_days: [3, 1], final_action: 'cancel' } })).toThrow(/ascending/);
  await expect(app.owner.query(`update billing.communities set dunning = '{"retry_days": [40], "final_action": "cancel"}' where id = $1`, [other.communityId]))
    .rejects.toThrow(/communities_dunning_valid/);
  const { subscriptionId } = await subscribe(app, other, 'silver');
  await app.owner.query(`insert into billing.sandbox_cards (community_id, subscription_id, declines) values ($1, $2, true)`, [other.communityId, subscriptionId]);
  await advance(app, other, 30.5);
  const inv = (await get(`/v1/invoices?subscription_id=${subscriptionId}&status=open`, other.key)).body.data[0];
  const due = Date.parse(inv.created_at);
  expect(Date.parse(inv.next_attempt_at) - due).toBe(2 * 86400e3);
});
