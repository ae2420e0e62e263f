// MRR history that is true (issue 26 item 5): each past day shows what MRR was on that
// day, and the MRR movements (new, expansion, contraction, churn, reactivation) per day
// and month are what happened. The expected figures are recomputed here, in
// TypeScript, from the actions this test performs day by day on the sandbox test
// clock (checkouts, a trial, an upgrade, a downgrade, a price change and a price
// migration that applies at a subscriber's period end, a pause and its resume, cancels at period end and now, a reactivation of a cancel, a returning
// member, refunds with and without ending access, a dispute), never from the SQL: the
// model knows each subscription's monthly price and whether it bills, and classifies
// each change as docs/analytics.md says. What the model needs from the system is only
// what a subscriber sees of their own subscription through the API (its status after
// an action, its price after the catalog changed, when its period ends).
import { migratePlanPrice } from '../../src/domain/catalog/price-migrations';
import { sandboxDispute } from '../../src/domain/checkout/checkout-completion';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { call, startApp, TestApp } from '../support/app';
import { advance, createShop, externalSubject, Shop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Kind = 'new' | 'expansion' | 'contraction' | 'churn' | 'reactivation';
const KINDS: Kind[] = ['new', 'expansion', 'contraction', 'churn', 'reactivation'];
const BILLING = new Set(['active', 'past_due', 'cancelling']);

const START = Date.parse('2027-01-10T12:00:00Z'); // day 0, noon UTC by the community's clock
const dayOf = (k: number) => new Date(START + k * 86_400_000).toISOString().slice(0, 10);
/** The day index (0 = START's day) of an instant, by its UTC date. */
const indexOf = (iso: string) => Math.round((Date.parse(iso.slice(0, 10)) - Date.parse(dayOf(0))) / 86_400_000);

/** The independent model: each subscription's monthly price and whether it bills. */
class Model {
  subs = new Map<string, { member: string; cents: number; billing: boolean; billedBefore: boolean }>();
  membersBilled = new Set<string>();
  moves: { day: number; sub: string; kind: Kind; delta: number }[] = [];
  due: { day: number; sub: string; what: () => void }[] = [];
  today = 0;

  add(sub: string, member: string) { this.subs.set(sub, { member, cents: 0, billing: false, billedBefore: false }); }

  /** The subscription now bills `cents` a month (billing) or nothing. */
  set(sub: string, cents: number, billing: boolean) {
    const s = this.subs.get(sub)!;
    const from = s.billing ? s.cents : 0;
    const to = billing ? cents : 0;
    if (s.billing !== billing || from !== to) {
      const kind: Kind = !s.billing ? (s.billedBefore || this.membersBilled.has(s.member) ? 'reactivation' : 'new')
        : !billing ? 'churn' : to > from ? 'expansion' : 'contraction';
      this.moves.push({ day: this.today, sub, kind, delta: to - from });
    }
    s.cents = cents;
    s.billing = billing;
    if (billing) { s.billedBefore = true; this.membersBilled.add(s.member); }
  }

  price(sub: string, cents: number) { this.set(sub, cents, this.subs.get(sub)!.billing); }
  at(dayIndex: number, sub: string, what: () => void) { this.due.push({ day: dayIndex, sub, what }); }
  cancelDue(sub: string) { this.due = this.due.filter((d) => d.sub !== sub); }

  /** The clock reached day k: what fell due by then happens on its day. */
  advanceTo(k: number) {
    this.today = k;
    for (const d of this.due.filter((x) => x.day <= k).sort((a, b) => a.day - b.day)) d.what();
    this.due = this.due.filter((x) => x.day > k);
  }

  mrrAt(k: number) { return this.moves.filter((m) => m.day <= k).reduce((a, m) => a + m.delta, 0); }
  billingAt(k: number) {
    const bySub = new Map<string, number>();
    for (const m of this.moves.filter((x) => x.day <= k)) {
      if (m.kind === 'new' || m.kind === 'reactivation') bySub.set(m.sub, 1);
      if (m.kind === 'churn') bySub.set(m.sub, 0);
    }
    return [...bySub.values()].reduce((a, b) => a + b, 0);
  }
  movesOf(pred: (day: number) => boolean) {
    const out: Json = { net_cents: 0 };
    for (const k of KINDS) { out[`${k}_cents`] = 0; out[`${k}_count`] = 0; }
    for (const m of this.moves.filter((x) => pred(x.day))) {
      out[`${m.kind}_cents`] += m.delta;
      out[`${m.kind}_count`] += 1;
      out.net_cents += m.delta;
    }
    return out;
  }
}

test('each day shows the MRR it had and the movements that happened, as an independent day-by-day recomputation', async () => {
  const shop: Shop = await createShop(app);
  const other = await createShop(app); // its MRR never appears in shop's figures
  await subscribe(app, other, 'platinum', 'platinum-monthly');
  await app.owner.query(`update billing.communities set clock_offset = $2::timestamptz - now() where id = $1`,
    [shop.communityId, new Date(START).toISOString()]);
  const api = (method: string, path: string, body?: unknown) => call(app.url, method, path, { key: shop.key, body });
  const sub = async (id: string): Promise<Json> => (await api('GET', `/v1/subscriptions/${id}`)).body;
  const invoices = async (id: string): Promise<Json[]> => (await api('GET', `/v1/invoices?subscription_id=${id}`)).body.data;
  const m = new Model();
  const price = { gold: 1500, silver: 800, platinum: 3000, annual: 15000 / 12 };
  const ids: Record<string, string> = {};
  const members: Record<string, string> = {};

  /** A checkout: bills from now, or from its trial's end (the period end the API shows). */
  const buy = async (name: string, tier: string, plan: string, cents: () => number, subject: Json = externalSubject(name)) => {
    const s = await subscribe(app, shop, tier, plan, subject);
    ids[name] = s.subscriptionId;
    members[name] = s.memberId;
    m.add(name, s.memberId);
    const now = await sub(s.subscriptionId);
    if (now.status === 'trialing') m.at(indexOf(now.current_period_end), name, () => m.set(name, cents(), true));
    else m.set(name, cents(), true);
    return now;
  };
  /** After an action, the status the API shows decides whether it still bills. */
  const follow = async (name: string) => {
    const s = await sub(ids[name]);
    const model = m.subs.get(name)!;
    if (BILLING.has(s.status) !== model.billing) m.set(name, model.cents, BILLING.has(s.status));
    return s;
  };

  const days = 40;
  const checks: { k: number; mrr: number }[] = [];
  for (let k = 0; k <= days; k++) {
    if (k > 0) {
      await advance(app, shop, 1);
      m.advanceTo(k);
    }
    switch (k) {
      case 0:
        await buy('A', 'gold', 'gold-monthly', () => price.gold);
        await buy('B', 'silver', 'silver-monthly', () => price.silver);
        await buy('C', 'gold', 'gold-annual', () => price.annual); // a 7-day trial: bills from its end
        await buy('I', 'silver', 'silver-monthly', () => price.silver);
        break;
      case 2:
        await buy('D', 'silver', 'silver-monthly', () => price.silver);
        break;
      case 3: { // upgrade: applies now
        expect((await api('POST', `/v1/subscriptions/${ids.B}/switch`, { plan_id: shop.ids.plans['gold-monthly'] })).status).toBe(200);
        m.price('B', price.gold);
        break;
      }
      case 4: { // the catalog's price of Silver changes: new buyers pay it; existing ones what the API says they pay
        await app.owner.query(`update billing.plans set amount_cents = 1000 where community_id = $1 and id = $2`,
          [shop.communityId, shop.ids.plans['silver-monthly']]);
        price.silver = 1000;
        m.price('D', (await sub(ids.D)).amount_cents);
        await buy('H', 'silver', 'silver-monthly', () => price.silver);
        // The operator moves Silver's subscribers to the new price without notice: I
        // pays it from its first renewal (its period end), an expansion that day.
        const moved = await migratePlanPrice(app.owner, shop.communityId, 'silver-monthly', 0);
        expect(moved.subscription_ids).toContain(ids.I);
        expect((await sub(ids.I)).amount_cents).toBe(800);
        m.at(indexOf((await sub(ids.I)).current_period_end), 'I', () => m.price('I', price.silver));
        break;
      }
      case 5: { // pause: stops billing when the API says it stopped (now, or at the paid period's end)
        expect((await api('POST', `/v1/subscriptions/${ids.A}/pause`, {})).status).toBe(200);
        const s = await follow('A');
        if (BILLING.has(s.status) && s.current_period_end) m.at(indexOf(s.current_period_end), 'A', () => m.set('A', price.gold, false));
        break;
      }
      case 7:
        expect((await sub(ids.C)).status).toBe('active'); // the trial ended today
        break;
      case 8: { // resume
        expect((await api('POST', `/v1/subscriptions/${ids.A}/resume`, {})).status).toBe(200);
        m.cancelDue('A');
        await follow('A');
        break;
      }
      case 9: { // cancel at period end: bills until then
        expect((await api('POST', `/v1/subscriptions/${ids.D}/cancel`, {})).status).toBe(202);
        const s = await follow('D');
        expect(s.status).toBe('cancelling');
        m.at(indexOf(s.current_period_end), 'D', () => m.set('D', m.subs.get('D')!.cents, false));
        break;
      }
      case 10: { // a full refund that keeps the subscription: MRR does not move
        await buy('E', 'platinum', 'platinum-monthly', () => price.platinum);
        const [inv] = await invoices(ids.E);
        expect((await api('POST', `/v1/invoices/${inv.id}/refunds`, {})).status).toBe(200);
        expect((await follow('E')).status).toBe('active');
        break;
      }
      case 11:
        await buy('F', 'gold', 'gold-monthly', () => price.gold);
        break;
      case 12: { // a dispute ends F's subscription: churn
        const [inv] = await invoices(ids.F);
        await sandboxDispute(app.owner, inv.id);
        expect((await follow('F')).status).toBe('cancelled');
        break;
      }
      case 13: { // bought and cancelled at once the same day
        await buy('G', 'silver', 'silver-monthly', () => price.silver, { external: { namespace: 'app', external_user_id: 'returning-member' } });
        expect((await api('POST', `/v1/subscriptions/${ids.G}/cancel`, { at: 'now' })).status).toBe(202);
        expect((await follow('G')).status).toBe('cancelled');
        break;
      }
      case 14: { // a refund that ends the access: churn
        const [inv] = await invoices(ids.H);
        expect((await api('POST', `/v1/invoices/${inv.id}/refunds`, { revoke_access: true })).status).toBe(200);
        expect((await follow('H')).status).toBe('cancelled');
        break;
      }
      case 15: // the member of G comes back with a new subscription: a reactivation
        await buy('G2', 'gold', 'gold-monthly', () => price.gold, { external: { namespace: 'app', external_user_id: 'returning-member' } });
        expect(members.G2).toBe(members.G);
        break;
      case 16: { // downgrade: takes effect at the period end, at the plan's price then
        const r = await api('POST', `/v1/subscriptions/${ids.B}/switch`, { plan_id: shop.ids.plans['silver-monthly'] });
        expect(r.status).toBe(200);
        expect(r.body.scheduled_plan_id).toBe(shop.ids.plans['silver-monthly']);
        m.at(indexOf(r.body.scheduled_at), 'B', () => m.price('B', price.silver));
        break;
      }
      case 18: // cancel at period end, then take it back: it billed all along
        expect((await api('POST', `/v1/subscriptions/${ids.E}/cancel`, {})).status).toBe(202);
        await follow('E');
        break;
      case 19:
        expect((await api('POST', `/v1/subscriptions/${ids.E}/reactivate`, {})).status).toBe(200);
        await follow('E');
        break;
      default:
        break;
    }
    // Today's figure as it stands, every day.
    const [today] = (await app.owner.query<{ mrr: number }>(
      `select coalesce(sum(mrr_cents), 0)::int as mrr from analytics.mrr where community_id = $1`, [shop.communityId])).rows;
    checks.push({ k, mrr: today.mrr });
  }

  // The model's figures, day by day.
  const expectedDaily = Array.from({ length: days + 1 }, (_, k) => ({ day: dayOf(k), mrr_cents: Math.round(m.mrrAt(k)), billing_subscriptions: m.billingAt(k) }))
    .filter((d) => d.billing_subscriptions > 0);
  expect(checks).toEqual(checks.map(({ k }) => ({ k, mrr: Math.round(m.mrrAt(k)) })));
  // What the history holds: every kind happened; the migration moved I at its renewal.
  for (const k of KINDS) expect(m.moves.some((x) => x.kind === k)).toBe(true);
  expect(m.moves.filter((x) => x.sub === 'I').map((x) => [x.kind, x.delta])).toEqual([['new', 800], ['expansion', 200]]);
  expect((await sub(ids.I)).amount_cents).toBe(1000);

  // analytics.mrr_daily: every past day as it was then (not today's prices or states).
  const asApi = (sql: string, values: unknown[] = []) =>
    asTenant(app.api, shop.communityId, async (c) => (await c.query(sql, values)).rows, { scopes: 'analytics:read', commit: true });
  const daily = await asApi(`select day::text, mrr_cents::int, billing_subscriptions::int from analytics.mrr_daily
    where day >= $1::date order by day`, [dayOf(0)]);
  expect(daily).toEqual(expectedDaily);

  // analytics.mrr_movements_daily: each day's movements by kind.
  const expectedMoves: Json[] = Array.from({ length: days + 1 }, (_, k): Json => ({ day: dayOf(k), currency: 'usd', ...m.movesOf((d) => d === k) }))
    .filter((d) => KINDS.some((kind) => d[`${kind}_count`] > 0));
  const moves = await asApi(`select day::text, currency, ${KINDS.map((k) => `${k}_cents::int, ${k}_count::int`).join(', ')}, net_cents::int
    from analytics.mrr_movements_daily order by day`);
  expect(moves).toEqual(expectedMoves);

  // analytics.mrr_movements_monthly: per month, with the MRR it opened and closed with.
  const monthsOf = [...new Set(Array.from({ length: days + 1 }, (_, k) => dayOf(k).slice(0, 7)))];
  const expectedMonths: Json[] = monthsOf.map((mo): Json => {
    const idx = Array.from({ length: days + 1 }, (_, k) => k).filter((k) => dayOf(k).startsWith(mo));
    const opening = idx[0] === 0 ? 0 : m.mrrAt(idx[0] - 1);
    const mv = m.movesOf((d) => dayOf(d).startsWith(mo));
    return { month: `${mo}-01`, currency: 'usd', opening_mrr_cents: Math.round(opening), ...mv, closing_mrr_cents: Math.round(opening + mv.net_cents) };
  }).filter((x) => KINDS.some((kind) => x[`${kind}_count`] > 0));
  const months = await asApi(`select month::text, currency, opening_mrr_cents::int, ${KINDS.map((k) => `${k}_cents::int, ${k}_count::int`).join(', ')},
    net_cents::int, closing_mrr_cents::int from analytics.mrr_movements_monthly order by month`);
  expect(months).toEqual(expectedMonths);

  // The overview's series (the rollup) shows the same days and movements.
  const overview = (await asApi(`select billing_api.analytics_overview('{"days": 90}') as r`))[0].r;
  const seriesDays = overview.series.days.filter((d: Json) => d.day >= dayOf(0));
  expect(seriesDays).toEqual(Array.from({ length: days + 1 }, (_, k) => {
    const mv = m.movesOf((d) => d === k);
    return expect.objectContaining({ day: dayOf(k), mrr_cents: Math.round(m.mrrAt(k)), ...Object.fromEntries(KINDS.map((kind) => [`${kind}_cents`, mv[`${kind}_cents`]])) });
  }));
  for (const mo of expectedMonths) {
    expect(overview.series.months).toContainEqual({ month: mo.month, opening_mrr_cents: mo.opening_mrr_cents, net_cents: mo.net_cents,
      closing_mrr_cents: mo.closing_mrr_cents, ...Object.fromEntries(KINDS.map((kind) => [`${kind}_cents`, mo[`${kind}_cents`]])) });
  }

  // The summary (additive): the movements of its 30-day window.
  const summary = (await api('GET', '/v1/analytics/summary')).body;
  const windowStart = indexOf(summary.window_start);
  const recent = m.movesOf((d) => d >= windowStart && d <= days);
  expect(summary.mrr_cents).toBe(Math.round(m.mrrAt(days)));
  expect(summary.mrr_movements).toEqual({ net_cents: recent.net_cents, ...Object.fromEntries(KINDS.map((k) => [`${k}_cents`, recent[`${k}_cents`]])) });

  // GraphQL: mrrDailies and mrrMovementsDailies.
  const gql = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.key}` },
    body: JSON.stringify({ query: `{ mrrDailies(first: 100, orderBy: DAY_ASC) { nodes { day mrrCents } }
      mrrMovementsDailies(first: 100, orderBy: DAY_ASC) { nodes { day newCents expansionCents contractionCents churnCents reactivationCents netCents } }
      mrrMovementsMonthlies(first: 12, orderBy: MONTH_ASC) { nodes { month openingMrrCents closingMrrCents } } }` }) });
  const { data, errors } = await gql.json();
  expect(errors).toBeUndefined();
  expect(data.mrrDailies.nodes.filter((n: Json) => n.day >= dayOf(0))).toEqual(expectedDaily.map((d) => ({ day: d.day, mrrCents: String(d.mrr_cents) })));
  expect(data.mrrMovementsDailies.nodes).toEqual(expectedMoves.map((d) => ({ day: d.day, newCents: String(d.new_cents),
    expansionCents: String(d.expansion_cents), contractionCents: String(d.contraction_cents), churnCents: String(d.churn_cents),
    reactivationCents: String(d.reactivation_cents), netCents: String(d.net_cents) })));
  expect(data.mrrMovementsMonthlies.nodes).toEqual(expectedMonths.map((x) => ({ month: x.month,
    openingMrrCents: String(x.opening_mrr_cents), closingMrrCents: String(x.closing_mrr_cents) })));

  // The other community's movements stay its own.
  const otherMoves = (await app.owner.query(`select count(*)::int as n from billing.mrr_movements where community_id = $1`, [other.communityId])).rows[0].n;
  expect(otherMoves).toBe(1);
}, 300_000);

test('the dashboard overview lists the MRR movements by month and by day', async () => {
  const shop = await createShop(app);
  const a = await subscribe(app, shop, 'gold', 'gold-monthly');
  await subscribe(app, shop, 'silver', 'silver-monthly');
  await advance(app, shop, 1);
  expect((await call(app.url, 'POST', `/v1/subscriptions/${a.subscriptionId}/pause`, { key: shop.key, body: {} })).status).toBe(200);
  const invite = await inviteOperator(app.owner, shop.communityId, `viewer-${Date.now()}@example.com`, 'viewer');
  const signed = await signInWithLink(app.api, invite.token, '10.26.5.1');
  if (!signed.ok) throw new Error('link refused');
  const res = await fetch(`${app.url}/dashboard`, { headers: { cookie: `billing_session=${encodeURIComponent(signed.session.token)}` } });
  expect(res.status).toBe(200);
  const page = await res.text();
  const section = (id: string) => page.slice(page.indexOf(`id="${id}"`), page.indexOf('</table>', page.indexOf(`id="${id}"`)));
  const { rows: [{ today, yesterday }] } = await app.owner.query<{ today: string; yesterday: string }>(
    `select to_char(billing.community_now($1), 'YYYY-MM-DD') as today, to_char(billing.community_now($1) - interval '1 day', 'YYYY-MM-DD') as yesterday`,
    [shop.communityId]);
  // By day: yesterday's new 23.00, today's churn −15.00 (the pause); by month: the net.
  const daily = section('mrr-movements-daily');
  expect(daily).toMatch(new RegExp(`<td>${today}</td><td>—</td><td>—</td><td>—</td><td>−15.00 USD</td><td>—</td><td>8.00 USD</td>`));
  expect(daily).toMatch(new RegExp(`<td>${yesterday}</td><td>23.00 USD</td><td>—</td><td>—</td><td>—</td><td>—</td><td>23.00 USD</td>`));
  expect(section('mrr-movements')).toContain(`<td>${today.slice(0, 7)}</td>`);
});

/** Each subscription's recorded movements add up to what it bills now (analytics.subscription_mrr). */
async function unrecorded(communityId: string): Promise<Json[]> {
  const { rows } = await app.owner.query(`
    select s.subscription_id, s.currency, case when s.billing_now then s.monthly_cents else 0 end::float8 as now_cents,
      coalesce(r.cents, 0)::float8 as recorded_cents, s.billing_now, coalesce(r.n, 0)::int as recorded_billing
    from analytics.subscription_mrr s
    left join (select subscription_id, currency, sum(to_cents - from_cents) as cents, sum(to_billing::int - from_billing::int) as n
               from billing.mrr_movements where community_id = $1 group by 1, 2) r
      on r.subscription_id = s.subscription_id and r.currency = s.currency
    where s.community_id = $1
      and (case when s.billing_now then s.monthly_cents else 0 end is distinct from coalesce(r.cents, 0)
        or s.billing_now::int <> coalesce(r.n, 0))`, [communityId]);
  return rows;
}

test('concurrent changes of the same subscriptions record movements that add up to what each bills', async () => {
  const shop = await createShop(app);
  const subs: string[] = [];
  for (let i = 0; i < 4; i++) subs.push((await subscribe(app, shop, i % 2 ? 'gold' : 'silver', i % 2 ? 'gold-monthly' : 'silver-monthly')).subscriptionId);
  const actions = ['pause', 'resume', 'cancel', 'reactivate', 'switch'];
  await Promise.all(Array.from({ length: 8 }, (_, k) => (async () => {
    for (let round = 0; round < 5; round++) {
      const id = subs[(k + round) % subs.length];
      const action = actions[(k * 3 + round) % actions.length];
      await call(app.url, 'POST', `/v1/subscriptions/${id}/${action}`, { key: shop.key,
        body: action === 'switch' ? { plan_id: shop.ids.plans['platinum-monthly'] } : {} });
    }
  })()));
  await advance(app, shop, 35);
  expect(await unrecorded(shop.communityId)).toEqual([]);
  const before = (await app.owner.query('select count(*)::int as n from billing.mrr_movements where community_id = $1', [shop.communityId])).rows[0].n;
  expect(before).toBeGreaterThan(4);
  // A rebuild keeps the history and finds nothing missing.
  await app.owner.query('select billing_private.analytics_rebuild($1)', [shop.communityId]);
  expect((await app.owner.query('select count(*)::int as n from billing.mrr_movements where community_id = $1', [shop.communityId])).rows[0].n).toBe(before);
}, 120_000);

test('a community written before the movements existed is seeded from its subscriptions\' own dates', async () => {
  const shop = await createShop(app);
  const a = await subscribe(app, shop, 'gold', 'gold-monthly');
  const b = await subscribe(app, shop, 'silver', 'silver-monthly');
  await advance(app, shop, 3);
  expect((await call(app.url, 'POST', `/v1/subscriptions/${b.subscriptionId}/cancel`, { key: shop.key, body: { at: 'now' } })).status).toBe(202);
  await advance(app, shop, 2);
  const dayOfClock = async (offsetDays: number) => (await app.owner.query<{ d: string }>(
    `select to_char(billing.community_now($1) - make_interval(days => $2), 'YYYY-MM-DD') as d`, [shop.communityId, offsetDays])).rows[0].d;
  // As before this migration: no movements (the triggers' work undone), then the migration's rebuild.
  await app.owner.query('delete from billing.mrr_movements where community_id = $1', [shop.communityId]);
  await app.owner.query('select billing_private.analytics_rebuild($1)', [shop.communityId]);
  const { rows } = await app.owner.query(`select subscription_id, kind, day::text, (to_cents - from_cents)::int as delta
    from billing.mrr_movements where community_id = $1 order by day, subscription_id`, [shop.communityId]);
  expect(rows).toEqual(expect.arrayContaining([
    { subscription_id: a.subscriptionId, kind: 'new', day: await dayOfClock(5), delta: 1500 },
    { subscription_id: b.subscriptionId, kind: 'new', day: await dayOfClock(5), delta: 800 },
    { subscription_id: b.subscriptionId, kind: 'churn', day: await dayOfClock(2), delta: -800 },
  ]));
  expect(rows).toHaveLength(3);
  expect(await unrecorded(shop.communityId)).toEqual([]);
  // Changed while the triggers were off: the rebuild records the difference now.
  await app.owner.query('alter table billing.subscriptions disable trigger _600_analytics_update');
  try {
    await app.owner.query(`update billing.subscriptions set status = 'paused', updated_at = now() where community_id = $1 and id = $2`,
      [shop.communityId, a.subscriptionId]);
  } finally {
    await app.owner.query('alter table billing.subscriptions enable trigger _600_analytics_update');
  }
  await app.owner.query('select billing_private.analytics_rebuild($1)', [shop.communityId]);
  const { rows: last } = await app.owner.query(`select kind, day::text, (to_cents - from_cents)::int as delta from billing.mrr_movements
    where community_id = $1 and subscription_id = $2 order by occurred_at desc limit 1`, [shop.communityId, a.subscriptionId]);
  expect(last).toEqual([{ kind: 'churn', day: await dayOfClock(0), delta: -1500 }]);
  expect(await unrecorded(shop.communityId)).toEqual([]);
});

test('every subscriptions column the MRR definition reads wakes the update trigger that records movements', async () => {
  // The columns of billing.subscriptions that analytics.subscription_mrr (the one
  // definition of a subscription's MRR) depends on, by the catalog's own record.
  const { rows } = await app.owner.query<{ col: string }>(`
    select distinct a.attname::text as col
    from pg_depend d
    join pg_rewrite r on r.oid = d.objid
    join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
    where r.ev_class = 'analytics.subscription_mrr'::regclass and d.refobjid = 'billing.subscriptions'::regclass
      and d.refobjsubid > 0 order by 1`);
  const cols = rows.map((r) => r.col).filter((c) => c !== 'id' && c !== 'community_id'); // a row's key never changes
  expect(cols).toEqual(expect.arrayContaining(['status', 'plan_id', 'discount_id']));
  const { rows: [{ src }] } = await app.owner.query<{ src: string }>(
    `select prosrc as src from pg_proc where oid = 'billing_private.tg_subscriptions__analytics_update'::regproc`);
  expect(cols.filter((c) => !new RegExp(`\\bn\\.${c}\\b`).test(src))).toEqual([]);
});

test('a community with recorded MRR can be deleted whole', async () => {
  const shop = await createShop(app);
  await subscribe(app, shop, 'gold', 'gold-monthly');
  expect((await app.owner.query('select count(*)::int as n from billing.mrr_movements where community_id = $1', [shop.communityId])).rows[0].n).toBe(1);
  await app.owner.query('delete from billing.communities where id = $1', [shop.communityId]);
  expect((await app.owner.query('select count(*)::int as n from billing.mrr_movements where community_id = $1', [shop.communityId])).rows[0].n).toBe(0);
});
