// Issue 27 item 8: pages that need a token ask for it. The checkout's cancelled page
// shows the operator's return_url (query string included) only to the holder of the
// checkout's pay token, and a portal URL opens one member portal session, once.
import { checkout, createShop, externalSubject, Shop } from '../support/shop';
import { call, startApp, TestApp } from '../support/app';

let app: TestApp;
let shop: Shop;

beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
});
afterAll(() => app.close());

const RETURN = 'https://shop.example/thanks?order=42&secret_ref=abc123';

test('the cancelled page needs the checkout pay token; the checkout page links to it with the token', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject(), return_url: RETURN });
  expect(link.status).toBe(200);
  const id = link.body.checkout_id as string;
  const token = new URL(link.body.url).searchParams.get('t')!;
  const page = await (await fetch(link.body.url)).text();
  const cancel = /href="([^"]*\/sandbox\/cancelled[^"]*)"/.exec(page)![1].replace(/&amp;/g, '&');
  expect(new URL(cancel).searchParams.get('t')).toBe(token);
  const withToken = await fetch(cancel);
  expect(withToken.status).toBe(200);
  expect(await withToken.text()).toContain('secret_ref=abc123');
  for (const url of [`${app.url}/sandbox/cancelled?checkout_id=${id}`, `${app.url}/sandbox/cancelled?checkout_id=${id}&t=${token.slice(0, -2)}xx`,
    `${app.url}/sandbox/cancelled?checkout_id=${id}&t=`, `${app.url}/sandbox/cancelled?checkout_id=${id}&t=%00`, `${app.url}/sandbox/cancelled`]) {
    const res = await fetch(url);
    const html = await res.text();
    expect([url, res.status]).toEqual([url, 404]);
    expect(html).not.toContain('shop.example');
  }
});

test('a portal URL opens once: the second opening, by anyone else, starts no session', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const portal = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/portal-sessions`, { key: shop.key, body: {} });
  expect(portal.status).toBe(200);
  const first = await fetch(portal.body.url);
  expect(first.status).toBe(200);
  await first.text();
  const cookie = /billing_portal=([^;]+)/.exec(first.headers.get('set-cookie') ?? '')![1];

  const [again, parallel] = await Promise.all([fetch(portal.body.url), fetch(portal.body.url)]);
  for (const res of [again, parallel]) {
    expect(res.status).toBe(410);
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(await res.text()).toContain('already used');
  }
  // The browser that opened it may reload the page with its own session.
  const reload = await fetch(portal.body.url, { headers: { cookie: `billing_portal=${cookie}` } });
  expect(reload.status).toBe(200);
  expect(reload.headers.get('set-cookie')).toBeNull();
  const { rows } = await app.owner.query(`select count(*)::int as n from billing_private.member_portal_sessions m
    join billing.portal_sessions p on p.community_id = m.community_id and p.id = m.portal_session_id where p.member_id = $1`, [link.body.member_id]);
  expect(rows[0].n).toBe(1);
});

test('of parallel first openings of one portal URL, exactly one starts a session', async () => {
  const link = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  const portal = await call(app.url, 'POST', `/v1/members/${link.body.member_id}/portal-sessions`, { key: shop.key, body: {} });
  const answers = await Promise.all(Array.from({ length: 6 }, () => fetch(portal.body.url).then(async (r) => { await r.text(); return r.status; })));
  expect(answers.filter((s) => s === 200)).toHaveLength(1);
  expect(answers.filter((s) => s === 410)).toHaveLength(5);
});
