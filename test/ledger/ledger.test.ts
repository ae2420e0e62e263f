// The entitlement ledger and its outbox, rule by rule (issue 3; spec "States and
// transitions" rules 2-4 and "Events"). Source rows are written directly in SQL, as
// the services (checkout, lifecycle) do; the triggers do the rest.
import type pg from 'pg';
import { createOwnerPool } from '../../src/db/pool';
import { TEST_DB } from '../support/app';
import { ENTITLEMENT_EVENT, eventsSince, ledgerRows, seedWorld, World } from '../support/ledger-world';
import { asTenant } from '../support/tenant';

let owner: pg.Pool;
beforeAll(() => { owner = createOwnerPool(TEST_DB(), 4); });
afterAll(async () => { await owner.end(); });

async function lastEventId(w: World): Promise<string> {
  return (await eventsSince(owner, w.communityId, '')).at(-1)?.id ?? '';
}

async function subscribe(w: World, m: number, t: number, status = 'active', days = 30): Promise<string> {
  const { rows: [s] } = await owner.query<{ id: string }>(
    `insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end, client_reference_id)
     values ($1, $2, $3, $4, billing.community_now($1) + make_interval(days => $5), 'ref-1') returning id`,
    [w.communityId, w.members[m], w.plans[t], status, days]);
  return s.id;
}

async function purchase(w: World, m: number, t: number, days: number | null): Promise<string> {
  const { rows: [p] } = await owner.query<{ id: string }>(
    `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
     values ($1, $2, $3, 100, 'usd', billing.community_now($1) + make_interval(days => $4::int)) returning id`,
    [w.communityId, w.members[m], w.plans[t], days]);
  return p.id;
}

async function advance(w: World, days: number): Promise<number> {
  await owner.query(`update billing.communities set clock_offset = clock_offset + make_interval(days => $2) where id = $1`, [w.communityId, days]);
  const { rows: [r] } = await owner.query<{ n: number }>('select billing.ledger_sweep($1) as n', [w.communityId]);
  return r.n;
}

test('a subscription grants on creation with its source and benefits, and the event names the lifecycle event as trigger', async () => {
  const w = await seedWorld(owner); // t0 -> e0; t1 -> e0, e1; t2 -> e2
  const since = await lastEventId(w);
  const subId = await subscribe(w, 0, 1);
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => e.type)).toEqual(['subscription.created', 'member.entitlement.granted', 'member.entitlement.granted']);
  const granted = events[1];
  expect(granted.data.reason).toBe('subscription_created');
  expect(granted.data.trigger_event_id).toBe(events[0].id);
  expect(granted.data.entitlement).toMatchObject({
    entitlement_id: w.entitlements[0], key: 'e0', name: 'Entitlement 0', revision: 1, status: 'active',
    sources: [{ type: 'subscription', id: subId, status: 'active', tier_id: w.tiers[1], plan_id: w.plans[1], client_reference_id: 'ref-1' }],
    benefits: [{ platform: 'discord', platform_config_id: w.platformConfig, type: 'role', value: 'role-0' }],
  });
  expect(granted.data.entitlement.sources[0].valid_until).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(granted.data.changes).toEqual({ added_benefits: granted.data.entitlement.benefits, removed_benefits: [] });
  expect(granted.data.member).toEqual({ id: w.members[0], created_at: expect.any(String), identities: [], external_subjects: [] });
});

test('one source ending while another still supports the entitlement is an update, not a revoke', async () => {
  const w = await seedWorld(owner);
  const subId = await subscribe(w, 0, 0);
  await purchase(w, 0, 1, 5); // also grants e0 (and e1) for 5 days
  const since = await lastEventId(w);
  await owner.query(`update billing.subscriptions set status = 'cancelled' where id = $1`, [subId]);
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => e.type)).toEqual(['subscription.cancelled', 'member.entitlement.updated']);
  expect(events[1].data).toMatchObject({ reason: 'subscription_ended', trigger_event_id: events[0].id });
  expect(events[1].data.entitlement.sources.map((s: { type: string }) => s.type)).toEqual(['purchase']);
  expect(events[1].data.entitlement).toMatchObject({ status: 'active', revision: 3 });
});

test('cancelling keeps access until the period ends; the sweep revokes it then, once', async () => {
  const w = await seedWorld(owner);
  const subId = await subscribe(w, 0, 0, 'active', 10);
  await owner.query(`update billing.subscriptions set status = 'cancelling' where id = $1`, [subId]);
  let row = (await ledgerRows(owner, w.communityId)).get(`${w.members[0]}/${w.entitlements[0]}`)!;
  expect(row).toMatchObject({ status: 'active', revision: 2 });
  expect(await advance(w, 9)).toBe(0);
  const since = await lastEventId(w);
  expect(await advance(w, 2)).toBe(1);
  expect(await advance(w, 2)).toBe(0);
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => [e.type, e.data.reason, e.data.trigger_event_id])).toEqual([['member.entitlement.revoked', 'access_expired', null]]);
  expect(events[0].data.changes.removed_benefits).toEqual([{ platform: 'discord', platform_config_id: w.platformConfig, type: 'role', value: 'role-0' }]);
  row = (await ledgerRows(owner, w.communityId)).get(`${w.members[0]}/${w.entitlements[0]}`)!;
  expect(row).toMatchObject({ status: 'inactive', revision: 3, sources: [], benefits: [] });
  // The period-end job then marks it cancelled: no second revoke.
  const before = await lastEventId(w);
  await owner.query(`update billing.subscriptions set status = 'cancelled' where id = $1`, [subId]);
  expect((await eventsSince(owner, w.communityId, before)).map((e) => e.type)).toEqual(['subscription.cancelled']);
});

test('paused and cancelled subscriptions grant nothing; trialing does, past_due only while a retry is scheduled; a refund revokes a purchase', async () => {
  const w = await seedWorld(owner, { members: 5 });
  for (const [m, status] of [[0, 'paused'], [1, 'cancelled'], [2, 'past_due'], [3, 'trialing']] as const) await subscribe(w, m, 2, status);
  // Member 4: past_due with an open invoice whose retry is scheduled.
  const retrying = await subscribe(w, 4, 2, 'active');
  await owner.query(
    `insert into billing.invoices (community_id, member_id, subscription_id, status, billing_reason, currency, lines,
       subtotal_cents, discount_cents, total_cents, attempt_count, next_attempt_at, provider, created_at)
     values ($1, $2, $3, 'open', 'subscription_cycle', 'usd',
       '[{"type": "plan", "description": "Plan 2", "amount_cents": 1500}]', 1500, 0, 1500, 1, now() + interval '1 day', 'sandbox', now())`,
    [w.communityId, w.members[4], retrying]);
  await owner.query(`update billing.subscriptions set status = 'past_due' where id = $1`, [retrying]);
  let rows = await ledgerRows(owner, w.communityId);
  expect([0, 1, 2, 3, 4].map((m) => rows.get(`${w.members[m]}/${w.entitlements[2]}`)?.status ?? 'none'))
    .toEqual(['none', 'none', 'none', 'active', 'active']);
  // The retry given up (no next attempt): access ends, with the reason payment_failed.
  const beforeGiveUp = await lastEventId(w);
  await owner.query(`update billing.invoices set next_attempt_at = null where subscription_id = $1`, [retrying]);
  rows = await ledgerRows(owner, w.communityId);
  expect(rows.get(`${w.members[4]}/${w.entitlements[2]}`)?.status).toBe('inactive');
  expect((await eventsSince(owner, w.communityId, beforeGiveUp)).filter((e) => ENTITLEMENT_EVENT.test(e.type))
    .map((e) => [e.type, e.data.reason])).toEqual([['member.entitlement.revoked', 'payment_failed']]);
  const purId = await purchase(w, 0, 2, null);
  expect((await ledgerRows(owner, w.communityId)).get(`${w.members[0]}/${w.entitlements[2]}`)?.status).toBe('active');
  const since = await lastEventId(w);
  await owner.query(`update billing.purchases set status = 'refunded' where id = $1`, [purId]);
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => [e.type, e.data.reason ?? null])).toEqual([['purchase.refunded', null], ['member.entitlement.revoked', 'purchase_refunded']]);
  expect(events[0].data.previous_attributes).toEqual({ status: 'completed' });
});

test('a plan switch to a tier with other entitlements grants the new and revokes the old in one change', async () => {
  const w = await seedWorld(owner);
  const subId = await subscribe(w, 0, 0); // e0
  const since = await lastEventId(w);
  await owner.query(`update billing.subscriptions set plan_id = $2 where id = $1`, [subId, w.plans[2]]); // -> e2
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => [e.type, e.data.reason ?? null, e.data.entitlement?.entitlement_id ?? null])).toEqual([
    ['subscription.updated', null, null],
    ['member.entitlement.revoked', 'plan_changed', w.entitlements[0]],
    ['member.entitlement.granted', 'plan_changed', w.entitlements[2]],
  ]);
  expect(events[0].data.previous_attributes).toMatchObject({ plan_id: w.plans[0], tier_id: w.tiers[0] });
});

test('linking an identity republishes active entitlements only, with the identity in data.member', async () => {
  const w = await seedWorld(owner);
  const subId = await subscribe(w, 0, 1); // e0, e1
  await owner.query(`update billing.subscriptions set plan_id = $2 where id = $1`, [subId, w.plans[0]]); // e1 revoked
  const since = await lastEventId(w);
  await owner.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
    values ($1, $2, 'discord', '42', 'ann')`, [w.communityId, w.members[0]]);
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => e.type)).toEqual(['member.updated', 'member.entitlement.updated']);
  expect(events[0].data.change).toEqual({ kind: 'identity_linked', platform: 'discord', platform_uid: '42' });
  expect(events[1].data).toMatchObject({
    reason: 'identity_linked', trigger_event_id: events[0].id,
    member: { identities: [{ platform: 'discord', platform_uid: '42', username: 'ann' }] },
    entitlement: { entitlement_id: w.entitlements[0], revision: 3 }, // 1 grant, 2 plan switch (sources), 3 identity
  });
  // A later grant of e1 carries the identity without a separate update.
  const before = await lastEventId(w);
  await owner.query(`update billing.subscriptions set plan_id = $2 where id = $1`, [subId, w.plans[1]]);
  const grant = (await eventsSince(owner, w.communityId, before)).filter((e) => e.type === 'member.entitlement.granted');
  expect(grant.map((e) => [e.data.entitlement.entitlement_id, e.data.entitlement.revision])).toEqual([[w.entitlements[1], 3]]);
});

test('editing a tier\'s entitlement links in one statement refreshes every member on it (1000 members)', async () => {
  const w = await seedWorld(owner, { members: 0 });
  await owner.query(
    `with m as (insert into billing.members (community_id) select $1 from generate_series(1, 1000) returning id)
     insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end)
     select $1, m.id, $2, 'active', billing.community_now($1) + interval '30 days' from m`,
    [w.communityId, w.plans[2]]);
  const since = await lastEventId(w);
  const started = Date.now();
  await owner.query(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3), ($1, $2, $4)`,
    [w.communityId, w.tiers[2], w.entitlements[0], w.entitlements[1]]);
  const elapsed = Date.now() - started;
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.length).toBe(2000);
  expect(new Set(events.map((e) => `${e.type}:${e.data.reason}:${e.data.trigger_event_id}`))).toEqual(
    new Set(['member.entitlement.granted:tier_entitlements_changed:null']));
  const before = await lastEventId(w);
  await owner.query(`delete from billing.tier_entitlements where community_id = $1 and tier_id = $2 and entitlement_id = $3`,
    [w.communityId, w.tiers[2], w.entitlements[0]]);
  expect((await eventsSince(owner, w.communityId, before)).filter((e) => e.type === 'member.entitlement.revoked').length).toBe(1000);
  // Benefits: one statement, one update per active member, with the change listed.
  const b = await lastEventId(w);
  await owner.query(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
    values ($1, $2, $3, 'role', 'gold')`, [w.communityId, w.entitlements[1], w.platformConfig]);
  const upd = await eventsSince(owner, w.communityId, b);
  expect(upd.length).toBe(1000);
  expect(upd[0].data.changes.added_benefits).toEqual([{ platform: 'discord', platform_config_id: w.platformConfig, type: 'role', value: 'gold' }]);
  expect(elapsed).toBeLessThan(30000);
});

test('triggers read the row\'s community and its clock, never the session setting', async () => {
  const w = await seedWorld(owner);
  const other = await seedWorld(owner);
  await owner.query(`update billing.communities set clock_offset = interval '40 days' where id = $1`, [w.communityId]);
  await asTenant(owner, other.communityId, async (client) => {
    // Expires 10 real days from now: already past in w's clock (+40 days).
    await client.query(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
      values ($1, $2, $3, 1, 'usd', now() + interval '10 days')`, [w.communityId, w.members[0], w.plans[0]]);
    await client.query(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
      values ($1, $2, $3, 1, 'usd', now() + interval '50 days')`, [w.communityId, w.members[1], w.plans[0]]);
  }, { commit: true });
  const rows = await ledgerRows(owner, w.communityId);
  expect(rows.get(`${w.members[0]}/${w.entitlements[0]}`)).toBeUndefined();
  expect(rows.get(`${w.members[1]}/${w.entitlements[0]}`)?.status).toBe('active');
  expect((await eventsSince(owner, other.communityId, '')).some((e) => e.type.startsWith('purchase.'))).toBe(false);
});

// billing_writer owns the API operations that write (billing_api itself only reads).
test("the API's writing role, confined by RLS to its community, drives the same triggers", async () => {
  const w = await seedWorld(owner);
  const subId = await subscribe(w, 0, 0);
  await asTenant(owner, w.communityId, (client) => client.query(`update billing.subscriptions set status = 'paused' where id = $1`, [subId]),
    { role: 'billing_writer', commit: true });
  const row = (await ledgerRows(owner, w.communityId)).get(`${w.members[0]}/${w.entitlements[0]}`)!;
  expect(row).toMatchObject({ status: 'inactive', revision: 2 });
});

test('checkouts emit created, completed and expired events and change no entitlement', async () => {
  const w = await seedWorld(owner);
  const since = await lastEventId(w);
  const { rows: [a] } = await owner.query<{ id: string }>(
    `insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency, subject_kind, provider)
     values ($1, $2, $3, $4, 500, 'usd', 'member', 'sandbox') returning id`, [w.communityId, w.members[0], w.tiers[0], w.plans[0]]);
  const { rows: [b] } = await owner.query<{ id: string }>(
    `insert into billing.checkout_sessions (community_id, member_id, tier_id, plan_id, amount_cents, currency, subject_kind, provider)
     values ($1, $2, $3, $4, 500, 'usd', 'member', 'sandbox') returning id`, [w.communityId, w.members[1], w.tiers[0], w.plans[0]]);
  await owner.query(`update billing.checkout_sessions set url = 'https://x' where id = $1`, [a.id]);
  await owner.query(`update billing.checkout_sessions set status = 'completed', completed_at = now() where id = $1`, [a.id]);
  await owner.query(`update billing.checkout_sessions set status = 'expired' where id = $1`, [b.id]);
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => [e.type, e.data.checkout.id])).toEqual([
    ['checkout.created', a.id], ['checkout.created', b.id], ['checkout.completed', a.id], ['checkout.expired', b.id]]);
  expect((await ledgerRows(owner, w.communityId)).size).toBe(0);
});

test('member.created on a new member; ledger_refresh_member is a no-op when nothing changed', async () => {
  const w = await seedWorld(owner, { members: 1 });
  const events = await eventsSince(owner, w.communityId, '');
  expect(events.filter((e) => e.type === 'member.created').map((e) => e.data.member.id)).toEqual(w.members);
  await subscribe(w, 0, 0);
  const { rows: [r] } = await owner.query<{ n: number }>(
    `select billing.ledger_refresh_member($1, $2, 'manual', null) as n`, [w.communityId, w.members[0]]);
  expect(r.n).toBe(0);
});

test('concurrent changes to one member serialise: the second refresh sees what the first committed', async () => {
  const w = await seedWorld(owner);
  const a = await owner.connect();
  const b = await owner.connect();
  try {
    await a.query('begin');
    await a.query(`insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end)
      values ($1, $2, $3, 'active', now() + interval '30 days')`, [w.communityId, w.members[0], w.plans[0]]);
    await b.query('begin');
    // b's refresh waits on a's lock on the member row...
    const pending = b.query(`insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency)
      values ($1, $2, $3, 1, 'usd')`, [w.communityId, w.members[0], w.plans[0]]);
    await new Promise((r) => setTimeout(r, 200));
    await a.query('commit');
    await pending; // ...and then reads a's ledger row instead of creating a second one.
    await b.query('commit');
  } finally {
    a.release();
    b.release();
  }
  const row = (await ledgerRows(owner, w.communityId)).get(`${w.members[0]}/${w.entitlements[0]}`)!;
  expect(row.status).toBe('active');
  expect(row.revision).toBe(2);
  expect(row.sources.map((s) => s.type).sort()).toEqual(['purchase', 'subscription']);
  const events = (await eventsSince(owner, w.communityId, '')).filter((e) => e.type.startsWith('member.entitlement.'));
  expect(events.map((e) => [e.type, e.data.entitlement.revision])).toEqual([
    ['member.entitlement.granted', 1], ['member.entitlement.updated', 2]]);
});

test('ledger_sweep(null) sweeps every community, each by its own clock', async () => {
  const fast = await seedWorld(owner, { members: 1 });
  const slow = await seedWorld(owner, { members: 1 });
  for (const w of [fast, slow]) await purchase(w, 0, 0, 3);
  await owner.query(`update billing.communities set clock_offset = interval '4 days' where id = $1`, [fast.communityId]);
  await owner.query('select billing.ledger_sweep(null)');
  expect((await ledgerRows(owner, fast.communityId)).get(`${fast.members[0]}/${fast.entitlements[0]}`)?.status).toBe('inactive');
  expect((await ledgerRows(owner, slow.communityId)).get(`${slow.members[0]}/${slow.entitlements[0]}`)?.status).toBe('active');
});

test('a plan moved to another tier moves its subscribers\' entitlements with it', async () => {
  const w = await seedWorld(owner, { members: 1 });
  await subscribe(w, 0, 0); // t0 -> e0
  const since = await lastEventId(w);
  await owner.query(`update billing.plans set tier_id = $2 where id = $1`, [w.plans[0], w.tiers[2]]); // t2 -> e2
  const events = await eventsSince(owner, w.communityId, since);
  expect(events.map((e) => [e.type, e.data.reason, e.data.entitlement.entitlement_id])).toEqual([
    ['member.entitlement.revoked', 'tier_entitlements_changed', w.entitlements[0]],
    ['member.entitlement.granted', 'tier_entitlements_changed', w.entitlements[2]],
  ]);
});
