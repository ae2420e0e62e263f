// Reports (/dashboard/reports; issue 31 item 5, docs/decisions/reports.md): revenue per
// day and month, retention by monthly cohort, churn, ARPU and lifetime value, trial
// conversion and failed-payment recovery. Each section is a chart (ECharts, drawn on the
// server as the overview's are), the table of its figures under it, and a link to the
// same rows as CSV. The figures are the API's reports (GET /v1/analytics/...), run as
// the signed-in operator; nothing is computed here but how they are shown.
import type { Request, Response, Router } from 'express';
import { minorDigits } from '../../core/money';
import { sendDocument } from '../../web/express-io';
import { Html, html, lineChart, money } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { Json, problemPage, send, table } from '../dashboard-layout';

/** The CSV twin of each report the page shows (GET /dashboard/reports/<file>.csv). */
const CSV: Record<string, { op: string; query?: Record<string, string> }> = {
  'revenue-day': { op: 'get_revenue_report_csv', query: { granularity: 'day' } },
  'revenue-month': { op: 'get_revenue_report_csv', query: { granularity: 'month' } },
  cohorts: { op: 'get_cohorts_report_csv' },
  churn: { op: 'get_churn_report_csv' },
  'member-value': { op: 'get_member_value_report_csv' },
  'trial-conversion': { op: 'get_trial_conversion_report_csv' },
  'payment-recovery': { op: 'get_payment_recovery_report_csv' },
};

const pct = (rate: number | null | undefined) => (rate === null || rate === undefined ? '—' : `${(rate * 100).toFixed(1)}%`);
const monthLabel = (m: string) => String(m).slice(0, 7);

function csvLink(file: string, label: string): Html {
  return html`<p><a href="/dashboard/reports/${file}.csv" download>Download ${label} as CSV</a></p>`;
}

/** The currency the money charts show: the one with the most net revenue in the rows (tables show every currency). */
function mainCurrency(rows: Json[]): string | null {
  const by = new Map<string, number>();
  for (const r of rows) by.set(r.currency, (by.get(r.currency) ?? 0) + Number(r.net_cents));
  return [...by].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]?.[0] ?? null;
}

function moneyChart(title: string, rows: Json[], field: string, label: (r: Json) => string): Html {
  const c = mainCurrency(rows);
  const of = rows.filter((r) => r.currency === c);
  return lineChart(`${title}${c ? ` (${c.toUpperCase()})` : ''}`, of.map((r) => ({ label: label(r), value: Number(r[field] ?? 0) })),
    (v) => money(v, c), (v) => String(Math.round(v / 10 ** minorDigits(c))));
}

function rateChart(title: string, rows: Json[], field: string): Html {
  return lineChart(title, rows.filter((r) => r[field] !== null).map((r) => ({ label: monthLabel(r.month), value: Math.round(Number(r[field]) * 1000) / 10 })),
    (v) => `${v}%`, (v) => `${v}%`);
}

function revenueSection(id: string, heading: string, file: string, rows: Json[], label: (p: string) => string): Html {
  return html`<section aria-labelledby="${id}"><h2 id="${id}">${heading}</h2>
<div class="charts report">${moneyChart(`Net revenue, ${heading.toLowerCase()}`, rows, 'net_cents', (r) => label(r.period))}</div>
${table(['Period', 'Currency', 'Gross', 'Refunds', 'Net', 'Paid invoices', 'Refunds (count)'], rows.slice().reverse().map((r) => [
    html`${label(r.period)}`, html`${String(r.currency).toUpperCase()}`, html`${money(r.gross_cents, r.currency)}`,
    html`${money(r.refunds_cents, r.currency)}`, html`${money(r.net_cents, r.currency)}`, html`${r.paid_invoices}`, html`${r.refunds}`]), 'No revenue in this period.')}
${csvLink(file, heading.toLowerCase())}</section>`;
}

function cohortSection(rows: Json[]): Html {
  const cohorts = [...new Set(rows.map((r) => r.cohort as string))];
  const width = Math.max(0, ...rows.map((r) => Number(r.month_offset))) + 1;
  const firsts = rows.filter((r) => r.month_offset === 0);
  return html`<section aria-labelledby="cohorts"><h2 id="cohorts">Retention by monthly cohort</h2>
<div class="charts report">${lineChart('New paying members per cohort', firsts.map((r) => ({ label: monthLabel(r.cohort), value: Number(r.members) })), String)}</div>
${table(['Cohort', 'Members', ...Array.from({ length: width }, (_, k) => `Month ${k}`)], cohorts.slice().reverse().map((c) => {
    const of = rows.filter((r) => r.cohort === c);
    return [html`${monthLabel(c)}`, html`${of[0].members}`, ...Array.from({ length: width }, (_, k) => {
      const r = of.find((x) => Number(x.month_offset) === k);
      return r ? html`${pct(r.retention_rate)} (${r.retained})` : html``;
    })];
  }), 'No paying members yet.')}
${csvLink('cohorts', 'cohort retention')}</section>`;
}

export function mountReports(router: Router, ctx: DashboardContext): void {
  const { read, run } = ctx;
  router.get('/reports', async (req, res) => {
    const [daily, monthly, cohorts, churn, value, trials, recovery] = await readAll(req, res, [
      ['get_revenue_report', { granularity: 'day' }], ['get_revenue_report', { granularity: 'month' }],
      ['get_cohorts_report', {}], ['get_churn_report', {}], ['get_member_value_report', {}],
      ['get_trial_conversion_report', {}], ['get_payment_recovery_report', {}]]) ?? [];
    if (!recovery) return;
    send(req, res, 'Reports', '/dashboard/reports', html`<p>Figures net of tax, by UTC day and month of the community's clock
(the API's GET /v1/analytics/... reports; each table downloads as CSV). Months: the 12 to this one.</p>
${revenueSection('revenue-day', 'Revenue by day, last 30 days', 'revenue-day', daily.data, (p) => p)}
${revenueSection('revenue-month', 'Revenue by month', 'revenue-month', monthly.data, monthLabel)}
${cohortSection(cohorts.data)}
<section aria-labelledby="churn"><h2 id="churn">Member churn by month</h2>
<div class="charts report">${rateChart('Churn rate by month', churn.data, 'churn_rate')}</div>
${table(['Month', 'Paying at start', 'Churned', 'Paying at end', 'Churn rate'], (churn.data as Json[]).slice().reverse().map((r) => [
    html`${monthLabel(r.month)}`, html`${r.paying_at_start}`, html`${r.churned}`, html`${r.paying_at_end}`, html`${pct(r.churn_rate)}`]), 'No months yet.')}
${csvLink('churn', 'churn')}</section>
<section aria-labelledby="member-value"><h2 id="member-value">Average revenue per member and lifetime value</h2>
<div class="charts report">${moneyChart('ARPU by month', value.data, 'arpu_cents', (r) => monthLabel(r.month))}</div>
${table(['Month', 'Currency', 'Net revenue', 'Paying members', 'ARPU', 'Churn rate', 'LTV'], (value.data as Json[]).slice().reverse().map((r) => [
    html`${monthLabel(r.month)}`, html`${String(r.currency).toUpperCase()}`, html`${money(r.net_cents, r.currency)}`, html`${r.paying_members}`,
    html`${money(r.arpu_cents, r.currency)}`, html`${pct(r.churn_rate)}`, html`${money(r.ltv_cents, r.currency)}`]), 'No revenue yet.')}
${csvLink('member-value', 'ARPU and LTV')}</section>
<section aria-labelledby="trial-conversion"><h2 id="trial-conversion">Trial conversion</h2>
<div class="charts report">${rateChart('Trial conversion rate by month the trials ended', trials.data, 'conversion_rate')}</div>
${table(['Month', 'Trials ended', 'Converted', 'Conversion rate'], (trials.data as Json[]).slice().reverse().map((r) => [
    html`${monthLabel(r.month)}`, html`${r.trials_ended}`, html`${r.converted}`, html`${pct(r.conversion_rate)}`]), 'No trial ended in these months.')}
${csvLink('trial-conversion', 'trial conversion')}</section>
<section aria-labelledby="payment-recovery"><h2 id="payment-recovery">Failed-payment recovery</h2>
<div class="charts report">${rateChart('Recovery rate by month of the first failure', recovery.data, 'recovery_rate')}</div>
${table(['Month', 'Currency', 'Failed invoices', 'Recovered', 'Lost', 'Pending', 'Recovered amount', 'Recovery rate'], (recovery.data as Json[]).slice().reverse().map((r) => [
    html`${monthLabel(r.month)}`, html`${String(r.currency).toUpperCase()}`, html`${r.failed_invoices}`, html`${r.recovered}`, html`${r.lost}`,
    html`${r.pending}`, html`${money(r.recovered_cents, r.currency)}`, html`${pct(r.recovery_rate)}`]), 'No failed payment in these months.')}
${csvLink('payment-recovery', 'payment recovery')}</section>`);
  });

  // Each table's rows as CSV, as GET /v1/analytics/<report>.csv answers them.
  router.get('/reports/:file', async (req, res) => {
    const file = String(req.params.file);
    const csv = file.endsWith('.csv') ? CSV[file.slice(0, -'.csv'.length)] : undefined;
    if (!csv) return void res.status(404).type('text').send('No such report.');
    const out = await run(req, csv.op, { query: csv.query ?? {} });
    if (out.problem || !out.document) return problemPage(req, res, out, '/dashboard/reports');
    sendDocument(res, out.document);
  });

  async function readAll(req: Request, res: Response, reads: [string, Record<string, string>][]): Promise<Json[] | null> {
    const out: Json[] = [];
    for (const [name, query] of reads) {
      const body = await read(req, res, name, { query });
      if (!body) return null;
      out.push(body);
    }
    return out;
  }
}
