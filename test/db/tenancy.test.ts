// Tenancy is enforced by PostgreSQL itself: RLS forced on every table, and the API
// role (no BYPASSRLS) sees only the community set in its transaction.
import pg from 'pg';
import { createTenant, TEST_DB, Tenant } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';
import { asTenant } from '../support/tenant';
import { fixtureFiles, readFixture } from '../support/fixtures';

let owner: pg.Pool;
let a: Tenant;
let b: Tenant;

/** One row in every tenant table for a community. */
async function seedEverything(communityId: string) {
  await asTenant(owner, communityId, async (client) => {
    const q = async (sql: string, values: unknown[] = []) => (await client.query(sql, values)).rows[0];
    const pcfg = await q(`insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'main', 'discord', '{"guild_id": "1"}') returning id`, [communityId]);
    const tier = await q(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold') returning id`, [communityId]);
    const plan = await q(`insert into billing.plans (community_id, tier_id, key, amount_cents, currency, interval) values ($1, $2, 'gold-m', 1500, 'usd', 'month') returning id`, [communityId, tier.id]);
    const ent = await q(`insert into billing.entitlements (community_id, key, name) values ($1, 'chat', 'Chat') returning id`, [communityId]);
    await q(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value) values ($1, $2, $3, 'role', '1')`, [communityId, ent.id, pcfg.id]);
    await q(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)`, [communityId, tier.id, ent.id]);
    const member = await q(`insert into billing.members (community_id) values ($1) returning id`, [communityId]);
    await q(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username) values ($1, $2, 'discord', $3, 'u')`, [communityId, member.id, `uid-${communityId}`]);
    await q(`insert into billing.benefit_deliveries (community_id, member_id, platform_config_id, type, value, want, status) values ($1, $2, $3, 'role', '1', 'present', 'pending')`, [communityId, member.id, pcfg.id]);
    await q(`insert into billing.platform_actions (community_id, member_id, platform_config_id, action, target, outcome) values ($1, $2, $3, 'add_role', '1', 'ok')`, [communityId, member.id, pcfg.id]);
    await q(`insert into billing.external_subjects (community_id, member_id, namespace, external_user_id) values ($1, $2, 'app', $3)`, [communityId, member.id, `ext-${communityId}`]);
    const ev = await q(`insert into billing.events (community_id, type, data) values ($1, 'member.updated', '{}') returning id`, [communityId]);
    await q(`insert into billing.mail_messages (community_id, member_id, template, event_id, to_address, subject, text_body, html_body) values ($1, $2, 'receipt', $3, 'a@example.test', 's', 't', 'h')`, [communityId, member.id, ev.id]);
    await q(`insert into billing.mail_unsubscribes (community_id, member_id, template) values ($1, $2, 'trial_ending')`, [communityId, member.id]);
    const discount = await q(`insert into billing.discount_codes (community_id, code, value_type, percent_off) values ($1, 'TEN', 'percent', 10) returning id`, [communityId]);
    const cs = await q(`insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency, subject_kind, provider, discount_id) values ($1, $2, $3, $4, 1500, 'usd', 'member', 'sandbox', $5) returning id`, [communityId, member.id, tier.id, plan.id, discount.id]);
    await q(`insert into billing.discount_redemptions (community_id, discount_id, checkout_id, member_id, status) values ($1, $2, $3, $4, 'pending')`, [communityId, discount.id, cs.id, member.id]);
    const sub = await q(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end) values ($1, $2, $3, 'active', now() + interval '30 days') returning id`, [communityId, member.id, plan.id]);
    await q(`insert into billing.price_migrations (community_id, plan_id, price_cents, currency, notice_days, notice_ends_at, created_at) values ($1, $2, 1500, 'usd', 30, now() + interval '30 days', now())`, [communityId, plan.id]);
    await q(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency) values ($1, $2, $3, 900, 'usd')`, [communityId, member.id, plan.id]);
    const inv = await q(`insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines, subtotal_cents, discount_cents, total_cents, provider, created_at)
      values ($1, $2, $3, 'open', 'subscription_cycle', 'usd', '[{"type": "plan", "description": "Gold", "amount_cents": 1500}]', 1500, 0, 1500, 'sandbox', now()) returning id`, [communityId, member.id, sub.id]);
    await q(`insert into billing.payment_attempts (community_id, invoice_id, status, amount_cents, failure_message, provider, attempted_at) values ($1, $2, 'failed', 1500, 'declined', 'sandbox', now())`, [communityId, inv.id]);
    await q(`insert into billing.sandbox_cards (community_id, subscription_id, declines) values ($1, $2, true)`, [communityId, sub.id]);
    const re = await q(`insert into billing.refunds (community_id, invoice_id, amount_cents, provider, created_at) values ($1, $2, 100, 'sandbox', now()) returning id`, [communityId, inv.id]);
    await q(`insert into billing.credit_notes (community_id, invoice_id, refund_id, number, amount_cents, currency, created_at) values ($1, $2, $3, 'CN-T-000001', 100, 'usd', now())`, [communityId, inv.id, re.id]);
    await q(`insert into billing.disputes (community_id, invoice_id, amount_cents, status, provider, created_at) values ($1, $2, 100, 'needs_response', 'sandbox', now())`, [communityId, inv.id]);
    await q(`insert into billing.grants (community_id, member_id, tier_id, created_at) values ($1, $2, $3, now())`, [communityId, member.id, tier.id]);
    await q(`insert into billing.portal_sessions (community_id, member_id, url, expires_at) values ($1, $2, 'https://x', now())`, [communityId, member.id]);
    await q(`insert into billing.link_codes (community_id, member_id, code, intended_platform, expires_at) values ($1, $2, $3, 'discord', now())`, [communityId, member.id, `code-${communityId}`]);
    await q(`insert into billing.member_entitlements (community_id, member_id, entitlement_id, status) values ($1, $2, $3, 'active') on conflict do nothing`, [communityId, member.id, ent.id]);
    const evt = await q(`insert into billing.events (community_id, type, data) values ($1, 'test.event', '{}') returning id`, [communityId]);
    const we = await q(`insert into billing.webhook_endpoints (community_id, url) values ($1, 'https://example.com/hook') returning id`, [communityId]);
    const wd = await q(`insert into billing.webhook_deliveries (community_id, endpoint_id, event_id, event_type) values ($1, $2, $3, 'test.event') on conflict do nothing returning id`, [communityId, we.id, evt.id])
      ?? await q(`select id from billing.webhook_deliveries where community_id = $1 and endpoint_id = $2`, [communityId, we.id]);
    await q(`insert into billing.webhook_attempts (community_id, delivery_id, endpoint_id, attempt, started_at) values ($1, $2, $3, 1, now())`, [communityId, wd.id, we.id]);
    await q(`insert into billing.idempotency_keys (community_id, endpoint, key, request_hash, response_status, expires_at) values ($1, 'POST /x', 'k', 'h', 200, now() + interval '1 day')`, [communityId]);
    await q(`insert into billing.provider_events (community_id, provider, event_id, type) values ($1, 'stripe', 'evt_1', 'x')`, [communityId]);
    await q(`insert into billing.member_provider_customers (community_id, member_id, provider, customer_ref) values ($1, $2, 'stripe', 'cus_1')`, [communityId, member.id]);
    await q(`insert into billing.tax_rates (community_id, country, name, rate_ppm) values ($1, 'DE', 'VAT', 190000)`, [communityId]);
  }, { commit: true });
}

async function tenantTables(): Promise<string[]> {
  const { rows } = await owner.query<{ t: string }>(
    `select format('%I.%I', schemaname, tablename) as t from pg_tables where schemaname = 'billing' order by 1`);
  return rows.map((r) => r.t);
}

/**
 * Runs fn as billing_api (or billing_writer, the owner of the API's writing operations)
 * in a transaction that is rolled back, optionally with a community set.
 */
function asApi<T>(communityId: string | null, fn: (c: pg.PoolClient) => Promise<T>, role = 'billing_api'): Promise<T> {
  return asTenant(owner, communityId, fn, { role });
}

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  a = await createTenant(owner);
  b = await createTenant(owner);
  await seedEverything(a.communityId);
  await seedEverything(b.communityId);
});
afterAll(() => owner.end());

test('RLS is enabled and forced on every table of billing and billing_private', async () => {
  const { rows } = await owner.query(
    `select format('%I.%I', n.nspname, c.relname) as t, c.relrowsecurity, c.relforcerowsecurity
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname in ('billing', 'billing_private') and c.relkind = 'r'`);
  expect(rows.length).toBeGreaterThan(20);
  for (const r of rows) expect([r.t, r.relrowsecurity, r.relforcerowsecurity]).toEqual([r.t, true, true]);
});

test('the API role has no BYPASSRLS and is not a superuser', async () => {
  const { rows } = await owner.query(`select rolbypassrls, rolsuper from pg_roles where rolname = 'billing_api'`);
  expect(rows[0]).toEqual({ rolbypassrls: false, rolsuper: false });
});

test('every tenant table is seeded for both communities (so the checks below can fail)', async () => {
  for (const table of await tenantTables()) {
    const { rows } = await owner.query(`select count(*)::int as n from ${table}`);
    expect([table, rows[0].n >= 2]).toEqual([table, true]);
  }
});

test('a raw query as the API role with no community set sees zero rows of every tenant table', async () => {
  const tables = await tenantTables();
  await asApi(null, async (c) => {
    for (const table of tables) {
      const { rows } = await c.query(`select count(*)::int as n from ${table}`);
      expect([table, rows[0].n]).toEqual([table, 0]);
    }
  });
});

test('setting app.community_id to an empty string or garbage shows nothing either', async () => {
  for (const value of ['', ' ', "' or 1=1 --", 'com_nope']) {
    await asApi(null, async (c) => {
      await c.query(`select set_config('app.community_id', $1, true)`, [value]);
      const { rows } = await c.query('select count(*)::int as n from billing.members');
      expect(rows[0].n).toBe(0);
    });
  }
});

test("with community A set, the API role sees none of B's rows in any table", async () => {
  const tables = await tenantTables();
  await asApi(a.communityId, async (c) => {
    for (const table of tables) {
      const column = table === 'billing.communities' ? 'id' : 'community_id';
      const { rows } = await c.query(`select count(*)::int as n, count(*) filter (where ${column} <> $1)::int as foreign from ${table}`, [a.communityId]);
      expect([table, rows[0].foreign]).toEqual([table, 0]);
      expect([table, rows[0].n > 0]).toEqual([table, true]);
    }
  });
});

test("with community A set, the API's writing role cannot insert rows into B", async () => {
  await asApi(a.communityId, async (c) => {
    await expect(c.query(`insert into billing.members (community_id) values ($1)`, [b.communityId]))
      .rejects.toThrow(/row-level security/);
  }, 'billing_writer');
  await asApi(a.communityId, async (c) => {
    await expect(c.query(`insert into billing.events (community_id, type, data) values ($1, 'x', '{}')`, [b.communityId]))
      .rejects.toThrow(/row-level security/);
  }, 'billing_writer');
});

test("with community A set, updates and deletes of B's rows touch nothing", async () => {
  await asApi(a.communityId, async (c) => {
    const upd = await c.query(`update billing.subscriptions set status = 'cancelled' where community_id = $1`, [b.communityId]);
    expect(upd.rowCount).toBe(0);
    const del = await c.query(`delete from billing.webhook_endpoints where community_id = $1`, [b.communityId]);
    expect(del.rowCount).toBe(0);
    // Moving one of A's rows into B is refused too.
    await expect(c.query(`update billing.member_identities set community_id = $1`, [b.communityId])).rejects.toThrow(/row-level security|violates/);
  }, 'billing_writer');
  const { rows } = await owner.query(`select count(*)::int as n from billing.subscriptions where community_id = $1 and status = 'active'`, [b.communityId]);
  expect(rows[0].n).toBeGreaterThan(0);
});

test('the API role cannot read private tables (keys, secrets, rate buckets)', async () => {
  for (const table of ['billing_private.api_keys', 'billing_private.webhook_secrets', 'billing_private.rate_buckets']) {
    await asApi(a.communityId, async (c) => {
      await expect(c.query(`select * from ${table}`)).rejects.toThrow(/permission denied/);
    });
  }
});

// Member-owned tables also carry member_fence (82-member-portal.sql): restrictive, so it
// only ever narrows what tenant gives (a member portal session to its own member).
const MEMBER_FENCED = ['audit_log', 'benefit_deliveries', 'checkout_sessions', 'external_subjects', 'grants', 'invoices', 'link_codes', 'mail_messages', 'mail_unsubscribes', 'member_entitlements',
  'member_identities', 'members', 'platform_actions', 'portal_sessions', 'purchases', 'subscriptions'].map((t) => `billing.${t}`);

test('every table of billing has RLS forced and policies named tenant and owner_access (and a restrictive member_fence)', async () => {
  const { rows } = await owner.query(
    `select format('%I.%I', n.nspname, c.relname) as t, c.relrowsecurity and c.relforcerowsecurity as forced,
       array(select p.polname::text || case when p.polpermissive then '' else ' (restrictive)' end
             from pg_policy p where p.polrelid = c.oid order by 1) as policies
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'billing' and c.relkind = 'r' order by 1`);
  expect(rows.length).toBeGreaterThan(20);
  for (const r of rows) {
    const expected = MEMBER_FENCED.includes(r.t) ? ['member_fence (restrictive)', 'owner_access', 'tenant'] : ['owner_access', 'tenant'];
    expect([r.t, r.forced, r.policies]).toEqual([r.t, true, expected]);
  }
});

test('each tenant policy is written out by name in db/migrations/fixtures (greppable, no generating loop)', async () => {
  const text = fixtureFiles().map(readFixture).join('\n');
  const written = new Set([...text.matchAll(/^create policy tenant on (billing\.[a-z_]+)/gm)].map((m) => m[1]));
  for (const table of await tenantTables()) expect([table, written.has(table)]).toEqual([table, true]);
  expect(text).not.toMatch(/execute format\('create policy/);
});
