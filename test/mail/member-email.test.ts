// A member's email (issue 30 item 1): set by an operator (PATCH /v1/members/{id}), by
// a checkout link's customer_email or the sandbox page's field when the member has
// none, read in the member JSON and GraphQL, searched case-insensitively; never in an
// event (webhook payloads are events). docs/decisions/member-email.md.
import { call, startApp, TestApp } from '../support/app';
import { checkout, createShop, events, externalSubject, pay, Shop } from '../support/shop';

let app: TestApp;
let shop: Shop;
beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
});
afterAll(() => app.close());

const unique = (name: string) => `${name}.${Date.now()}${Math.floor(Math.random() * 1e6)}@Example.test`;

async function newMember(extra: Record<string, unknown> = {}) {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject(), ...extra });
  expect(link.status).toBe(200);
  return link.body as { member_id: string; url: string; checkout_id: string };
}

test('an operator sets, finds (case-insensitively) and clears a member\'s email; a malformed one is 422', async () => {
  const { member_id: id } = await newMember();
  expect((await call(app.url, 'GET', `/v1/members/${id}`, { key: shop.key })).body.email).toBeNull();
  const email = unique('Ada');
  const set = await call(app.url, 'PATCH', `/v1/members/${id}`, { key: shop.key, body: { email } });
  expect(set.status).toBe(200);
  expect(set.body).toMatchObject({ id, email });
  const found = await call(app.url, 'GET', `/v1/members?email=${encodeURIComponent(email.toUpperCase())}`, { key: shop.key });
  expect(found.body.data.map((m: { id: string }) => m.id)).toEqual([id]);
  const bad = await call(app.url, 'PATCH', `/v1/members/${id}`, { key: shop.key, body: { email: 'not an email' } });
  expect(bad.status).toBe(422);
  expect(bad.body.param).toBe('email');
  expect((await call(app.url, 'PATCH', `/v1/members/mem_00000000000000000000000000`, { key: shop.key, body: { email } })).status).toBe(404);
  const cleared = await call(app.url, 'PATCH', `/v1/members/${id}`, { key: shop.key, body: { email: null } });
  expect(cleared.body.email).toBeNull();
  expect((await call(app.url, 'GET', `/v1/members?email=${encodeURIComponent(email)}`, { key: shop.key })).body.data).toEqual([]);
});

test('a checkout link\'s customer_email becomes the member\'s email when the checkout completes, never replacing one', async () => {
  const email = unique('Buyer');
  const link = await newMember({ customer_email: email });
  expect((await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: shop.key })).body.email).toBeNull();
  const paid = await pay(link.url);
  expect(paid.status).toBe(303);
  // the page did not ask: the link gave the email
  expect(paid.page).not.toContain('name="email"');
  expect((await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: shop.key })).body.email).toBe(email);

  const again = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'],
    subject: { member_id: link.member_id }, customer_email: unique('Other') });
  await pay(again.body.url);
  expect((await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: shop.key })).body.email).toBe(email);
  expect((await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: externalSubject(), customer_email: 'nope@' })).status).toBe(422);
});

test('the sandbox page asks for an email when the member has none and records it', async () => {
  const link = await newMember();
  const page = await (await fetch(link.url)).text();
  expect(page).toContain('<input id="email" name="email" type="email"');
  const wrong = await fetch(link.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'card=pay&email=bad' });
  expect(wrong.status).toBe(422);
  const email = unique('Page');
  const res = await fetch(link.url, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ card: 'pay', email }).toString() });
  expect(res.status).toBe(303);
  expect((await call(app.url, 'GET', `/v1/members/${link.member_id}`, { key: shop.key })).body.email).toBe(email);
});

test('GraphQL reads the email; no event of the community carries one', async () => {
  const email = unique('Graph');
  const link = await newMember({ customer_email: email });
  await pay(link.url);
  const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.key}` },
    body: JSON.stringify({ query: '{ members(first: 100) { nodes { id email } } }' }) });
  const body = await res.json() as { data: { members: { nodes: { id: string; email: string | null }[] } } };
  expect(body.data.members.nodes).toContainEqual({ id: link.member_id, email });
  const all = JSON.stringify(await events(app.owner, shop.communityId)).toLowerCase();
  expect(all).toContain(link.member_id);
  expect(all).not.toContain('@example.test');
  expect(all).not.toContain('"email"');
});
