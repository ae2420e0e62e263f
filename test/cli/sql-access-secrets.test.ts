// Issue 26 item 9: an operator's SQL login and GraphQL read no live credential. A full
// flow issues every kind of token and secret the service hands out (API keys, checkout
// pay tokens, portal URLs and portal sessions, link codes, operator sign-in links and
// sessions, whsec_ secrets, platform bot tokens, idempotent replays of all of them) in a
// sandbox community, and in a Stripe community its account's secret key and webhook
// secret (catalog apply), an open Stripe Checkout's URL and session id, the token of its
// cancel page and a Stripe Billing Portal URL; then, for each community's operator login
// and API key, every row of every relation the login may read (enumerated from
// pg_catalog with its own table and column privileges) and every field GraphQL serves
// are scanned for each of them.
import crypto from 'node:crypto';
import pg from 'pg';
import { applyCatalog, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { cli } from '../support/cli';
import { dashboardOperation } from '../../src/operations';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { catalog, checkout, createShop, externalSubject, pay, Shop } from '../support/shop';
import { deliver, startStripeMock, StripeMock, unflatten } from '../support/stripe-mock';
import { call, startApp, TEST_DB, TestApp } from '../support/app';
import { createExecutor } from '../support/dashboard';
import { createEndpoint, ENCRYPTION_KEY } from '../support/webhooks';

let app: TestApp;
let mock: StripeMock;
let shop: Shop;
/** The communities whose operator login and API key are scanned: the sandbox one, the Stripe one. */
const scanned: { name: string; shop: Shop; op: pg.Pool }[] = [];
/** Every live credential of the flow, by what it is. */
const issued: { what: string; value: string }[] = [];
const keep = (what: string, value: unknown) => {
  expect(typeof value).toBe('string');
  expect((value as string).length).toBeGreaterThanOrEqual(8);
  issued.push({ what, value: value as string });
};
const tokenOf = (url: string) => new URL(url).searchParams.get('t');


beforeAll(async () => {
  mock = await startStripeMock();
  app = await startApp({ webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true }, mock.env);
  process.env.DATABASE_URL = TEST_DB();
  shop = await createShop(app);
  keep('API key', shop.key);
  const idem = (k: string) => ({ 'Idempotency-Key': `${k}-${shop.communityId}` });

  // Checkout links (one replayed with its Idempotency-Key), one paid, one cancelled.
  const body = { tier_id: shop.ids.tiers.silver, subject: externalSubject(), return_url: 'https://shop.example/thanks?order=42' };
  const link = await checkout(app, shop, body, idem('checkout'));
  expect(link.status).toBe(200);
  const replay = await checkout(app, shop, body, idem('checkout'));
  expect(replay.body.url).toBe(link.body.url);
  keep('checkout pay token', tokenOf(link.body.url));
  expect((await pay(link.body.url)).status).toBe(303);
  const open = await checkout(app, shop, { tier_id: shop.ids.tiers.gold, plan_id: shop.ids.plans['gold-monthly'], subject: externalSubject() }, idem('checkout-open'));
  expect(open.status).toBe(200);
  keep('checkout pay token', tokenOf(open.body.url));
  const member = link.body.member_id as string;

  // Portal URL (its token) and the member portal session it opens (the cookie). Portal
  // sessions and link codes refuse an Idempotency-Key (their answers are one-time
  // credentials, never kept to be replayed), so they are asked for without one.
  const portal = await call(app.url, 'POST', `/v1/members/${member}/portal-sessions`, { key: shop.key, body: { return_url: 'https://shop.example/account' } });
  expect(portal.status).toBe(200);
  keep('portal token', tokenOf(portal.body.url));
  const opened = await fetch(portal.body.url);
  await opened.text();
  const cookie = /billing_portal=([^;]+)/.exec(opened.headers.get('set-cookie') ?? '')?.[1];
  keep('member portal session', cookie);
  const unopened = await call(app.url, 'POST', `/v1/members/${member}/portal-sessions`, { key: shop.key, body: {} });
  keep('portal token', tokenOf(unopened.body.url));

  // Link codes.
  for (const platform of ['discord', 'telegram']) {
    const code = await call(app.url, 'POST', `/v1/members/${member}/link-codes`, { key: shop.key, body: { intended_platform: platform } });
    expect(code.status).toBe(200);
    keep('link code', code.body.code);
  }

  // Webhook endpoint secrets: created, then rotated.
  const endpoint = await createEndpoint(app.url, shop.key, { url: 'https://hooks.example/billing' });
  keep('webhook secret', endpoint.secret);
  const rotated = await call(app.url, 'POST', `/v1/webhooks/endpoints/${endpoint.id}/rotate-secret`, { key: shop.key, headers: idem('rotate') });
  expect(rotated.status).toBe(200);
  keep('webhook secret', rotated.body.secret);

  // Operators: an invitation link (CLI) spent for a session, an invitation made in the
  // dashboard (left unused), and an API key made in the dashboard.
  const invite = await inviteOperator(app.owner, shop.communityId, `owner-${Date.now()}@example.com`, 'owner');
  keep('operator sign-in link', invite.token);
  const signed = await signInWithLink(app.api, invite.token, '10.26.9.1');
  if (!signed.ok) throw new Error('link refused');
  keep('operator session', signed.session.token);
  const executor = createExecutor(app);
  const caller = { key: null, session: signed.session.token, ip: '10.26.9.1' };
  const second = await executor.run(dashboardOperation('invite_operator'), caller, { body: { email: `admin-${Date.now()}@example.com`, role: 'admin' } });
  expect(second.status).toBe(200);
  keep('operator sign-in link', tokenOf((second.body as { url: string }).url));
  const key = await executor.run(dashboardOperation('create_api_key'), caller, { body: { name: 'bi', scopes: ['plans:read'] } });
  expect(key.status).toBe(200);
  keep('API key', (key.body as { key: string }).key);

  // Platform connections' bot tokens (issue 29), set with `billing catalog apply`.
  const discordToken = `${crypto.randomBytes(18).toString('base64url')}.${crypto.randomBytes(5).toString('base64url')}.${crypto.randomBytes(27).toString('base64url')}`;
  const telegramToken = `${crypto.randomInt(100000000, 999999999)}:${crypto.randomBytes(26).toString('base64url')}`;
  await applyCatalog(app.owner, shop.communityId, parseCatalog({ platforms: [
    { key: 'discord-bot', platform: 'discord', settings: { guild_id: '1234567890123456789', bot_token: discordToken } },
    { key: 'telegram-bot', platform: 'telegram', settings: { chat_id: '-1001234567890', bot_token: telegramToken } },
  ] }), { encryptionKey: ENCRYPTION_KEY });
  keep('platform bot token', discordToken);
  keep('platform bot token', telegramToken);

  // A community on Stripe, with its own account's keys (set with catalog apply).
  const stripeShop = await createShop(app, { type: 'stripe' });
  const stripeKey = `sk_test_${crypto.randomBytes(24).toString('hex')}`;
  const stripeHook = `whsec_${crypto.randomBytes(24).toString('hex')}`;
  await applyCatalog(app.owner, stripeShop.communityId, catalog({ type: 'stripe', secret_key: stripeKey, webhook_secret: stripeHook } as { type: string }),
    { encryptionKey: ENCRYPTION_KEY });
  keep('Stripe secret key', stripeKey);
  keep('Stripe webhook secret', stripeHook);
  // An open Stripe Checkout (asked for with an Idempotency-Key): its URL and session id
  // open Stripe's page to pay; its cancel page's token (sent to Stripe only) opens ours.
  const stripeIdem = { 'Idempotency-Key': `stripe-checkout-${stripeShop.communityId}` };
  const stripeBody = { tier_id: stripeShop.ids.tiers.silver, subject: externalSubject() };
  const stripeOpen = await checkout(app, stripeShop, stripeBody, stripeIdem);
  expect(stripeOpen.status).toBe(200);
  expect(stripeOpen.body.url).toMatch(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_\w+$/);
  keep('Stripe checkout URL', stripeOpen.body.url);
  keep('Stripe checkout session id', /\/pay\/(cs_\w+)$/.exec(stripeOpen.body.url)![1]);
  const sent = unflatten(mock.requestsTo('POST', '/v1/checkout/sessions').at(-1)!.form) as { cancel_url: string };
  keep('checkout cancel token', new URL(sent.cancel_url).searchParams.get('t'));
  expect((await checkout(app, stripeShop, stripeBody, stripeIdem)).body.url).toBe(stripeOpen.body.url);
  // A paid one (the member gets a Stripe customer), then that member's Billing Portal URL.
  const bought = await checkout(app, stripeShop, { tier_id: stripeShop.ids.tiers.silver, subject: externalSubject() });
  expect(bought.status).toBe(200);
  const ref = `sub_scan_${stripeShop.communityId}`;
  mock.subscription({ id: ref, customer: `cus_scan_${stripeShop.communityId}`, price: 'price_silver_m', metadata: { checkout_id: bought.body.checkout_id } });
  const completed = mock.signedEvent('checkout.session.completed', {
    id: `cs_done_${stripeShop.communityId}`, object: 'checkout.session', mode: 'subscription', status: 'complete', payment_status: 'paid',
    client_reference_id: bought.body.checkout_id, metadata: { checkout_id: bought.body.checkout_id }, subscription: ref, customer: `cus_scan_${stripeShop.communityId}`,
  }, { secret: stripeHook });
  expect((await deliver(app.url, stripeShop.communityId, completed)).status).toBe(200);
  const stripePortal = await call(app.url, 'POST', `/v1/members/${bought.body.member_id}/portal-sessions`, { key: stripeShop.key, body: {} });
  expect(stripePortal.status).toBe(200);
  expect(stripePortal.body.url).toMatch(/^https:\/\/billing\.stripe\.test\/p\/session\//);
  keep('Stripe billing portal URL', stripePortal.body.url);

  for (const [name, s] of [['sandbox', shop], ['stripe', stripeShop]] as const) {
    const granted = await cli('sql-access', 'grant', '--community', s.communityId, '--json');
    expect(granted.code).toBe(0);
    scanned.push({ name, shop: s, op: new pg.Pool({ connectionString: JSON.parse(granted.out).connection_string, max: 1 }) });
  }
});
afterAll(async () => {
  for (const { shop: s, op } of scanned) {
    await op.end();
    await cli('sql-access', 'revoke', '--community', s.communityId, '--json');
  }
  await app?.close();
  await mock?.close();
});

/** Which issued credentials a text contains. */
const hits = (text: string) => issued.filter((s) => text.includes(s.value)).map((s) => s.what);

test('the flow issued every kind of credential, and the idempotency records hold some in clear', async () => {
  expect(new Set(issued.map((s) => s.what))).toEqual(new Set(['API key', 'checkout pay token', 'portal token', 'member portal session',
    'link code', 'webhook secret', 'operator sign-in link', 'operator session', 'platform bot token', 'Stripe secret key',
    'Stripe webhook secret', 'Stripe checkout URL', 'Stripe checkout session id', 'checkout cancel token', 'Stripe billing portal URL']));
  // The scan below would find them if it could read them: the owner sees them here.
  const { rows } = await app.owner.query(`select i::text as row from billing.idempotency_keys i where community_id = any($1)`,
    [scanned.map((c) => c.shop.communityId)]);
  expect(hits(rows.map((r) => r.row).join('\n'))).toEqual(expect.arrayContaining(['checkout pay token', 'Stripe checkout URL']));
});

test.each(['sandbox', 'stripe'])('no row of any relation an operator SQL login can read holds a live credential (%s community)', async (name) => {
  const client = await scanned.find((c) => c.name === name)!.op.connect();
  try {
    // Everything this login may select: whole relations, or the columns it holds a grant on.
    const { rows: relations } = await client.query<{ rel: string; cols: string | null; whole: boolean }>(`
      select format('%I.%I', n.nspname, c.relname) as rel, has_table_privilege(c.oid, 'select') as whole,
        (select string_agg(format('%I', a.attname), ', ' order by a.attnum) from pg_attribute a
         where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
           and has_column_privilege(c.oid, a.attnum, 'select')) as cols
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p', 'v', 'm', 'f') and has_schema_privilege(n.oid, 'usage')
        and (has_table_privilege(c.oid, 'select') or has_any_column_privilege(c.oid, 'select'))
      order by 1`);
    expect(relations.length).toBeGreaterThan(100);
    const names = relations.map((r) => r.rel);
    for (const rel of ['billing.idempotency_keys', 'billing.checkout_sessions', 'billing.portal_sessions', 'billing.link_codes',
      'billing.events', 'billing.webhook_endpoints', 'analytics.mrr', 'pg_catalog.pg_proc']) expect(names).toContain(rel);
    const found: string[] = [];
    // One regular expression of every credential, each escaped.
    const any = issued.map((s) => s.value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
    let scannedRows = 0;
    for (const { rel, cols, whole } of relations) {
      const select = whole ? `select t::text as x from ${rel} t` : `select row(${cols})::text as x from ${rel}`;
      const { rows } = await client.query<{ n: number; hit: string | null }>(
        `select count(*)::int as n, max(substring(r.x from $1)) as hit from (${select}) r`, [`(${any})`]);
      scannedRows += rows[0].n;
      if (rows[0].hit) found.push(`${rel}: ${hits(rows[0].hit).join(', ')}`);
    }
    // The flow's own rows are there to be read (the scan is not empty)...
    expect(scannedRows).toBeGreaterThan(1000);
    const mine = await client.query('select count(*)::int as n from billing.idempotency_keys');
    expect(mine.rows[0].n).toBeGreaterThanOrEqual(1);
    // ... and none holds a credential.
    expect(found).toEqual([]);
  } finally {
    client.release();
  }
});

interface TypeRef { kind: string; name: string | null; ofType: TypeRef | null }
const named = (t: TypeRef): TypeRef => (t.ofType ? named(t.ofType) : t);

async function gql(query: string, key: string): Promise<{ data?: Record<string, unknown>; errors?: unknown[] }> {
  const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ query }) });
  return res.json() as Promise<{ data?: Record<string, unknown>; errors?: unknown[] }>;
}

test.each(['sandbox', 'stripe'])('no field GraphQL serves holds a live credential (%s community)', async (name) => {
  const key = scanned.find((c) => c.name === name)!.shop.key;
  const schema = await gql(`{ __schema { queryType { name } types { name kind fields { name args { name } type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }`, key);
  expect(schema.errors).toBeUndefined();
  const types = new Map<string, { name: string; kind: string; fields: { name: string; args: { name: string }[]; type: TypeRef }[] | null }>();
  for (const t of (schema.data!.__schema as { types: { name: string; kind: string; fields: never }[] }).types) types.set(t.name, t);
  const query = types.get('Query')!;
  const scalars = (typeName: string) => (types.get(typeName)?.fields ?? [])
    .filter((f) => ['SCALAR', 'ENUM'].includes(named(f.type).kind) && f.args.length === 0).map((f) => f.name);
  let read = 0;
  const found: string[] = [];
  for (const field of query.fields ?? []) {
    const type = named(field.type);
    if (type.kind !== 'OBJECT' || !type.name?.endsWith('Connection')) continue;
    const node = named(types.get(type.name)!.fields!.find((f) => f.name === 'nodes')!.type).name!;
    const r = await gql(`{ ${field.name}(first: 100) { nodes { ${scalars(node).join(' ')} } } }`, key);
    expect(r.errors).toBeUndefined();
    const text = JSON.stringify(r.data);
    read += (r.data![field.name] as { nodes: unknown[] }).nodes.length;
    if (hits(text).length) found.push(`${field.name}: ${hits(text).join(', ')}`);
  }
  expect(read).toBeGreaterThan(20);
  expect(found).toEqual([]);
});
