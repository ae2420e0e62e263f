// The reports (issue 31 item 5) as CSV and through GraphQL: GET /v1/analytics/<report>.csv
// holds the JSON answer's rows, a header of its fields first, as a download; a cell a
// spreadsheet would run as a formula is defused; GraphQL's views read the same figures
// with analytics:read only.
import { csvCell, csvOf, REPORTS } from '../../src/domain/analytics/analytics-reports';
import { createKey } from '../../src/domain/communities/community-admin';
import { call, startApp, TestApp } from '../support/app';
import { createShop, Shop, subscribe } from '../support/shop';

let app: TestApp;
let shop: Shop;

beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
  await subscribe(app, shop, 'gold', 'gold-monthly');
  await subscribe(app, shop, 'silver', 'silver-monthly');
});
afterAll(() => app.close());

test('each report\'s CSV is its JSON rows under a header of their fields, downloaded as a file', async () => {
  for (const report of REPORTS) {
    const path = `/v1/analytics/${report.slug}`;
    const json = await call(app.url, 'GET', `${path}?to=2099-01-01&from=2098-02-01`, { key: shop.key });
    const csv = await call(app.url, 'GET', `${path}.csv?to=2099-01-01&from=2098-02-01`, { key: shop.key });
    expect([report.slug, json.status, csv.status]).toEqual([report.slug, 200, 200]);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toMatch(/^attachment; filename="[a-z-]+-2098-0[12]-01-2099-01-01\.csv"$/);
    const columns = Object.keys(report.row.shape);
    expect(csv.text).toBe(csvOf(columns, json.body.data));
    expect(csv.text.split('\r\n')[0]).toBe(columns.join(','));
  }
});

test('today\'s revenue as CSV holds the paid checkouts, one line per day of the range', async () => {
  const today = (await call(app.url, 'GET', '/v1/analytics/revenue', { key: shop.key })).body.to as string;
  const csv = await call(app.url, 'GET', `/v1/analytics/revenue.csv?from=${today}&to=${today}`, { key: shop.key });
  expect(csv.text).toBe('period,currency,gross_cents,refunds_cents,net_cents,paid_invoices,refunds\r\n'
    + `${today},usd,2300,0,2300,2,0\r\n`);
  const month = await call(app.url, 'GET', '/v1/analytics/revenue.csv?granularity=month', { key: shop.key });
  expect(month.text.trim().split('\r\n')).toHaveLength(1 + 12);
  expect(month.headers.get('content-disposition')).toMatch(/filename="revenue-month-/);
});

test('a cell that would run as a formula is defused; quotes, commas and line breaks are quoted; numbers stay numbers', () => {
  expect(['=HYPERLINK("x")', '+1', '-1', '@SUM(A1)', '\tx', 'a,b', 'say "hi"', 'two\nlines', 'plain'].map(csvCell)).toEqual([
    '"\'=HYPERLINK(""x"")"', "'+1", "'-1", "'@SUM(A1)", "'\tx", '"a,b"', '"say ""hi"""', '"two\nlines"', 'plain']);
  expect([-500, 0, 0.4, null, undefined].map(csvCell)).toEqual(['-500', '0', '0.4', '', '']);
});

test('a key without analytics:read gets no report, as JSON or CSV', async () => {
  const limited = await createKey(app.owner, shop.communityId, ['members:read']);
  for (const path of ['/v1/analytics/churn', '/v1/analytics/churn.csv']) {
    const r = await call(app.url, 'GET', path, { key: limited.key });
    expect([path, r.status, r.body.code]).toEqual([path, 403, 'missing_scope']);
  }
});

test('GraphQL reads the reports\' views with analytics:read', async () => {
  const gql = async (key: string, query: string) => (await fetch(`${app.url}/graphql`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ query }) })).json();
  const q = `{ revenueReportDailies { nodes { day currency grossCents refundsCents netCents paidInvoices } }
    churnMonthlies { nodes { month payingAtStart churned } } cohortRetentions { nodes { cohortMonth members retained } }
    memberValueMonthlies { nodes { month arpuCents } } trialConversionMonthlies { nodes { month } }
    paymentRecoveryMonthlies { nodes { month } } revenueReportMonthlies { nodes { month netCents } } }`;
  const res = await gql(shop.key, q);
  expect(res.errors).toBeUndefined();
  const today = (await call(app.url, 'GET', '/v1/analytics/revenue', { key: shop.key })).body.to as string;
  expect(res.data.revenueReportDailies.nodes).toEqual([{ day: today, currency: 'usd', grossCents: '2300', refundsCents: '0', netCents: '2300', paidInvoices: '2' }]);
  expect(res.data.cohortRetentions.nodes).toEqual([{ cohortMonth: `${today.slice(0, 7)}-01`, members: '2', retained: '2' }]);
  const limited = await createKey(app.owner, shop.communityId, ['members:read']);
  const denied = await gql(limited.key, '{ churnMonthlies { nodes { month } } }');
  expect(denied.data).toBeUndefined();
  expect(denied.errors.map((e: { extensions: { required_scope: string } }) => e.extensions.required_scope)).toEqual(['analytics:read']);
});
