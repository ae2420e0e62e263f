// The reports operators ask for (issue 31 item 5; docs/decisions/reports.md), each
// defined once in SQL (functions/48-reports.sql), against an independent recomputation.
// A community lives four months on the sandbox's test clock, one day at a time:
// checkouts, trials that convert, one cancelled in its trial, one whose first charge
// fails and is paid on a retry, renewals, a renewal that fails and is recovered, one
// that fails until the dunning gives up, refunds (partial, and full with access ended),
// a cancel at period end; VAT inside every price. The model below never reads the analytics views or the MRR
// movements: who pays is what it saw of each subscription's status at the end of each
// day (active, past_due, cancelling bill), money is the raw invoices, credit notes and
// payment attempts. Every figure of every report must equal the model's, through the
// analytics views as the API role and an operator's SQL login (another community's
// activity on the same days never counts), and through GET /v1/analytics/...
import pg from 'pg';
import { call, startApp, TEST_DB, TestApp } from '../support/app';
import { cli } from '../support/cli';
import { advance, createShop, externalSubject, Shop, subscribe } from '../support/shop';
import { asTenant } from '../support/tenant';

let app: TestApp;
let shop: Shop;
let other: Shop;
let login: pg.Pool;

type Row = Record<string, unknown>;
const BILLING = new Set(['active', 'past_due', 'cancelling']);
const START = '2027-01-05T12:00:00.000Z';
const DAYS = 106; // to 2027-04-21
const dayOf = (k: number) => new Date(Date.parse(START) + k * 86_400_000).toISOString().slice(0, 10);
const monthOf = (day: string) => `${day.slice(0, 7)}-01`;
const prevDay = (day: string) => new Date(Date.parse(day) - 86_400_000).toISOString().slice(0, 10);
const lastDayOf = (month: string) => { const d = new Date(`${month}T00:00:00Z`); d.setUTCMonth(d.getUTCMonth() + 1); d.setUTCDate(0); return d.toISOString().slice(0, 10); };
const r4 = (x: number) => Math.round(x * 10_000) / 10_000;
const utcDay = (ts: Date) => ts.toISOString().slice(0, 10);

/** What the model saw: per day, the members with a subscription billing at its end. */
const paying = new Map<string, Set<string>>();

async function setClock(s: Shop, iso: string) {
  await app.owner.query('update billing.communities set clock_offset = $2::timestamptz - now() where id = $1', [s.communityId, iso]);
}
function card(s: Shop, subscriptionId: string, declines: boolean) {
  return asTenant(app.owner, s.communityId, (c) => c.query('select billing.sandbox_set_card($1, $2)', [subscriptionId, declines]), { commit: true });
}
async function firstInvoice(s: Shop, subscriptionId: string) {
  const { rows } = await app.owner.query<{ id: string }>(
    `select id from billing.invoices where community_id = $1 and subscription_id = $2 and status = 'paid' and amount_paid_cents > 0 order by id limit 1`,
    [s.communityId, subscriptionId]);
  return rows[0].id;
}
async function refund(s: Shop, invoiceId: string, body: Row) {
  const r = await call(app.url, 'POST', `/v1/invoices/${invoiceId}/refunds`, { key: s.key, body });
  expect(r.status).toBe(200);
}
async function cancel(s: Shop, subscriptionId: string, body: Row = {}) {
  const r = await call(app.url, 'POST', `/v1/subscriptions/${subscriptionId}/cancel`, { key: s.key, body });
  expect(r.status).toBeLessThan(300);
}
async function observe(day: string) {
  const { rows } = await app.owner.query<{ member_id: string; status: string }>(
    'select member_id, status from billing.subscriptions where community_id = $1', [shop.communityId]);
  paying.set(day, new Set(rows.filter((r) => BILLING.has(r.status)).map((r) => r.member_id)));
}

/** The script: what happens on day k (after the clock reached it). */
async function actions(k: number, subs: Record<string, string>) {
  const sub = async (name: string, tier: string, plan: string) => { subs[name] = (await subscribe(app, shop, tier, plan, externalSubject())).subscriptionId; };
  switch (dayOf(k)) {
    case '2027-01-05':
      await sub('a', 'gold', 'gold-monthly');
      await sub('b', 'silver', 'silver-monthly');
      await sub('t1', 'gold', 'gold-annual');   // a 7-day trial, paid at its end
      await sub('t2', 'gold', 'gold-annual');   // cancelled in its trial
      await sub('t3', 'gold', 'gold-annual');   // its first charge fails, a retry is paid
      await card(shop, subs.t3, true);
      await subscribe(app, other, 'platinum', 'platinum-monthly');
      break;
    case '2027-01-07': await cancel(shop, subs.t2, { at: 'now' }); break;
    case '2027-01-08':
      await refund(shop, await firstInvoice(shop, subs.a), { amount_cents: 500 });
      await refund(other, (await app.owner.query<{ id: string }>(
        `select id from billing.invoices where community_id = $1 and status = 'paid' and amount_paid_cents > 0 limit 1`, [other.communityId])).rows[0].id, {});
      break;
    case '2027-01-13': await card(shop, subs.t3, false); break;
    case '2027-01-20': await card(shop, subs.b, true); break;
    case '2027-02-07': await card(shop, subs.b, false); break;
    case '2027-02-10': await sub('c', 'platinum', 'platinum-monthly'); break;
    case '2027-02-20': await card(shop, subs.c, true); break;
    case '2027-03-10': await cancel(shop, subs.a); break; // its period ends on 5 April
    case '2027-03-15': await sub('d', 'silver', 'silver-monthly'); break;
    case '2027-03-16': await refund(shop, await firstInvoice(shop, subs.d), { revoke_access: true }); break;
    case '2027-03-20': await subscribe(app, other, 'gold', 'gold-monthly'); break;
    default:
  }
}

beforeAll(async () => {
  app = await startApp();
  // Irish VAT inside every price (the seller's country decides): revenue is net of it.
  shop = await createShop(app, { type: 'sandbox' }, {
    seller: { legal_name: 'Reports Ltd', address_lines: ['1 Harbour Street', 'Dublin'], country: 'IE', tax_id: 'IE1234567T' },
    tax_rates: [{ country: 'IE', name: 'VAT', rate_ppm: 230000, inclusive: true }] });
  other = await createShop(app);
  await setClock(shop, START);
  await setClock(other, START);
  const subs: Record<string, string> = {};
  for (let k = 0; k < DAYS; k++) {
    if (k > 0) { await advance(app, shop, 1); await advance(app, other, 1); }
    await actions(k, subs);
    await observe(dayOf(k));
  }
  process.env.DATABASE_URL = TEST_DB();
  const granted = await cli('sql-access', 'grant', '--community', shop.communityId, '--json');
  expect(granted.code).toBe(0);
  login = new pg.Pool({ connectionString: (JSON.parse(granted.out) as { connection_string: string }).connection_string, max: 1 });
}, 240_000);
afterAll(async () => {
  await login?.end();
  await cli('sql-access', 'revoke', '--community', shop.communityId, '--json');
  await app.close();
});

// ---- the model -----------------------------------------------------------------------

const TODAY = dayOf(DAYS - 1);
const MONTHS = ['2027-01-01', '2027-02-01', '2027-03-01', '2027-04-01'];
const isPaying = (member: string, day: string) => paying.get(day)?.has(member) ?? false;
const endOf = (month: string) => (lastDayOf(month) < TODAY ? lastDayOf(month) : TODAY);

async function raw() {
  const q = async <T extends Row>(sql: string) => (await app.owner.query<T>(sql, [shop.communityId])).rows;
  return {
    invoices: await q<{ id: string; member_id: string; subscription_id: string | null; status: string; currency: string; amount_paid_cents: string; tax_cents: string; paid_at: Date | null }>(
      'select id, member_id, subscription_id, status, currency, amount_paid_cents, tax_cents, paid_at from billing.invoices where community_id = $1'),
    creditNotes: await q<{ currency: string; amount_cents: string; tax_cents: string; created_at: Date }>(
      'select currency, amount_cents, tax_cents, created_at from billing.credit_notes where community_id = $1'),
    attempts: await q<{ invoice_id: string; status: string; attempted_at: Date }>(
      'select invoice_id, status, attempted_at from billing.payment_attempts where community_id = $1'),
    trials: await q<{ id: string; trial_end: Date }>(
      'select id, trial_end from billing.subscriptions where community_id = $1 and trial_end is not null'),
  };
}

function revenue(data: Awaited<ReturnType<typeof raw>>, bucket: (day: string) => string) {
  const out = new Map<string, { gross_cents: number; refunds_cents: number; net_cents: number; paid_invoices: number; refunds: number }>();
  const at = (period: string, currency: string) => {
    const key = `${period}|${currency}`;
    if (!out.has(key)) out.set(key, { gross_cents: 0, refunds_cents: 0, net_cents: 0, paid_invoices: 0, refunds: 0 });
    return out.get(key)!;
  };
  for (const i of data.invoices.filter((x) => x.status === 'paid' && Number(x.amount_paid_cents) > 0)) {
    const r = at(bucket(utcDay(i.paid_at!)), i.currency);
    r.gross_cents += Number(i.amount_paid_cents) - Number(i.tax_cents);
    r.paid_invoices += 1;
  }
  for (const n of data.creditNotes) {
    const r = at(bucket(utcDay(n.created_at)), n.currency);
    r.refunds_cents += Number(n.amount_cents) - Number(n.tax_cents);
    r.refunds += 1;
  }
  for (const r of out.values()) r.net_cents = r.gross_cents - r.refunds_cents;
  return out;
}

function members() { return new Set([...paying.values()].flatMap((s) => [...s])); }

function churn(month: string) {
  const all = [...members()];
  const start = all.filter((m) => isPaying(m, prevDay(month)));
  const churned = start.filter((m) => !isPaying(m, endOf(month)));
  return { month, paying_at_start: start.length, churned: churned.length, paying_at_end: all.filter((m) => isPaying(m, endOf(month))).length,
    churn_rate: start.length ? r4(churned.length / start.length) : null, exact: start.length ? churned.length / start.length : null };
}

function cohorts() {
  const first = new Map<string, string>();
  for (const day of [...paying.keys()].sort()) for (const m of paying.get(day)!) if (!first.has(m)) first.set(m, day);
  const rows: Row[] = [];
  for (const cohort of MONTHS) {
    const of = [...first].filter(([, d]) => monthOf(d) === cohort).map(([m]) => m);
    if (!of.length) continue;
    for (const month of MONTHS.filter((m) => m >= cohort)) {
      const retained = of.filter((m) => isPaying(m, endOf(month))).length;
      rows.push({ cohort_month: cohort, month, month_offset: MONTHS.indexOf(month) - MONTHS.indexOf(cohort), members: of.length,
        retained, churned: of.length - retained, retention_rate: r4(retained / of.length) });
    }
  }
  return rows;
}

function memberValue(data: Awaited<ReturnType<typeof raw>>) {
  const rows: Row[] = [];
  for (const [key, r] of revenue(data, monthOf)) {
    const [month, currency] = key.split('|');
    const payers = new Set(data.invoices.filter((i) => i.status === 'paid' && Number(i.amount_paid_cents) > 0 && i.currency === currency
      && monthOf(utcDay(i.paid_at!)) === month).map((i) => i.member_id)).size;
    const c = churn(month);
    const arpu = payers ? r.net_cents / payers : null;
    rows.push({ month, currency, net_cents: r.net_cents, paying_members: payers, arpu_cents: arpu === null ? null : Math.round(arpu),
      churn_rate: c.churn_rate, ltv_cents: arpu !== null && c.exact ? Math.round(arpu / c.exact) : null });
  }
  return rows;
}

function trialConversion(data: Awaited<ReturnType<typeof raw>>) {
  const now = Date.parse(`${TODAY}T12:00:00Z`);
  const by = new Map<string, { trials_ended: number; converted: number }>();
  for (const t of data.trials.filter((x) => x.trial_end.getTime() <= now)) {
    const month = monthOf(utcDay(t.trial_end));
    const converted = data.invoices.some((i) => i.subscription_id === t.id && i.status === 'paid' && Number(i.amount_paid_cents) > 0
      && i.paid_at!.getTime() >= t.trial_end.getTime());
    const r = by.get(month) ?? { trials_ended: 0, converted: 0 };
    r.trials_ended += 1;
    r.converted += converted ? 1 : 0;
    by.set(month, r);
  }
  return [...by].map(([month, r]) => ({ month, ...r, conversion_rate: r4(r.converted / r.trials_ended) }));
}

function recovery(data: Awaited<ReturnType<typeof raw>>) {
  const by = new Map<string, { failed_invoices: number; recovered: number; lost: number; pending: number; recovered_cents: number }>();
  for (const i of data.invoices) {
    const failures = data.attempts.filter((a) => a.invoice_id === i.id && a.status === 'failed').map((a) => a.attempted_at.getTime());
    if (!failures.length) continue;
    const key = `${monthOf(utcDay(new Date(Math.min(...failures))))}|${i.currency}`;
    const r = by.get(key) ?? { failed_invoices: 0, recovered: 0, lost: 0, pending: 0, recovered_cents: 0 };
    r.failed_invoices += 1;
    if (i.status === 'paid') { r.recovered += 1; r.recovered_cents += Number(i.amount_paid_cents); }
    if (i.status === 'uncollectible' || i.status === 'void') r.lost += 1;
    if (i.status === 'open' || i.status === 'draft') r.pending += 1;
    by.set(key, r);
  }
  return [...by].map(([key, r]) => ({ month: key.split('|')[0], currency: key.split('|')[1], ...r,
    recovery_rate: r4(r.recovered / r.failed_invoices) }));
}

// ---- reading the SQL -------------------------------------------------------------------

/** A view's rows as JSON values (dates as YYYY-MM-DD, bigints and rates as numbers). */
async function view(reader: 'api' | 'operator', sql: string): Promise<Row[]> {
  const wrapped = `select to_jsonb(v) as j from (${sql}) v`;
  const rows = reader === 'api'
    ? await asTenant(app.api, shop.communityId, async (c) => (await c.query<{ j: Row }>(wrapped)).rows)
    : (await login.query<{ j: Row }>(wrapped)).rows;
  return rows.map((r) => r.j);
}
const sortBy = (keys: string[]) => (rows: Row[]) => [...rows].sort((a, b) => keys.map((k) => String(a[k])).join('|').localeCompare(keys.map((k) => String(b[k])).join('|')));

test('the lifecycle covered every case the reports tell apart', async () => {
  const data = await raw();
  const failed = new Set(data.attempts.filter((a) => a.status === 'failed').map((a) => a.invoice_id));
  const statuses = data.invoices.filter((i) => failed.has(i.id)).map((i) => i.status).sort();
  expect(statuses).toEqual(expect.arrayContaining(['paid', 'paid', 'uncollectible'])); // t3 and b recovered, c lost
  expect(data.creditNotes).toHaveLength(2);
  expect(data.invoices.filter((i) => Number(i.tax_cents) > 0).length).toBeGreaterThan(5);
  expect(data.creditNotes.every((n) => Number(n.tax_cents) > 0)).toBe(true);
  expect(trialConversion(data)).toEqual([{ month: '2027-01-01', trials_ended: 3, converted: 2, conversion_rate: 0.6667 }]);
  // March: c lost to the dunning (d joined and left within the month: not a churn); April: a's cancel took effect.
  expect(MONTHS.map((m) => churn(m).churned)).toEqual([0, 0, 1, 1]);
  // The other community paid and refunded on the same days: rows the fence must keep out.
  const { rows } = await app.owner.query('select 1 from analytics.revenue_report_daily where community_id = $1 and refunds > 0', [other.communityId]);
  expect(rows).toHaveLength(1);
});

for (const reader of ['api', 'operator'] as const) {
  test(`revenue per day and month equals the invoices and credit notes (${reader === 'api' ? 'API role' : "operator's SQL login"})`, async () => {
    const data = await raw();
    const expected = (bucket: (d: string) => string, key: string) => [...revenue(data, bucket)].map(([k, r]) => ({ [key]: k.split('|')[0], currency: k.split('|')[1], ...r }));
    const sort = sortBy(['day', 'month', 'currency']);
    expect(sort(await view(reader, 'select day, currency, gross_cents, refunds_cents, net_cents, paid_invoices, refunds from analytics.revenue_report_daily')))
      .toEqual(sort(expected((d) => d, 'day')));
    expect(sort(await view(reader, 'select month, currency, gross_cents, refunds_cents, net_cents, paid_invoices, refunds from analytics.revenue_report_monthly')))
      .toEqual(sort(expected(monthOf, 'month')));
  });

  test(`cohorts, churn, ARPU and LTV, trials and recovery equal the recomputation (${reader === 'api' ? 'API role' : "operator's SQL login"})`, async () => {
    const data = await raw();
    const cohortCols = 'cohort_month, month, month_offset, members, retained, churned, retention_rate';
    expect(sortBy(['cohort_month', 'month'])(await view(reader, `select ${cohortCols} from analytics.cohort_retention`)))
      .toEqual(sortBy(['cohort_month', 'month'])(cohorts()));
    expect(sortBy(['month'])(await view(reader, 'select month, paying_at_start, churned, paying_at_end, churn_rate from analytics.churn_monthly')))
      .toEqual(MONTHS.map((m) => { const { exact, ...c } = churn(m); void exact; return c; }));
    expect(sortBy(['month', 'currency'])(await view(reader, 'select month, currency, net_cents, paying_members, arpu_cents, churn_rate, ltv_cents from analytics.member_value_monthly')))
      .toEqual(sortBy(['month', 'currency'])(memberValue(data)));
    expect(await view(reader, 'select month, trials_ended, converted, conversion_rate from analytics.trial_conversion_monthly'))
      .toEqual(trialConversion(data));
    expect(sortBy(['month', 'currency'])(await view(reader, 'select month, currency, failed_invoices, recovered, lost, pending, recovered_cents, recovery_rate from analytics.payment_recovery_monthly')))
      .toEqual(sortBy(['month', 'currency'])(recovery(data)));
  });
}

test('GET /v1/analytics/... answers the same figures, every period of the range filled', async () => {
  const data = await raw();
  const get = async (path: string) => { const r = await call(app.url, 'GET', path, { key: shop.key }); expect(r.status).toBe(200); return r.body; };
  const daily = await get('/v1/analytics/revenue?from=2027-01-01&to=2027-01-31');
  expect(daily).toMatchObject({ granularity: 'day', from: '2027-01-01', to: '2027-01-31' });
  expect(daily.data).toHaveLength(31); // one currency, every day
  const byDay = revenue(data, (d) => d);
  for (const row of daily.data) {
    const r = byDay.get(`${row.period}|usd`) ?? { gross_cents: 0, refunds_cents: 0, net_cents: 0, paid_invoices: 0, refunds: 0 };
    expect(row).toEqual({ period: row.period, currency: 'usd', ...r });
  }
  const monthly = await get('/v1/analytics/revenue?granularity=month&from=2027-01-01&to=2027-04-30');
  expect(monthly.data.map((r: Row) => r.period)).toEqual(MONTHS);
  expect(monthly.data.map((r: Row) => r.net_cents)).toEqual(MONTHS.map((m) => revenue(data, monthOf).get(`${m}|usd`)?.net_cents ?? 0));
  const range = 'from=2027-01-01&to=2027-04-01';
  expect((await get(`/v1/analytics/churn?${range}`)).data).toEqual(MONTHS.map((m) => { const { exact, ...c } = churn(m); void exact; return c; }));
  expect((await get(`/v1/analytics/cohorts?${range}`)).data).toEqual(cohorts().map(({ cohort_month, ...r }) => ({ cohort: cohort_month, ...r })));
  expect((await get(`/v1/analytics/member-value?${range}`)).data).toEqual(sortBy(['month', 'currency'])(memberValue(data)));
  expect((await get(`/v1/analytics/trial-conversion?${range}`)).data).toEqual(trialConversion(data));
  expect((await get(`/v1/analytics/payment-recovery?${range}`)).data).toEqual(sortBy(['month', 'currency'])(recovery(data)));
});

test('a range backwards, a daily range over 366 days or a date that does not exist is refused with the field named', async () => {
  const back = await call(app.url, 'GET', '/v1/analytics/churn?from=2027-03-01&to=2027-01-01', { key: shop.key });
  expect([back.status, back.body.param]).toEqual([422, 'from']);
  const long = await call(app.url, 'GET', '/v1/analytics/revenue?from=2025-01-01&to=2027-01-01', { key: shop.key });
  expect([long.status, long.body.param]).toEqual([422, 'from']);
  const bad = await call(app.url, 'GET', '/v1/analytics/revenue?from=2027-02-30', { key: shop.key });
  expect([bad.status, bad.body.param]).toEqual([422, 'from']);
});
