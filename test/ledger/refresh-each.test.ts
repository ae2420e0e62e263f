// billing.ledger_refresh_each (a statement that changes many subscriptions refreshes
// their members at once) leaves the same ledger rows and writes the same events, in
// the same order, as billing.ledger_refresh_member called for each entry in turn:
// first grants (no row yet), grants again (an inactive row), updates (sources
// changed), revokes (no source any more), nothing (already right), a member listed
// twice. Both run in one transaction from the same state (savepoints), so their times
// agree; only generated ids differ. (Since issue 28 the per-member refresh is the core
// over a list of one: this holds the list's order and first-place rules.)
import type pg from 'pg';
import { createTenant, startApp, TestApp } from '../support/app';
import { Seed } from '../support/seed';
import { createShop, subscribe } from '../support/shop';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

async function outcome(client: pg.PoolClient, communityId: string, lastEvent: string) {
  const ledger = await client.query(
    `select member_id, entitlement_id, status, revision, sources, benefits, identities, granted_at, revoked_at, next_check_at
     from billing.member_entitlements where community_id = $1 order by member_id, entitlement_id`, [communityId]);
  const events = await client.query(
    `select type, data #- '{entitlement,id}' as data from billing.events where community_id = $1 and id > $2 order by id`,
    [communityId, lastEvent]);
  return { ledger: ledger.rows, events: events.rows };
}

test('refreshing a list of members at once equals refreshing them one by one, in order', async () => {
  const shop = await createShop(app);
  const subs = [];
  for (const plan of ['gold-monthly', 'silver-monthly', 'gold-monthly', 'platinum-monthly', 'silver-monthly', 'gold-monthly']) {
    subs.push(await subscribe(app, shop, plan.split('-')[0], plan));
  }
  const members = subs.map((s) => s.memberId);
  const vip = shop.ids.entitlements['vip-chat'];
  const client = await app.owner.connect();
  try {
    await client.query('begin');
    // Ledger rows out of step with the sources, each kind of change once.
    await client.query('delete from billing.member_entitlements where community_id = $1 and member_id = $2', [shop.communityId, members[0]]);
    await client.query(`update billing.member_entitlements set status = 'inactive', sources = '[]', benefits = '[]'
      where community_id = $1 and member_id = $2`, [shop.communityId, members[1]]);
    await client.query(`update billing.member_entitlements set sources = '[]'
      where community_id = $1 and member_id = $2`, [shop.communityId, members[2]]);
    await client.query(`insert into billing.member_entitlements (community_id, member_id, entitlement_id, status, sources, granted_at)
      values ($1, $2, $3, 'active', '[{"type": "grant", "id": "gr_x"}]', now())`, [shop.communityId, members[4], vip]);
    const { rows: [{ last }] } = await client.query('select max(id) as last from billing.events where community_id = $1', [shop.communityId]);
    const list = [members[3], members[0], members[1], members[2], members[0], members[4], members[5]];
    const reasons = list.map((_, i) => `reason-${i}`);
    const triggers = list.map((_, i) => `evt_trigger_${i}`);
    const communities = list.map(() => shop.communityId);

    await client.query('savepoint one_by_one');
    for (let i = 0; i < list.length; i++) {
      await client.query('select billing.ledger_refresh_member($1, $2, $3, $4)', [shop.communityId, list[i], reasons[i], triggers[i]]);
    }
    const oneByOne = await outcome(client, shop.communityId, last);
    await client.query('rollback to savepoint one_by_one');
    const { rows: [{ n }] } = await client.query('select billing.ledger_refresh_each($1, $2, $3, $4) as n',
      [communities, list, reasons, triggers]);
    const atOnce = await outcome(client, shop.communityId, last);
    // Each event names its row by the id that row has (a new row's id is drawn before
    // it is written, and its event is built without reading it back).
    const { rows: named } = await client.query(
      `select e.data->'entitlement'->>'id' as event_row, x.id as stored_row, x.revision, (e.data->'entitlement'->>'revision')::bigint as event_revision
       from billing.events e
       left join billing.member_entitlements x on x.community_id = e.community_id and x.member_id = e.data->'member'->>'id'
         and x.entitlement_id = e.data->'entitlement'->>'entitlement_id'
       where e.community_id = $1 and e.id > $2 order by e.id`, [shop.communityId, last]);
    await client.query('rollback');

    expect(oneByOne.events.map((e) => e.type)).toEqual(expect.arrayContaining(
      ['member.entitlement.granted', 'member.entitlement.updated', 'member.entitlement.revoked']));
    expect(n).toBe(oneByOne.events.length);
    expect(atOnce).toEqual(oneByOne);
    expect(named.length).toBe(n);
    for (const row of named) {
      expect(row.event_row).toMatch(/^ment_/);
      expect(row.event_row).toBe(row.stored_row);
    }
    expect(named.some((row) => row.event_revision === '1' || row.event_revision === 1)).toBe(true);
  } finally {
    client.release();
  }
});

// Issue 28 item 3: the grant / update / revoke and the events are written once. Every
// refresh (one member, a statement's list, one reason for many, the sweep) goes through
// billing.ledger_refresh_each; no other function writes a ledger row or decides an
// entitlement event's type.
test('only billing.ledger_refresh_each writes the ledger; every refresh calls it', async () => {
  const { rows } = await app.owner.query<{ name: string; body: string }>(
    `select n.nspname || '.' || p.proname as name, p.prosrc as body
     from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ('billing', 'billing_api', 'billing_private')`);
  const matching = (re: RegExp) => rows.filter((r) => re.test(r.body)).map((r) => r.name).sort();
  // The one other write: a member's erasure rewrites the rows' identity snapshots, and
  // nothing else of them (docs/decisions/member-erasure.md).
  expect(matching(/(insert\s+into|update)\s+billing\.member_entitlements\b/i)).toEqual(['billing.ledger_refresh_each', 'billing_private.member_erase']);
  const erase = rows.find((r) => r.name === 'billing_private.member_erase')!.body;
  expect([...erase.matchAll(/update\s+billing\.member_entitlements\s+(\w+)\s+set\s+(.*?)\s+where\b/gis)].map((m) => m[2]))
    .toEqual([expect.stringMatching(/^identities = billing_private\.json_redact\(\w+\.identities, \w+, \w+\)$/)]);
  expect(matching(/'member\.entitlement\.(granted|updated|revoked)'\s+(end|else)/i)).toEqual(['billing.ledger_refresh_each']);
  expect(matching(/\bledger_refresh_each\s*\(/)).toEqual(expect.arrayContaining([
    'billing.ledger_refresh_list', 'billing.ledger_refresh_member', 'billing.ledger_refresh_members', 'billing.ledger_sweep']));
});

// The core works in parts of 1,000 list places (its rows to write are held in memory):
// a statement of 1,200 rows refreshes every member once, and a member listed again in
// a later part finds nothing left to change.
test('a list longer than a part refreshes every member once', async () => {
  const { communityId: c } = await createTenant(app.owner);
  const seed = new Seed(app.owner, c);
  const tier = await seed.tier();
  const plan = await seed.plan(tier);
  const chat = await seed.entitlement('chat');
  await app.owner.query('insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)', [c, tier, chat]);
  const { rows: members } = await app.owner.query<{ id: string }>(
    'insert into billing.members (community_id) select $1 from generate_series(1, 1200) returning id', [c]);
  const ids = members.map((m) => m.id);
  const count = async (type: string) => Number((await app.owner.query(
    'select count(*) as n from billing.events where community_id = $1 and type = $2', [c, type])).rows[0].n);
  // One statement, 1,200 rows: two parts.
  await app.owner.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end)
    select $1, m, $2, 'active', now() + interval '30 days' from unnest($3::text[]) m`, [c, plan, ids]);
  expect(await count('member.entitlement.granted')).toBe(1200);
  const { rows: [{ n: active }] } = await app.owner.query(
    `select count(*)::int as n from billing.member_entitlements where community_id = $1 and status = 'active'`, [c]);
  expect(active).toBe(1200);
  // The ledger rows taken away behind its back, then refreshed as a list with the first
  // member again at place 1,101 (the second part): one grant each.
  await app.owner.query('delete from billing.member_entitlements where community_id = $1', [c]);
  const list = [...ids.slice(0, 1100), ids[0], ...ids.slice(1100)];
  const { rows: [{ n }] } = await app.owner.query(
    `select billing.ledger_refresh_each(array_fill($1::text, array[$3::int]), $2::text[],
       array_fill('manual'::text, array[$3::int]), array_fill(null::text, array[$3::int])) as n`, [c, list, list.length]);
  expect(n).toBe(1200);
  expect(await count('member.entitlement.granted')).toBe(2400);
});
