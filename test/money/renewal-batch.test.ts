// Renewals of a batch (billing.apply_due_batch): the plain renewals of a batch (paid,
// one period) are written a step at a time for the whole batch (billing.renew_batch:
// the invoices, their payments, the subscriptions, each in one statement whose
// statement-level triggers write the events and the ledger), the rest one subscription
// at a time. Each subscription still gets exactly what it would get alone, declines
// go to dunning, and a second run applies nothing.
import { startApp, TestApp } from '../support/app';
import { createShop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

async function applyBatch(communityId: string): Promise<{ period_changes: number; more: boolean }> {
  const client = await app.owner.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query('select billing.apply_due_batch($1, null, 500) as r', [communityId]);
    await client.query('commit');
    await client.query(`select set_config('app.community_id', '', false)`);
    return rows[0].r;
  } finally {
    client.release();
  }
}

test('a batch with declining and succeeding cards renews each as it would alone; a second run applies nothing', async () => {
  const shop = await createShop(app);
  const subs: { subscriptionId: string; memberId: string }[] = [];
  for (let i = 0; i < 4; i++) subs.push(await subscribe(app, shop, 'gold', 'gold-monthly'));
  const declining = subs[1].subscriptionId;
  await app.owner.query(`insert into billing.sandbox_cards (community_id, subscription_id, declines) values ($1, $2, true)`,
    [shop.communityId, declining]);
  const { rows: [{ last }] } = await app.owner.query<{ last: string }>(
    'select max(id) as last from billing.events where community_id = $1', [shop.communityId]);
  const { rows: [{ end }] } = await app.owner.query<{ end: Date }>(
    'select max(current_period_end) as end from billing.subscriptions where community_id = $1', [shop.communityId]);
  await app.owner.query(`update billing.communities set clock_offset = $2::timestamptz - now() + interval '1 hour' where id = $1`,
    [shop.communityId, end]);

  expect((await applyBatch(shop.communityId)).period_changes).toBe(4);

  const { rows: state } = await app.owner.query<{ id: string; status: string; months: number; invoices: string[]; attempts: string[] }>(
    `select s.id, s.status, (extract(month from age(s.current_period_end, s.current_period_start)))::int as months,
       array(select i.status || ':' || i.total_cents || ':' || coalesce(i.next_attempt_at::text, '-') from billing.invoices i
             where i.community_id = s.community_id and i.subscription_id = s.id and i.billing_reason = 'subscription_cycle') as invoices,
       array(select a.status from billing.payment_attempts a join billing.invoices i on i.community_id = a.community_id and i.id = a.invoice_id
             where i.community_id = s.community_id and i.subscription_id = s.id and i.billing_reason = 'subscription_cycle') as attempts
     from billing.subscriptions s where s.community_id = $1 order by s.id`, [shop.communityId]);
  for (const s of state) {
    if (s.id === declining) {
      expect(s).toMatchObject({ status: 'past_due', attempts: ['failed'] });
      expect(s.invoices).toHaveLength(1);
      expect(s.invoices[0]).toMatch(/^open:1500:\d/); // a retry scheduled
    } else {
      expect(s).toMatchObject({ status: 'active', months: 1, invoices: ['paid:1500:-'], attempts: ['succeeded'] });
    }
  }

  // Each subscription's events, in its own order; the renewed ones' ledger rows moved on once.
  const { rows: evs } = await app.owner.query<{ type: string; sub: string | null; member: string | null }>(
    `select type, coalesce(data->'invoice'->>'subscription_id', data->'subscription'->>'id') as sub, data->'member'->>'id' as member
     from billing.events where community_id = $1 and id > $2 order by id`, [shop.communityId, last]);
  const memberOf = new Map(subs.map((s) => [s.memberId, s.subscriptionId]));
  const per = new Map<string, string[]>();
  for (const e of evs) {
    const sub = e.sub ?? memberOf.get(e.member ?? '')!;
    per.set(sub, [...(per.get(sub) ?? []), e.type]);
  }
  // One member.entitlement.updated per entitlement of the tier (the source's valid_until moved).
  const { rows: [{ k }] } = await app.owner.query<{ k: number }>(
    'select count(*)::int as k from billing.member_entitlements where community_id = $1 and member_id = $2',
    [shop.communityId, subs[0].memberId]);
  expect(k).toBeGreaterThan(0);
  const entitlementEvents: string[] = Array(k).fill('member.entitlement.updated');
  for (const { subscriptionId } of subs) {
    expect([subscriptionId, per.get(subscriptionId)]).toEqual([subscriptionId, subscriptionId === declining
      ? ['invoice.created', 'invoice.payment_failed', 'subscription.updated', ...entitlementEvents]
      : ['invoice.created', 'invoice.paid', 'subscription.updated', ...entitlementEvents]]);
  }
  // The three plain renewals were written a step at a time for the whole batch: their
  // three invoice.created first, then the three invoice.paid, then the subscriptions.
  const plain = evs.filter((e) => e.sub !== declining && memberOf.get(e.member ?? '') !== declining).map((e) => e.type);
  expect(plain).toEqual([
    ...Array(3).fill('invoice.created'), ...Array(3).fill('invoice.paid'),
    ...Array(3).fill('subscription.updated'), ...Array(3 * k).fill('member.entitlement.updated')]);
  const { rows: ledger } = await app.owner.query<{ status: string; revision: number; current: boolean }>(
    `select me.status, me.revision::int, me.sources->0->>'valid_until' = billing.iso(s.current_period_end) as current
     from billing.member_entitlements me join billing.subscriptions s on s.community_id = me.community_id and s.member_id = me.member_id
     where me.community_id = $1 order by s.id, me.entitlement_id`, [shop.communityId]);
  expect(ledger).toEqual(Array(4 * k).fill({ status: 'active', revision: 2, current: true }));

  // Nothing is due any more: the second run renews, charges and writes nothing.
  const { rows: [before] } = await app.owner.query(
    `select (select count(*) from billing.invoices where community_id = $1) as inv, (select count(*) from billing.events where community_id = $1) as ev`,
    [shop.communityId]);
  expect(await applyBatch(shop.communityId)).toMatchObject({ period_changes: 0, more: false });
  const { rows: [after] } = await app.owner.query(
    `select (select count(*) from billing.invoices where community_id = $1) as inv, (select count(*) from billing.events where community_id = $1) as ev`,
    [shop.communityId]);
  expect(after).toEqual(before);
});

test('a renewal written a batch at a time carries the same invoice events as one renewed alone', async () => {
  const shop = await createShop(app);
  const alone = await subscribe(app, shop, 'gold', 'gold-monthly');
  const batched = await subscribe(app, shop, 'gold', 'gold-monthly');
  const { rows: [{ last }] } = await app.owner.query<{ last: string }>(
    'select max(id) as last from billing.events where community_id = $1', [shop.communityId]);
  const { rows: [{ end }] } = await app.owner.query<{ end: Date }>(
    'select max(current_period_end) as end from billing.subscriptions where community_id = $1', [shop.communityId]);
  await app.owner.query(`update billing.communities set clock_offset = $2::timestamptz - now() + interval '1 hour' where id = $1`,
    [shop.communityId, end]);
  // One through billing.subscription_advance (invoice_open, then invoice_mark_paid), the
  // other through the batch (billing.renew_batch: the invoice written paid at once).
  await asTenant(app.owner, shop.communityId, async (client) => {
    expect((await client.query('select billing.subscription_advance($1, billing.now()) as n', [alone.subscriptionId])).rows[0].n).toBe(1);
  }, { commit: true });
  expect((await applyBatch(shop.communityId)).period_changes).toBe(1);

  const { rows } = await app.owner.query<{ type: string; data: Record<string, unknown> }>(
    `select type, data from billing.events where community_id = $1 and id > $2 and type like 'invoice.%' order by id`,
    [shop.communityId, last]);
  // Ids, numbers and instants differ between the two; everything else must not.
  const shape = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(shape);
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k,
        ['id', 'subscription_id', 'member_id', 'number'].includes(k) || /_at$|^period_/.test(k) ? (x === null ? null : typeof x) : shape(x)]));
    }
    return v;
  };
  const of = (sub: string) => rows.filter((r) => (r.data.invoice as { subscription_id: string }).subscription_id === sub)
    .map((r) => ({ type: r.type, data: shape(r.data) }));
  expect(of(alone.subscriptionId).map((e) => e.type)).toEqual(['invoice.created', 'invoice.paid']);
  expect(of(batched.subscriptionId)).toEqual(of(alone.subscriptionId));
  // And the previous attributes say what the payment changed.
  expect(rows.find((r) => r.type === 'invoice.paid')!.data.previous_attributes).toEqual(
    { status: 'open', amount_paid_cents: 0, attempt_count: 0, paid_at: null });
});

test("a batch computes each renewal's tax once", async () => {
  // billing.renew_batch's terms: the tax was one column of a subquery the planner pulled
  // up into the insert, where its two uses (the tax, the total) each called
  // billing.invoice_tax again.
  const shop = await createShop(app);
  for (let i = 0; i < 3; i++) await subscribe(app, shop, 'gold', 'gold-monthly');
  const { rows: [{ end }] } = await app.owner.query<{ end: Date }>(
    'select max(current_period_end) as end from billing.subscriptions where community_id = $1', [shop.communityId]);
  await app.owner.query(`update billing.communities set clock_offset = $2::timestamptz - now() + interval '1 hour' where id = $1`,
    [shop.communityId, end]);
  const client = await app.owner.connect();
  try {
    await client.query('begin');
    await client.query(`set local track_functions = 'all'`);
    const { rows: [{ r }] } = await client.query('select billing.apply_due_batch($1, null, 500) as r', [shop.communityId]);
    expect(r.period_changes).toBe(3);
    const { rows: [{ calls }] } = await client.query<{ calls: string }>(
      `select pg_stat_get_xact_function_calls('billing.invoice_tax(text,jsonb,jsonb,jsonb)'::regprocedure) as calls`);
    expect(Number(calls)).toBe(3);
    await client.query('commit');
  } finally {
    await client.query(`select set_config('app.community_id', '', false)`);
    client.release();
  }
});
