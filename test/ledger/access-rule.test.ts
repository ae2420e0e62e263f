// The entitlement rule has one home: billing.source_grants_access (50-ledger.sql,
// issue 28 item 3). Its cases, one table; then the database itself: the ledger and
// every other "does this source give access now?" call it, no other function or view
// spells the rule out again, and it is inlined (a filter of the callers' plans, never a
// call per row).
import type pg from 'pg';
import { createOwnerPool } from '../../src/db/pool';
import { createTenant, TEST_DB } from '../support/app';
import { Seed } from '../support/seed';

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB(), 2); });
afterAll(async () => { await owner.end(); });

type Invoices = 'none' | 'retry' | 'no_retry';
// [type, status, end relative to now in days (null: none), the subscription's open invoice, grants?]
const CASES: [string, string, number | null, Invoices, boolean][] = [
  ['subscription', 'active', 10, 'none', true],
  ['subscription', 'active', -10, 'none', true],           // renewal, not time, ends it
  ['subscription', 'trialing', 3, 'none', true],
  ['subscription', 'past_due', 10, 'retry', true],         // a retry is scheduled
  ['subscription', 'past_due', 10, 'none', false],
  ['subscription', 'past_due', 10, 'no_retry', false],
  ['subscription', 'cancelling', 10, 'none', true],        // until its period end
  ['subscription', 'cancelling', null, 'none', true],      // no end
  ['subscription', 'cancelling', -1, 'none', false],
  ['subscription', 'cancelling', 10, 'no_retry', false],   // unpaid: no retry left
  ['subscription', 'cancelling', 10, 'retry', true],
  ['subscription', 'paused', 5, 'none', true],             // until paid_through
  ['subscription', 'paused', -5, 'none', false],
  ['subscription', 'paused', null, 'none', false],
  ['subscription', 'cancelled', 10, 'none', false],
  ['purchase', 'completed', 1, 'none', true],
  ['purchase', 'completed', null, 'none', true],           // forever
  ['purchase', 'completed', -1, 'none', false],
  ['purchase', 'refunded', 10, 'none', false],
  ['purchase', 'disputed', null, 'none', false],
  ['grant', 'active', 1, 'none', true],
  ['grant', 'active', null, 'none', true],
  ['grant', 'active', -1, 'none', false],
  ['grant', 'revoked', null, 'none', false],
  ['invoice', 'paid', null, 'none', false],                // not a source
];

test('billing.source_grants_access: the rule, case by case', async () => {
  const tenant = await createTenant(owner);
  const c = tenant.communityId;
  const seed = new Seed(owner, c);
  const plan = await seed.plan(await seed.tier());
  const member = await seed.member();
  // One subscription per invoice state: the rule reads its open invoices by id.
  const subs: Record<Invoices, string> = { none: '', retry: '', no_retry: '' };
  for (const state of Object.keys(subs) as Invoices[]) {
    subs[state] = await seed.subscription(member, plan);
    if (state === 'none') continue;
    await owner.query(
      `insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
         subtotal_cents, discount_cents, total_cents, attempt_count, next_attempt_at, provider, created_at)
       values ($1, $2, $3, 'open', 'subscription_cycle', 'usd', '[{"type": "plan", "description": "Plan", "amount_cents": 1000}]',
         1000, 0, 1000, 1, case when $4 then billing.community_now($1) + interval '1 day' end, 'sandbox', now())`,
      [c, member, subs[state], state === 'retry']);
  }
  const got = [];
  for (const [type, status, days, invoices] of CASES) {
    const { rows: [r] } = await owner.query<{ grants: boolean }>(
      `select billing.source_grants_access($2, $1, $3, $4, billing.community_now($1) + make_interval(days => $5::int),
         billing.community_now($1)) as grants`,
      [c, type, type === 'subscription' ? subs[invoices] : 'src_x', status, days]);
    got.push([type, status, days, invoices, r.grants]);
  }
  expect(got).toEqual(CASES);
  // Time set aside ('-infinity': no end has passed), as billing.ledger_members_on_tiers asks.
  const { rows: [t] } = await owner.query(
    `select billing.source_grants_access('purchase', $1, 'x', 'completed', now() - interval '1 year', '-infinity') as expired_purchase,
            billing.source_grants_access('subscription', $1, $2, 'paused', null, '-infinity') as paused_unpaid,
            billing.source_grants_access('subscription', $1, $3, 'past_due', now(), '-infinity') as past_due_no_retry`,
    [c, subs.none, subs.no_retry]);
  expect(t).toEqual({ expired_purchase: true, paused_unpaid: false, past_due_no_retry: false });
});

// Clauses of the rule as its copies wrote them before it had a name (50-ledger.sql,
// 80-checkout.sql, 47-grants.sql): a function or view holding one states the rule again.
const RULE_CLAUSES: [string, RegExp][] = [
  ['past_due while a retry is open', /'past_due'\s+and\s+(billing\.)?subscription_retry_open/i],
  ['cancelling unless unpaid', /not\s+(billing\.)?subscription_unpaid/i],
  ['paused until paid_through', /paid_through\s*>\s*\w/i],
  ['a completed purchase until it expires', /access_expires_at\s+is\s+null\s+or\s+[\w.]*access_expires_at\s*>/i],
  ['a grant until it expires', /\b(p_)?g\.expires_at\s*(>|<=)\s*(p_now|billing\.community_now)/i],
  ['the statuses that grant', /status\s+in\s*\(\s*'active',\s*'trialing',\s*'past_due',\s*'cancelling'\s*\)\s*or\s+\w+\.status\s*=\s*'paused'/i],
];

test('no function or view but billing.source_grants_access spells out the rule; the ledger and the access checks call it', async () => {
  const { rows: fns } = await owner.query<{ name: string; body: string }>(
    `select n.nspname || '.' || p.proname as name, p.prosrc as body
     from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('billing', 'billing_api', 'billing_private', 'billing_graphql', 'analytics')
     union all
     select schemaname || '.' || viewname, definition from pg_views
     where schemaname in ('billing', 'billing_api', 'billing_private', 'billing_graphql', 'analytics')`);
  const copies = fns.flatMap((f) => RULE_CLAUSES.filter(([, re]) => re.test(f.body)).map(([clause]) => `${f.name}: ${clause}`));
  expect(copies.filter((x) => !x.startsWith('billing.source_grants_access:'))).toEqual([]);
  // The rule itself still holds every clause it is checked against (the check works).
  expect(copies.filter((x) => x.startsWith('billing.source_grants_access:')).length).toBeGreaterThanOrEqual(2);
  const callers = fns.filter((f) => /source_grants_access\s*\(/.test(f.body) && f.name !== 'billing.source_grants_access')
    .map((f) => f.name).sort();
  // (a member's erasure ends exactly the sources that grant now: docs/decisions/member-erasure.md)
  expect(callers).toEqual(['billing.check_eligible', 'billing.grant_json', 'billing.ledger_desired', 'billing.ledger_members_on_tiers',
    'billing_private.member_erase']);
});

test('the rule is inlined: the refresh of many members plans it as a filter, never a call', async () => {
  const { rows: [{ inlinable }] } = await owner.query(
    `select p.prolang = (select oid from pg_language where lanname = 'sql') and p.provolatile = 's'
       and not p.prosecdef and p.proconfig is null and not p.proisstrict as inlinable
     from pg_proc p where p.oid = 'billing.source_grants_access(text,text,text,text,timestamptz,timestamptz)'::regprocedure`);
  expect(inlinable).toBe(true);
  const client = await owner.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query(`explain (verbose, costs off)
      select * from billing.members m cross join lateral billing.ledger_desired(m.community_id, m.id, now()) d limit 1`);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/subscription_retry_open/);      // the rule's body, in the plan
    expect(plan).not.toMatch(/source_grants_access/);      // not a call
    expect(plan).not.toMatch(/ledger_desired/);
  } finally {
    await client.query('rollback');
    client.release();
  }
});
