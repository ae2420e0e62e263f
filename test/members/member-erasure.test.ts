// Erasing a member (issue 31 item 4; docs/decisions/member-erasure.md): POST
// /v1/members/{id}/erase removes every personal field (a scan of every row of the
// community, the audit log included, finds none of the member's strings afterwards),
// ends access (subscriptions, grants, purchases, open checkouts), has the platform
// remove what it granted (the local Discord, kick_on_revoke), emits member.erased
// without personal data, keeps invoices' numbers and totals (and a business buyer's
// legal fields), closes the member's signed links, refuses new data for the member, and
// does nothing the second time. Tenancy, scope and the CLI's door too.
import type pg from 'pg';
import { SCOPES } from '../../src/core/scopes';
import { PlatformSecretBox, storePlatformSecret } from '../../src/domain/catalog/platform-secrets';
import { createKey } from '../../src/domain/communities/community-admin';
import { eventDataSchema } from '../../src/domain/events/event-types';
import { invoicePdfLink, portalLink, unsubscribeLink } from '../../src/domain/mail/mail-links';
import { call, createTenant, startApp, TEST_DB, TestApp } from '../support/app';
import { cli } from '../support/cli';
import { startDiscordServer, type DiscordServer } from '../support/discord-server';
import { checkout, createShop, pay, Shop } from '../support/shop';
import { createEndpoint, ENCRYPTION_KEY, isolatedDatabase, startReceiver, verify, waitFor, worker } from '../support/webhooks';
import type { WorkerHandle } from '../../worker';

let app: TestApp;
let discord: DiscordServer;
let handle: WorkerHandle;

let db: Awaited<ReturnType<typeof isolatedDatabase>>;
const previousDatabaseUrl = process.env.DATABASE_URL;

beforeAll(async () => {
  // A database of this file's own: its worker delivers to platforms, and in the run's
  // shared database it would also take test/platforms/delivery.test.ts's delivery jobs
  // (one queue) and send them to this file's Discord stand-in, and the other way round.
  db = await isolatedDatabase();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true });
  process.env.DATABASE_URL = TEST_DB();
  discord = await startDiscordServer();
  // The delivery worker removes what the platform holds once access ends. No deployment
  // tokens: other files' connections (which have none of their own) get no call.
  handle = await worker({
    platformDeliveries: true,
    platforms: { discordApiUrl: discord.url, telegramApiUrl: 'http://127.0.0.1:9', discordBotToken: null, telegramBotToken: null, timeoutMs: 5000 },
  });
});
afterAll(async () => {
  await handle?.stop();
  discord?.assertClean();
  await discord?.close();
  await app?.close();
  await db?.drop();
  if (previousDatabaseUrl === undefined) delete process.env.DATABASE_URL;
  else process.env.DATABASE_URL = previousDatabaseUrl;
});

let n = 0;
const unique = (what: string) => `${what}${++n}x${Date.now().toString(36)}`;

interface Person {
  shop: Shop;
  guildId: string;
  role: string;
  memberId: string;
  uid: string;
  /** Every personal string of the member, as given. */
  secrets: string[];
  invoiceIds: string[];
}

/** A community whose tiers' entitlements hold a role on a local Discord guild (kick_on_revoke). */
async function discordShop(): Promise<{ shop: Shop; guildId: string; role: string }> {
  const guild = discord.addGuild({ botRolePosition: 10, roles: [{ name: 'Gold', position: 3 }] });
  const role = [...guild.roles.values()].find((r) => r.name === 'Gold')!.id;
  const benefits = [{ platform: 'discord-main', type: 'role', value: role }];
  const shop = await createShop(app, { type: 'sandbox' }, {
    platforms: [{ key: 'discord-main', platform: 'discord', name: 'Main', settings: { guild_id: guild.id, kick_on_revoke: 'true' } }],
    entitlements: [{ key: 'vip-chat', name: 'VIP chat', benefits }, { key: 'member-chat', name: 'Member chat', benefits }],
  });
  await storePlatformSecret(app.owner, new PlatformSecretBox(ENCRYPTION_KEY), shop.communityId, shop.ids.platforms['discord-main'], 'bot_token', discord.token);
  return { shop, guildId: guild.id, role };
}

/**
 * A member with everything a member can have: a Discord identity (in the guild, given
 * the role), an external subject, email, billing details, a note and tags, a paid
 * subscription and purchase (invoices, mail), a grant, an open checkout, a link code,
 * an unsubscribe, a portal session, and answers kept for Idempotency-Key replays.
 */
async function person(opts: { taxId?: string } = {}): Promise<Person> {
  const { shop, guildId, role } = await discordShop();
  const user = discord.addMember(guildId, { username: unique('discorduser') });
  const email = `${unique('erase.me')}@example.test`;
  const name = unique('Erika Mustername');
  const street = unique('Geheimweg 7 ');
  const external = unique('ext-user-');
  const note = unique('Prefers to be called Rika ');
  const tag = unique('tag-');
  const link = await checkout(app, shop, {
    tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'],
    subject: { platform: 'discord', platform_uid: user.userId, username: user.username },
    customer_email: email, customer_name: name, customer_address_lines: [street, '10115 Berlin'], customer_country: 'DE',
    ...(opts.taxId ? { customer_tax_id: opts.taxId } : {}),
  }, { 'Idempotency-Key': unique('ck') });
  expect(link.status).toBe(200);
  expect((await pay(link.body.url)).status).toBe(303);
  const memberId = link.body.member_id as string;
  const key = shop.key;
  const idem = (k: string) => ({ 'Idempotency-Key': unique(k) });
  expect((await call(app.url, 'POST', `/v1/members/${memberId}/external-subjects`, { key, body: { namespace: 'app', external_user_id: external }, headers: idem('xs') })).status).toBe(200);
  expect((await call(app.url, 'PATCH', `/v1/members/${memberId}`, { key, body: { note, tags: [tag] }, headers: idem('pm') })).status).toBe(200);
  expect((await call(app.url, 'POST', `/v1/members/${memberId}/grants`, { key, body: { tier_id: shop.ids.tiers.silver, note: `for ${name}` }, headers: idem('gr') })).status).toBe(200);
  // Two checkouts of the one-time guide: the first paid, the second left open.
  const guide = await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: { member_id: memberId } });
  expect((await checkout(app, shop, { tier_id: shop.ids.tiers.guide, subject: { member_id: memberId } })).status).toBe(200);
  expect((await pay(guide.body.url)).status).toBe(303);
  expect((await call(app.url, 'POST', `/v1/members/${memberId}/portal-sessions`, { key, body: {} })).status).toBe(200);
  await app.owner.query(`insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at) values ($1, $2, $3, 'telegram', now() + interval '1 day')`,
    [shop.communityId, memberId, unique('CODE').toUpperCase()]);
  await app.owner.query(`insert into billing.mail_unsubscribes (community_id, member_id, template) values ($1, $2, 'renewal_upcoming')`, [shop.communityId, memberId]);
  await waitFor('role delivered', () => discord.memberRoles(guildId, user.userId)?.includes(role) || null);
  const invoices = await app.owner.query<{ id: string }>('select id from billing.invoices where community_id = $1 and member_id = $2 order by id', [shop.communityId, memberId]);
  expect(invoices.rows.length).toBe(2);
  const mail = await app.owner.query('select 1 from billing.mail_messages where community_id = $1 and member_id = $2 and to_address = $3', [shop.communityId, memberId, email]);
  expect(mail.rowCount).toBeGreaterThan(0);
  return {
    shop, guildId, role, memberId, uid: user.userId, invoiceIds: invoices.rows.map((r) => r.id),
    secrets: [email, user.username, user.userId, name, street, external, note, tag, ...(opts.taxId ? [opts.taxId] : [])],
  };
}

/** Every row of the community, in every table of billing and billing_private, as JSON text. */
async function communityRows(owner: pg.Pool, communityId: string): Promise<{ table: string; row: Record<string, unknown> }[]> {
  const { rows: tables } = await owner.query<{ schema: string; table: string }>(`
    select c.table_schema as schema, c.table_name as table from information_schema.columns c
    join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name and t.table_type = 'BASE TABLE'
    where c.table_schema in ('billing', 'billing_private') and c.column_name = 'community_id' order by 1, 2`);
  expect(tables.map((t) => t.table)).toEqual(expect.arrayContaining(['members', 'events', 'invoices', 'mail_messages', 'audit_log', 'idempotency_keys']));
  const out: { table: string; row: Record<string, unknown> }[] = [];
  for (const t of tables) {
    const { rows } = await owner.query<{ r: Record<string, unknown> }>(`select to_jsonb(x) as r from ${t.schema}.${t.table} x where community_id = $1`, [communityId]);
    for (const r of rows) out.push({ table: `${t.schema}.${t.table}`, row: r.r });
  }
  return out;
}

/** Where a secret still stands: "table: secret", the row's allowed fields left out. */
function hits(rows: { table: string; row: Record<string, unknown> }[], secrets: string[], allowed: (table: string, row: Record<string, unknown>) => Record<string, unknown> = (_t, r) => r): string[] {
  const found: string[] = [];
  for (const { table, row } of rows) {
    const text = JSON.stringify(allowed(table, row)).toLowerCase();
    for (const s of secrets) if (text.includes(s.toLowerCase())) found.push(`${table}: ${s}`);
  }
  return found;
}

const erase = (p: Person, key = p.shop.key, headers: Record<string, string> = { 'Idempotency-Key': unique('erase') }) =>
  call(app.url, 'POST', `/v1/members/${p.memberId}/erase`, { key, headers });

test('erasure removes every personal field from every row, ends access, has Discord remove the role and kick, and keeps invoices', async () => {
  const p = await person();
  const c = p.shop.communityId;
  const before = await communityRows(app.owner, c);
  // The scan sees them before: each secret stands somewhere.
  for (const s of p.secrets) expect([s, hits(before, [s]).length > 0]).toEqual([s, true]);
  const invoicesBefore = (await app.owner.query('select id, number, total_cents, tax_cents, currency, created_at from billing.invoices where community_id = $1 order by id', [c])).rows;

  const res = await erase(p);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ member_id: p.memberId, changed: true, subscriptions_cancelled: 1, grants_revoked: 1, purchases_ended: 1,
    checkouts_expired: 1, invoices_kept: 2, discount_codes_naming_member: [] });
  expect(res.body.events_redacted).toBeGreaterThan(0);

  // Access ends: sources, the ledger, and what Discord held (the role, then the kick).
  const subs = await app.owner.query('select status from billing.subscriptions where community_id = $1 and member_id = $2', [c, p.memberId]);
  expect(subs.rows.map((r) => r.status)).toEqual(['cancelled']);
  const grants = await app.owner.query('select revoked_at, note from billing.grants where community_id = $1 and member_id = $2', [c, p.memberId]);
  expect(grants.rows.map((g) => [g.revoked_at !== null, g.note])).toEqual([[true, null]]);
  const ledger = await app.owner.query('select status from billing.member_entitlements where community_id = $1 and member_id = $2', [c, p.memberId]);
  expect(ledger.rows.length).toBeGreaterThan(0);
  expect(ledger.rows.every((r) => r.status === 'inactive')).toBe(true);
  const checkouts = await app.owner.query(`select status from billing.checkout_sessions where community_id = $1 and member_id = $2 order by id`, [c, p.memberId]);
  expect(checkouts.rows.map((r) => r.status)).toEqual(['completed', 'completed', 'expired']);
  await waitFor('kicked from the guild', () => discord.memberRoles(p.guildId, p.uid) === null || null);
  expect(discord.requestsTo('delete_guild_member').filter((r) => r.params.user_id === p.uid).map((r) => r.status)).toEqual([204]);
  await waitFor('deliveries gone', async () => (await app.owner.query('select 1 from billing.benefit_deliveries where community_id = $1', [c])).rowCount === 0 || null);
  const actions = await app.owner.query<{ action: string; outcome: string }>('select action, outcome from billing.platform_actions where community_id = $1 order by id', [c]);
  expect(actions.rows.map((a) => `${a.action}:${a.outcome}`)).toEqual(expect.arrayContaining(['remove_role:ok', 'kick_member:ok']));

  // Nothing personal is left anywhere in the community: not in events, mail, checkouts,
  // idempotency records, the ledger's snapshots or the audit log.
  expect(hits(await communityRows(app.owner, c), p.secrets)).toEqual([]);
  const member = await call(app.url, 'GET', `/v1/members/${p.memberId}`, { key: p.shop.key });
  expect(member.body).toMatchObject({ id: p.memberId, identities: [], external_subjects: [], email: null, display_name: null, note: null, tags: [],
    erased_at: res.body.erased_at });
  const mail = await app.owner.query('select to_address, text_body, html_body, subject, status from billing.mail_messages where community_id = $1 and member_id = $2', [c, p.memberId]);
  expect(mail.rows.length).toBeGreaterThan(0);
  for (const m of mail.rows) expect([m.to_address, m.text_body, m.html_body]).toEqual(['', '', '']);
  for (const table of ['link_codes', 'mail_unsubscribes', 'portal_sessions', 'member_identities', 'external_subjects']) {
    expect([table, (await app.owner.query(`select 1 from billing.${table} where community_id = $1 and member_id = $2`, [c, p.memberId])).rowCount]).toEqual([table, 0]);
  }

  // Invoices stay with their numbers and sums; a consumer's name and address go.
  const invoicesAfter = (await app.owner.query('select id, number, total_cents, tax_cents, currency, created_at from billing.invoices where community_id = $1 order by id', [c])).rows;
  expect(invoicesAfter).toEqual(invoicesBefore);
  const buyers = await app.owner.query('select buyer_name, buyer_address_lines, buyer_country from billing.invoices where community_id = $1 and member_id = $2', [c, p.memberId]);
  for (const b of buyers.rows) expect([b.buyer_name, b.buyer_address_lines]).toEqual([null, null]);

  // One member.erased, of the catalog's schema, naming the member by id only.
  const erased = await app.owner.query<{ data: Record<string, unknown> }>(`select data from billing.events where community_id = $1 and type = 'member.erased'`, [c]);
  expect(erased.rows).toHaveLength(1);
  expect(eventDataSchema('member.erased').safeParse(erased.rows[0].data).success).toBe(true);
  expect(erased.rows[0].data).toMatchObject({ member: { id: p.memberId, identities: [], external_subjects: [] }, erased_at: res.body.erased_at });
});

test('webhooks get member.erased, and the erasure\'s other events without anything personal', async () => {
  const p = await person();
  const receiver = await startReceiver();
  try {
    const endpoint = await createEndpoint(app.url, p.shop.key, { url: receiver.url,
      event_types: ['member.erased', 'member.updated', 'member.entitlement.revoked', 'subscription.cancelled'] });
    expect((await erase(p)).status).toBe(200);
    // Each type once it has arrived (one job per endpoint and commit: they may arrive in
    // any order), then the whole set, which nothing else may add to.
    for (const type of ['member.erased', 'member.entitlement.revoked', 'subscription.cancelled', 'member.updated']) {
      await waitFor(`${type} delivered`, () => receiver.received.some((r) => verify(endpoint.secret, r).type === type) || null);
    }
    const bodies = receiver.received.map((r) => verify(endpoint.secret, r));
    expect(new Set(bodies.map((b) => b.type))).toEqual(new Set(['member.erased', 'member.updated', 'member.entitlement.revoked', 'subscription.cancelled']));
    const text = JSON.stringify(bodies).toLowerCase();
    for (const secret of p.secrets) expect([secret, text.includes(secret.toLowerCase())]).toEqual([secret, false]);
    expect(bodies.find((b) => b.type === 'member.erased')!.data).toEqual({
      member: { id: p.memberId, created_at: expect.any(String), identities: [], external_subjects: [] }, erased_at: expect.any(String) });
  } finally {
    await receiver.close();
  }
});

test('a second erasure does nothing; the same Idempotency-Key replays the first answer', async () => {
  const p = await person();
  const headers = { 'Idempotency-Key': unique('once') };
  const first = await erase(p, p.shop.key, headers);
  expect(first.status).toBe(200);
  const events = async () => (await app.owner.query('select count(*)::int as n from billing.events where community_id = $1', [p.shop.communityId])).rows[0].n;
  const count = await events();
  const replay = await erase(p, p.shop.key, headers);
  expect([replay.status, replay.body]).toEqual([200, first.body]);
  const again = await erase(p);
  expect(again.status).toBe(200);
  expect(again.body).toEqual({ ...first.body, changed: false, subscriptions_cancelled: 0, grants_revoked: 0, purchases_ended: 0, checkouts_expired: 0, events_redacted: 0 });
  expect(await events()).toBe(count);
});

test('a business buyer\'s invoices keep the name, address and VAT id the law requires; nothing else keeps them', async () => {
  const taxId = unique('DE12345').slice(0, 20);
  const p = await person({ taxId });
  const c = p.shop.communityId;
  const kept = (await app.owner.query('select buyer_name, buyer_address_lines, buyer_tax_id from billing.invoices where community_id = $1 and member_id = $2 order by id', [c, p.memberId])).rows;
  expect(kept.every((r) => r.buyer_tax_id === taxId && r.buyer_name !== null)).toBe(true);
  expect((await erase(p)).status).toBe(200);
  const after = (await app.owner.query('select buyer_name, buyer_address_lines, buyer_tax_id from billing.invoices where community_id = $1 and member_id = $2 order by id', [c, p.memberId])).rows;
  expect(after).toEqual(kept);
  await waitFor('deliveries gone', async () => (await app.owner.query('select 1 from billing.benefit_deliveries where community_id = $1', [c])).rowCount === 0 || null);
  // Every other copy is gone: the invoice rows' buyer fields are the only place left.
  const rows = await communityRows(app.owner, c);
  const withoutInvoiceBuyer = (table: string, row: Record<string, unknown>) => {
    if (table !== 'billing.invoices') return row;
    const { buyer_name: _n, buyer_address_lines: _a, buyer_tax_id: _t, ...rest } = row;
    return rest;
  };
  expect(hits(rows, p.secrets, withoutInvoiceBuyer)).toEqual([]);
  // The invoice JSON (and its PDF) still show the tax id; the rest of the member is gone.
  const invoice = await call(app.url, 'GET', `/v1/invoices/${p.invoiceIds[0]}`, { key: p.shop.key });
  expect(invoice.body.buyer_tax_id).toBe(taxId);
});

test('the member\'s signed links stop working, and an erased member can be given nothing new', async () => {
  const p = await person();
  const c = p.shop.communityId;
  const pdf = invoicePdfLink(app.url, ENCRYPTION_KEY, c, p.memberId, p.invoiceIds[0]);
  const portal = portalLink(app.url, ENCRYPTION_KEY, c, p.memberId);
  const unsubscribe = unsubscribeLink(app.url, ENCRYPTION_KEY, c, p.memberId, 'renewal_upcoming');
  expect((await fetch(pdf)).status).toBe(200);
  expect((await fetch(unsubscribe)).status).toBe(200);
  expect((await fetch(portal, { redirect: 'manual' })).status).toBe(303);
  expect((await erase(p)).status).toBe(200);
  expect((await fetch(pdf)).status).toBe(404);
  expect((await fetch(unsubscribe)).status).toBe(404);
  expect((await fetch(unsubscribe, { method: 'POST', body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status).toBe(404);
  expect((await fetch(portal, { redirect: 'manual' })).status).toBe(404);

  const key = p.shop.key;
  const refused = [
    await call(app.url, 'PATCH', `/v1/members/${p.memberId}`, { key, body: { email: 'back@example.test' } }),
    await call(app.url, 'PATCH', `/v1/members/${p.memberId}`, { key, body: { note: 'again' } }),
    await call(app.url, 'POST', `/v1/members/${p.memberId}/external-subjects`, { key, body: { namespace: 'app', external_user_id: 'again' } }),
    await call(app.url, 'POST', `/v1/members/${p.memberId}/grants`, { key, body: { tier_id: p.shop.ids.tiers.gold } }),
    await call(app.url, 'POST', `/v1/members/${p.memberId}/link-codes`, { key, body: { intended_platform: 'discord' } }),
    await call(app.url, 'POST', `/v1/members/${p.memberId}/portal-sessions`, { key, body: {} }),
    await checkout(app, p.shop, { tier_id: p.shop.ids.tiers.gold, plan_id: p.shop.ids.plans['gold-monthly'], subject: { member_id: p.memberId } }),
  ];
  expect(refused.map((r) => [r.status, r.body.code])).toEqual(refused.map(() => [409, 'conflict']));
  // Their old Discord account is nobody's now: a checkout with it makes a new member.
  const fresh = await checkout(app, p.shop, { tier_id: p.shop.ids.tiers.gold, plan_id: p.shop.ids.plans['gold-monthly'], subject: { platform: 'discord', platform_uid: p.uid } });
  expect(fresh.status).toBe(200);
  expect(fresh.body.member_id).not.toBe(p.memberId);
});

test('erasure is fenced by community and scope, answers 404 for an unknown member', async () => {
  const p = await person();
  const other = await createTenant(app.owner);
  expect((await erase(p, other.key)).status).toBe(404);
  expect((await call(app.url, 'POST', '/v1/members/mem_00000000000000000000000000/erase', { key: p.shop.key })).status).toBe(404);
  // Every other scope, but not members:erase.
  const writer = await createKey(app.owner, p.shop.communityId, SCOPES.filter((s) => s !== 'members:erase'));
  const noScope = await erase(p, writer.key);
  expect([noScope.status, noScope.body.code]).toEqual([403, 'missing_scope']);
  const member = await app.owner.query('select erased_at, email from billing.members where community_id = $1 and id = $2', [p.shop.communityId, p.memberId]);
  expect(member.rows[0].erased_at).toBeNull();
  expect(member.rows[0].email).not.toBeNull();
});

test('billing members erase: asks for --yes, erases a sandbox member, refuses one with a live Stripe subscription', async () => {
  const p = await person();
  const c = p.shop.communityId;
  const unconfirmed = await cli('members', 'erase', p.memberId);
  expect(unconfirmed.code).toBe(2);
  expect(unconfirmed.err).toContain('--yes');
  // A subscription at Stripe needs the API (it cancels it there): the CLI refuses.
  await app.owner.query(`update billing.subscriptions set provider = 'stripe', provider_ref = 'sub_cli' where community_id = $1 and member_id = $2`, [c, p.memberId]);
  const stripe = await cli('members', 'erase', p.memberId, '--yes');
  expect(stripe.code).toBe(1);
  expect(stripe.err).toContain('live subscription at its payment provider');
  expect((await app.owner.query('select erased_at from billing.members where community_id = $1 and id = $2', [c, p.memberId])).rows[0].erased_at).toBeNull();
  await app.owner.query(`update billing.subscriptions set provider = 'sandbox', provider_ref = null where community_id = $1 and member_id = $2`, [c, p.memberId]);
  const done = await cli('members', 'erase', p.memberId, '--yes', '--json');
  expect(done.code).toBe(0);
  expect(JSON.parse(done.out)).toMatchObject({ member_id: p.memberId, changed: true, subscriptions_cancelled: 1 });
  const again = await cli('members', 'erase', p.memberId, '--community', c, '--yes');
  expect([again.code, again.out.trim()]).toEqual([0, expect.stringContaining('was erased already')]);
});
