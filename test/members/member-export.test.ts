// A member's export (issue 31 item 4; docs/decisions/member-export.md): GET
// /v1/members/{id}/export answers one JSON document with every kind of row the service
// holds about the member, and nothing of another member or community (the tenant
// policies fence it); members:export is its own scope; `billing members export` prints
// the same document or writes it to a file.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SCOPES } from '../../src/core/scopes';
import { createKey } from '../../src/domain/communities/community-admin';
import { call, createTenant, startApp, TEST_DB, TestApp } from '../support/app';
import { cli } from '../support/cli';
import { checkout, createShop, pay, Shop } from '../support/shop';

let app: TestApp;
beforeAll(async () => {
  app = await startApp();
  process.env.DATABASE_URL = TEST_DB();
});
afterAll(() => app.close());

let n = 0;
const unique = (what: string) => `${what}${++n}x${Date.now().toString(36)}`;

interface Seeded { memberId: string; strings: string[] }

/** A member with a row of every kind the export lists. */
async function seed(shop: Shop): Promise<Seeded> {
  const c = shop.communityId;
  const key = shop.key;
  const uid = String(10n ** 17n + BigInt(Math.floor(Math.random() * 1e12)));
  const username = unique('user');
  const email = `${unique('export')}@example.test`;
  const name = unique('Name ');
  const external = unique('ext-');
  const note = unique('note ');
  const link = await checkout(app, shop, {
    tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], discount_code: 'WELCOME10',
    subject: { platform: 'discord', platform_uid: uid, username }, customer_email: email, customer_name: name,
    customer_address_lines: ['1 Export Street'], customer_country: 'FR',
  });
  expect(link.status).toBe(200);
  expect((await pay(link.body.url)).status).toBe(303);
  const memberId = link.body.member_id as string;
  expect((await call(app.url, 'POST', `/v1/members/${memberId}/external-subjects`, { key, body: { namespace: 'app', external_user_id: external } })).status).toBe(200);
  expect((await call(app.url, 'PATCH', `/v1/members/${memberId}`, { key, body: { note, tags: ['export-test'] } })).status).toBe(200);
  expect((await call(app.url, 'POST', `/v1/members/${memberId}/grants`, { key, body: { tier_id: shop.ids.tiers.silver } })).status).toBe(200);
  const guide = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: { member_id: memberId } });
  expect((await pay(guide.body.url)).status).toBe(303);
  const { rows: [inv] } = await app.owner.query<{ id: string }>(
    `select id from billing.invoices where community_id = $1 and member_id = $2 and billing_reason = 'purchase'`, [c, memberId]);
  expect((await call(app.url, 'POST', `/v1/invoices/${inv.id}/refunds`, { key, body: { amount_cents: 100 } })).status).toBe(200);
  // What the delivery worker and the mail links would write (no worker here).
  const { rows: [pcfg] } = await app.owner.query<{ id: string }>('select id from billing.platform_configs where community_id = $1', [c]);
  await app.owner.query(`insert into billing.benefit_deliveries (community_id, member_id, platform_config_id, type, value, want, status, applied_uid)
    values ($1, $2, $3, 'role', '9876', 'present', 'delivered', $4)`, [c, memberId, pcfg.id, uid]);
  await app.owner.query(`insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome)
    values ($1, $2, $3, 'add_role', '9876', 'ok')`, [c, memberId, pcfg.id]);
  await app.owner.query(`insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at) values ($1, $2, $3, 'telegram', now() + interval '1 day')`,
    [c, memberId, unique('SECRETCODE').toUpperCase()]);
  await app.owner.query(`insert into billing.mail_unsubscribes (community_id, member_id, template) values ($1, $2, 'renewal_upcoming')`, [c, memberId]);
  return { memberId, strings: [memberId, uid, username, email, name, external, note] };
}

let shop: Shop;
let target: Seeded;
let neighbour: Seeded;
let stranger: Seeded;
beforeAll(async () => {
  shop = await createShop(app);
  target = await seed(shop);
  neighbour = await seed(shop);
  stranger = await seed(await createShop(app));
});

const SECTIONS = ['subscriptions', 'purchases', 'grants', 'invoices', 'invoice_buyers', 'credit_notes', 'payment_attempts', 'entitlements', 'benefit_deliveries',
  'platform_actions', 'mail_messages', 'mail_unsubscribes', 'link_codes', 'checkout_sessions', 'discount_redemptions', 'events'] as const;

test('the export holds a row of every kind about the member, and nothing of another member or community', async () => {
  const res = await call(app.url, 'GET', `/v1/members/${target.memberId}/export`, { key: shop.key });
  expect(res.status).toBe(200);
  const doc = res.body;
  expect(doc.format).toBe('member-export/1');
  expect(doc.community).toEqual({ id: shop.communityId, name: expect.any(String) });
  const [, uid, username, email, name, external, note] = target.strings;
  expect(doc.member).toMatchObject({
    id: target.memberId, email, note, tags: ['export-test'], erased_at: null,
    identities: [{ platform: 'discord', platform_uid: uid, username, created_at: expect.any(String) }],
    external_subjects: [{ namespace: 'app', external_user_id: external, created_at: expect.any(String) }],
    billing_details: { name, address_lines: ['1 Export Street'], country: 'FR', tax_id: null },
  });
  for (const section of SECTIONS) expect([section, doc[section].length > 0]).toEqual([section, true]);
  expect(doc.invoices.map((i: { member_id: string }) => i.member_id)).toEqual(doc.invoices.map(() => target.memberId));
  expect(doc.invoice_buyers.map((b: { invoice_id: string; buyer_name: string }) => [b.invoice_id, b.buyer_name]))
    .toEqual(doc.invoices.map((i: { id: string }) => [i.id, name]));
  expect(doc.subscriptions.every((s: { member_id: string }) => s.member_id === target.memberId)).toBe(true);
  expect(doc.benefit_deliveries[0]).toMatchObject({ applied_uid: uid, status: 'delivered' });
  // Mail without bodies, link codes without the code.
  expect(Object.keys(doc.mail_messages[0])).not.toContain('text');
  expect(doc.mail_messages.some((m: { to: string }) => m.to === email)).toBe(true);
  expect(JSON.stringify(doc.link_codes)).not.toMatch(/SECRETCODE/i);
  // Every event names the member; the member's events are all there.
  expect(doc.events.every((e: unknown) => JSON.stringify(e).includes(`"${target.memberId}"`))).toBe(true);
  expect(doc.events.map((e: { type: string }) => e.type)).toEqual(expect.arrayContaining(['member.created', 'member.updated', 'subscription.created',
    'invoice.paid', 'invoice.refunded', 'member.entitlement.granted', 'checkout.completed', 'purchase.created']));
  // Nothing of the neighbour (same community) or the stranger (another community).
  const text = JSON.stringify(doc).toLowerCase();
  for (const s of [...neighbour.strings, ...stranger.strings]) expect([s, text.includes(s.toLowerCase())]).toEqual([s, false]);
});

test('export needs members:export, and another community\'s key finds no such member', async () => {
  const reader = await createKey(app.owner, shop.communityId, SCOPES.filter((s) => s !== 'members:export'));
  const refused = await call(app.url, 'GET', `/v1/members/${target.memberId}/export`, { key: reader.key });
  expect([refused.status, refused.body.code]).toEqual([403, 'missing_scope']);
  const other = await createTenant(app.owner);
  const foreign = await call(app.url, 'GET', `/v1/members/${target.memberId}/export`, { key: other.key });
  expect([foreign.status, foreign.body.code]).toEqual([404, 'not_found']);
  const own = await call(app.url, 'GET', `/v1/members/${stranger.memberId}/export`, { key: shop.key });
  expect(own.status).toBe(404);
});

test('billing members export prints the document, or writes it to --out with mode 600', async () => {
  const api = await call(app.url, 'GET', `/v1/members/${target.memberId}/export`, { key: shop.key });
  const printed = await cli('members', 'export', target.memberId);
  expect(printed.code).toBe(0);
  const doc = JSON.parse(printed.out);
  expect({ ...doc, exported_at: null }).toEqual({ ...api.body, exported_at: null });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'export-'));
  const file = path.join(dir, 'member.json');
  const written = await cli('members', 'export', target.memberId, '--community', shop.communityId, '--out', file, '--json');
  expect(written.code).toBe(0);
  expect(JSON.parse(written.out)).toMatchObject({ file, member_id: target.memberId });
  expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  expect(JSON.parse(fs.readFileSync(file, 'utf8')).member.id).toBe(target.memberId);
  const wrong = await cli('members', 'export', target.memberId, '--community', (await createTenant(app.owner)).communityId);
  expect(wrong.code).toBe(1);
  expect(wrong.err).toContain(`No member ${target.memberId}`);
  fs.rmSync(dir, { recursive: true, force: true });
});
