// GET /metrics: Prometheus text behind METRICS_TOKEN (404 without one), parsed
// strictly here; requests counted by route template; database gauges read at scrape.
import { call, createTenant, startApp, TestApp } from '../support/app';

const TOKEN = 'metrics-test-token';
let app: TestApp;

beforeAll(async () => { app = await startApp({ metricsToken: TOKEN }); });
afterAll(async () => { await app.close(); });

interface Sample { name: string; labels: Record<string, string>; value: number }

/** A strict parser of the Prometheus text format (0.0.4): throws on any line it does not know. */
function parsePrometheus(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const help = new RegExp(`^# HELP (${NAME}) .*$`);
  const type = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
  // Values: prom-client writes NaN as "Nan" (an event-loop lag with no sample yet),
  // which Prometheus reads (its float parser ignores case).
  const sample = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (-?[0-9.eE+-]+|[Nn]a[Nn]|[+-]Inf)(?: -?[0-9]+)?$`);
  const label = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(?:,|$)/;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (help.test(line)) continue;
    const t = type.exec(line);
    if (t) { types.set(t[1], t[2]); continue; }
    const s = sample.exec(line);
    if (!s) throw new Error(`not Prometheus text: ${line}`);
    const labels: Record<string, string> = {};
    let rest = s[2] ?? '';
    while (rest) {
      const l = label.exec(rest);
      if (!l) throw new Error(`bad labels in: ${line}`);
      labels[l[1]] = l[2].replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      rest = rest.slice(l[0].length);
    }
    const value = Number(s[3].replace('Inf', 'Infinity'));
    if (Number.isNaN(value) && s[3].toLowerCase() !== 'nan') throw new Error(`bad value in: ${line}`);
    const base = s[1].replace(/_(bucket|sum|count)$/, '');
    if (!types.has(s[1]) && !types.has(base)) throw new Error(`sample before its TYPE: ${line}`);
    samples.push({ name: s[1], labels, value });
  }
  return { samples, types };
}

async function scrape(): Promise<ReturnType<typeof parsePrometheus>> {
  const res = await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheus(await res.text());
}

const find = (samples: Sample[], name: string, labels: Record<string, string>) =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

test('requests are counted by route template, method and status, with latency histograms', async () => {
  const tenant = await createTenant(app.owner);
  expect((await call(app.url, 'GET', '/v1/plans', { key: tenant.key })).status).toBe(200);
  const missing = 'mem_00000000000000000000000000';
  expect((await call(app.url, 'GET', `/v1/members/${missing}`, { key: tenant.key })).status).toBe(404);
  const { samples, types } = await scrape();
  expect(types.get('billing_http_requests_total')).toBe('counter');
  expect(find(samples, 'billing_http_requests_total', { route: '/v1/plans', method: 'GET', status: '200' })?.value).toBeGreaterThanOrEqual(1);
  expect(find(samples, 'billing_http_requests_total', { route: '/v1/members/{id}', method: 'GET', status: '404' })?.value).toBeGreaterThanOrEqual(1);
  expect(samples.some((s) => Object.values(s.labels).some((v) => v.includes(missing)))).toBe(false);
  expect(types.get('billing_http_request_duration_seconds')).toBe('histogram');
  expect(find(samples, 'billing_http_request_duration_seconds_count', { route: '/v1/plans', method: 'GET' })?.value).toBeGreaterThanOrEqual(1);
  expect(find(samples, 'billing_http_request_duration_seconds_bucket', { route: '/v1/plans', method: 'GET', le: '+Inf' })?.value).toBeGreaterThanOrEqual(1);
});

test('database gauges: both pools, the job queue, events written, subscriptions by status', async () => {
  const { samples } = await scrape();
  for (const pool of ['api', 'owner']) {
    for (const state of ['in_use', 'idle', 'waiting']) {
      expect(find(samples, 'billing_db_pool_connections', { pool, state })).toBeDefined();
    }
  }
  for (const state of ['pending', 'scheduled', 'running', 'failed']) {
    expect(find(samples, 'billing_queue_jobs', { state })?.value).toBeGreaterThanOrEqual(0);
  }
  expect(find(samples, 'billing_queue_oldest_pending_seconds', {})?.value).toBeGreaterThanOrEqual(0);
  expect(find(samples, 'billing_events_written', {})).toBeDefined();
  expect(find(samples, 'billing_metrics_scrape_errors_total', {})?.value).toBe(0);
});

test('the token is required; without METRICS_TOKEN, /metrics does not exist', async () => {
  expect((await fetch(`${app.url}/metrics`)).status).toBe(401);
  expect((await fetch(`${app.url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
  const off = await startApp();
  try {
    expect((await fetch(`${off.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
  } finally {
    await off.close();
  }
});
