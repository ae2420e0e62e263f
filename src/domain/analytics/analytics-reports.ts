// The reports operators ask for (issue 31 item 5; docs/decisions/reports.md): revenue
// per day or month, retention by monthly cohort, churn, ARPU and lifetime value, trial
// conversion and failed-payment recovery. Each figure is defined once, in SQL
// (db/migrations/fixtures/functions/48-reports.sql); each report is a JSON operation
// (GET /v1/analytics/<report>) and its CSV twin (GET /v1/analytics/<report>.csv), which
// runs the same SQL and renders its rows, columns in the row schema's order.
import { z } from 'zod';
import { defineOperation, DocumentRenderer, Operation, RenderedDocument } from '../operation';

const isoDay = z.string().regex(/^\d{4}-\d{2}-\d{2}$/)
  .refine((s) => { const d = new Date(`${s}T00:00:00Z`); return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s; },
    { error: 'must be a date, YYYY-MM-DD' });
const period = {
  from: isoDay.optional().describe('First day of the range (UTC, YYYY-MM-DD); for monthly reports, its month. Default: 30 days, or 12 months, before `to`.'),
  to: isoDay.optional().describe('Last day of the range (UTC, YYYY-MM-DD); for monthly reports, its month. Default: today by the community\'s clock.'),
};
const month = z.string().describe('First day of the month (UTC, YYYY-MM-DD)');
const rate = z.number().nullable();
const count = z.number().int();
const cents = z.number().int();

export const revenueRow = z.object({
  period: z.string().describe('The day, or the first day of the month (UTC, YYYY-MM-DD)'),
  currency: z.string(),
  gross_cents: cents.describe('Paid invoices, less their tax'),
  refunds_cents: cents.describe('Credit notes (refunds), less the tax they credit'),
  net_cents: cents.describe('gross_cents - refunds_cents'),
  paid_invoices: count,
  refunds: count,
});
export const cohortRow = z.object({
  cohort: month.describe('The cohort: members whose first subscription started billing in this month'),
  month,
  month_offset: count.describe('0 for the cohort\'s own month'),
  members: count.describe('Members of the cohort'),
  retained: count.describe('Of them, paying at the month\'s end (today for the current month)'),
  churned: count.describe('members - retained'),
  retention_rate: rate.describe('retained / members, 4 decimals'),
});
export const churnRow = z.object({
  month,
  paying_at_start: count.describe('Members with a subscription billing at the month\'s start'),
  churned: count.describe('Of them, not paying at the month\'s end (today for the current month)'),
  paying_at_end: count,
  churn_rate: rate.describe('churned / paying_at_start, 4 decimals; null when none paid at the start'),
});
export const memberValueRow = z.object({
  month,
  currency: z.string(),
  net_cents: cents.describe('Net revenue of the month (as the revenue report)'),
  paying_members: count.describe('Members who paid an invoice in the month, in this currency'),
  arpu_cents: cents.nullable().describe('Average revenue per member: net_cents / paying_members'),
  churn_rate: rate.describe('The month\'s member churn (as the churn report)'),
  ltv_cents: cents.nullable().describe('Lifetime value: ARPU / churn rate; null when no member churned'),
});
export const trialConversionRow = z.object({
  month: month.describe('Month the trials ended'),
  trials_ended: count,
  converted: count.describe('Of them, with an invoice of more than 0 paid at or after the trial\'s end'),
  conversion_rate: rate.describe('converted / trials_ended, 4 decimals'),
});
export const paymentRecoveryRow = z.object({
  month: month.describe('Month of the invoice\'s first failed payment'),
  currency: z.string(),
  failed_invoices: count.describe('Invoices with a failed payment attempt'),
  recovered: count.describe('Of them, paid since (a dunning retry or the member\'s own payment)'),
  lost: count.describe('Uncollectible or void: the dunning gave up'),
  pending: count.describe('Still open, retries ahead'),
  recovered_cents: cents,
  recovery_rate: rate.describe('recovered / failed_invoices, 4 decimals'),
});

interface Report {
  name: string;
  slug: string;
  summary: string;
  sql: string;
  row: z.ZodObject;
  query: z.ZodObject;
  filename: (answer: ReportAnswer) => string;
}
interface ReportAnswer { from: string; to: string; granularity?: string; data: Record<string, unknown>[] }

const monthlyQuery = z.object(period);
const range = (slug: string) => (a: ReportAnswer) => `${slug}-${a.from}-${a.to}.csv`;

export const REPORTS: readonly Report[] = [
  { name: 'revenue', slug: 'revenue', sql: 'analytics_revenue', row: revenueRow,
    summary: 'Revenue per day or month: gross, refunds and net, net of tax',
    query: z.object({ granularity: z.enum(['day', 'month']).default('day').describe('day (at most 366 days) or month'), ...period }),
    filename: (a) => `revenue-${a.granularity}-${a.from}-${a.to}.csv` },
  { name: 'cohorts', slug: 'cohorts', sql: 'analytics_cohorts', row: cohortRow, query: monthlyQuery, filename: range('cohorts'),
    summary: 'Retention by monthly cohort (the cohorts of the months asked, each with every month since)' },
  { name: 'churn', slug: 'churn', sql: 'analytics_churn', row: churnRow, query: monthlyQuery, filename: range('churn'),
    summary: 'Member churn per month' },
  { name: 'member_value', slug: 'member-value', sql: 'analytics_member_value', row: memberValueRow, query: monthlyQuery,
    filename: range('member-value'), summary: 'Average revenue per member and lifetime value per month' },
  { name: 'trial_conversion', slug: 'trial-conversion', sql: 'analytics_trial_conversion', row: trialConversionRow,
    query: monthlyQuery, filename: range('trial-conversion'), summary: 'Trial conversion per month the trials ended' },
  { name: 'payment_recovery', slug: 'payment-recovery', sql: 'analytics_payment_recovery', row: paymentRecoveryRow,
    query: monthlyQuery, filename: range('payment-recovery'), summary: 'Failed-payment recovery per month of the first failure' },
];

/**
 * One CSV cell (RFC 4180): quoted when it holds a comma, quote or line break. A text
 * cell a spreadsheet would run as a formula (starting with =, +, -, @, tab or CR) is
 * prefixed with ' (OWASP's CSV injection advice); numbers are written as numbers.
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  let s = typeof value === 'string' ? value : JSON.stringify(value);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvOf(columns: readonly string[], rows: readonly Record<string, unknown>[]): string {
  return [columns, ...rows.map((r) => columns.map((c) => r[c]))].map((cells) => cells.map(csvCell).join(',')).join('\r\n') + '\r\n';
}

function csvRenderer(report: Report): DocumentRenderer {
  const columns = Object.keys(report.row.shape);
  return {
    mediaType: 'text/csv',
    description: `The report as CSV (RFC 4180, UTF-8, CRLF), saved as an attachment: a header row, then one line per row of the JSON answer's data, columns ${columns.join(', ')}.`,
    async render(data: unknown): Promise<RenderedDocument> {
      const answer = data as ReportAnswer;
      return { mediaType: 'text/csv', filename: report.filename(answer), bytes: Buffer.from(csvOf(columns, answer.data), 'utf8') };
    },
  };
}

export const reportOperations: Operation[] = REPORTS.flatMap((r) => [
  defineOperation({
    name: `get_${r.name}_report`,
    method: 'GET',
    path: `/v1/analytics/${r.slug}`,
    scope: 'analytics:read',
    tag: 'Analytics',
    summary: r.summary,
    description: 'Defined once in SQL (the analytics schema\'s views, which GraphQL and operator SQL logins read too); '
      + 'days and months are UTC dates of the community\'s clock. The same rows as CSV: add .csv to the path.',
    query: r.query,
    response: z.object({
      ...(r.name === 'revenue' ? { granularity: z.enum(['day', 'month']) } : {}),
      from: z.string().describe('The range\'s first day (month reports: its first month)'),
      to: z.string(),
      data: z.array(r.row),
    }),
    sql: r.sql,
  }),
  defineOperation({
    name: `get_${r.name}_report_csv`,
    method: 'GET',
    path: `/v1/analytics/${r.slug}.csv`,
    scope: 'analytics:read',
    tag: 'Analytics',
    summary: `${r.summary} (CSV)`,
    query: r.query,
    document: csvRenderer(r),
    sql: r.sql,
  }),
]);
