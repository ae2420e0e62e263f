// Subscriptions and purchases inserted many in one statement (their statement-level
// insert triggers, 40-subscriptions.sql and 45-purchases.sql) leave the same ledger
// rows and write the same events as the same rows inserted one statement each: one
// *.created per row, and the entitlement events of each member with the created
// event of its row as trigger. Only the order differs: a statement's created events
// come first, then its entitlement events; and a member with two rows in one
// statement is refreshed once, to the statement's outcome (one granted event with both
// sources, where two statements give granted then updated). Both run from the same
// state in one transaction (savepoints).
import type pg from 'pg';
import { startApp, TestApp } from '../support/app';
import { createShop } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The events after `last` and the ledger, without generated ids; each entitlement event names its trigger's type and row. */
async function outcome(client: pg.PoolClient, communityId: string, last: string, rowKey: (data: Json) => string) {
  const { rows: events } = await client.query<{ id: string; type: string; data: Json }>(
    'select id, type, data from billing.events where community_id = $1 and id > $2 order by id', [communityId, last]);
  const byId = new Map(events.map((e) => [e.id, e]));
  const shapes = events.map((e) => {
    if (!e.type.startsWith('member.entitlement.')) return JSON.stringify({ type: e.type, row: rowKey(e.data) });
    const trigger = byId.get(e.data.trigger_event_id);
    return JSON.stringify({
      type: e.type, member: e.data.member.id, entitlement: e.data.entitlement.entitlement_id,
      status: e.data.entitlement.status, revision: e.data.entitlement.revision, reason: e.data.reason,
      benefits: e.data.entitlement.benefits, sources: e.data.entitlement.sources.map((s: Json) => [s.type, s.status, s.plan_id]),
      trigger: trigger ? [trigger.type, rowKey(trigger.data)] : null,
    });
  }).sort();
  const { rows: ledger } = await client.query(
    `select member_id, entitlement_id, status, revision, benefits, granted_at is not null as granted
     from billing.member_entitlements where community_id = $1 order by member_id, entitlement_id`, [communityId]);
  return { events: shapes, ledger, count: events.length };
}

test('many subscriptions or purchases in one insert: the same events and ledger as one insert each', async () => {
  const shop = await createShop(app);
  await asTenant(app.owner, shop.communityId, async (client) => {
    const { rows: members } = await client.query<{ id: string }>(
      'insert into billing.members (community_id) select $1 from generate_series(1, 12) returning id', [shop.communityId]);
    // Eleven rows, eleven members (more than ledger_refresh_list's one-by-one limit), three tiers.
    const plans = ['gold-monthly', 'silver-monthly', 'platinum-monthly'].map((k) => shop.ids.plans[k]);
    const subs = members.slice(0, 11).map((m, i) => [m.id, plans[i % 3]]);
    const { rows: [{ last }] } = await client.query('select max(id) as last from billing.events where community_id = $1', [shop.communityId]);
    const subRow = (d: Json) => d.subscription ? `${d.subscription.member_id}/${d.subscription.plan_id}` : '';
    const insertSubs = (rows: string[][]) => client.query(
      `insert into billing.subscriptions (community_id, member_id, plan_id, status, provider, current_period_start, current_period_end)
       select $1, r->>0, r->>1, 'active', 'sandbox', now(), now() + interval '30 days' from jsonb_array_elements($2::jsonb) r`,
      [shop.communityId, JSON.stringify(rows)]);

    await client.query('savepoint each');
    for (const row of subs) await insertSubs([row]);
    const oneByOne = await outcome(client, shop.communityId, last, subRow);
    await client.query('rollback to savepoint each');
    await insertSubs(subs);
    const atOnce = await outcome(client, shop.communityId, last, subRow);
    expect(oneByOne.count).toBeGreaterThan(subs.length);
    expect(oneByOne.events.filter((e) => e.includes('"member.entitlement.granted"')).length).toBeGreaterThan(0);
    expect(atOnce).toEqual(oneByOne);

    // Purchases of the one-time tier, on top: the same again.
    const { rows: [{ after }] } = await client.query('select max(id) as after from billing.events where community_id = $1', [shop.communityId]);
    const guide = shop.ids.plans['guide-once'];
    const purchases = [members[0].id, members[11].id, members[5].id, members[6].id, members[7].id, members[8].id, members[9].id, members[1].id, members[2].id];
    const purRow = (d: Json) => d.purchase ? `${d.purchase.member_id}/${d.purchase.plan_id}` : '';
    const insertPurchases = (who: string[]) => client.query(
      `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
       select $1, m, $2, 900, 'usd', now() + interval '30 days' from unnest($3::text[]) m`, [shop.communityId, guide, who]);
    await client.query('savepoint purchases');
    for (const who of purchases) await insertPurchases([who]);
    const purchasesOneByOne = await outcome(client, shop.communityId, after, purRow);
    await client.query('rollback to savepoint purchases');
    await insertPurchases(purchases);
    const purchasesAtOnce = await outcome(client, shop.communityId, after, purRow);
    expect(purchasesOneByOne.count).toBeGreaterThan(purchases.length);
    expect(purchasesAtOnce).toEqual(purchasesOneByOne);

    // One member's two subscriptions in one statement: one refresh, to both sources.
    const { rows: [{ mark }] } = await client.query('select max(id) as mark from billing.events where community_id = $1', [shop.communityId]);
    const { rows: [twice] } = await client.query<{ id: string }>('insert into billing.members (community_id) values ($1) returning id', [shop.communityId]);
    await insertSubs([[twice.id, plans[0]], [twice.id, plans[2]]]);
    const both = await outcome(client, shop.communityId, mark, subRow);
    const granted = both.events.map((e) => JSON.parse(e)).filter((e) => e.member === twice.id);
    expect(granted.length).toBeGreaterThan(0);
    for (const e of granted) expect(e.type).toBe('member.entitlement.granted');
    expect(granted.some((e) => e.sources.length === 2)).toBe(true);

    // An insert of no rows writes nothing (its statement trigger fires all the same).
    const { rows: [{ before }] } = await client.query('select count(*)::int as before from billing.events where community_id = $1', [shop.communityId]);
    await insertSubs([]);
    await insertPurchases([]);
    expect((await client.query('select count(*)::int as n from billing.events where community_id = $1', [shop.communityId])).rows[0].n).toBe(before);
  });
});
