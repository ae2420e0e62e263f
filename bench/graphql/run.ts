// RLS cost benchmark: `npx tsx bench/graphql/run.ts` (or `npm run bench -- graphql`).
// Creates its own database on DATABASE_URL's server (default: the machine's
// PostgreSQL at 127.0.0.1:5432), seeds it with bench/read/seed.sql (100,000 members,
// 200,000 subscriptions, 1,000,000 events in one community) plus a second community of
// the same size, then runs each query back to back from BENCH_CONNECTIONS connections
// for BENCH_DURATION seconds:
//   REST hot query: billing_api.subscriptions_list (GET /v1/subscriptions?limit=100)
//     as billing_api (RLS policy tenant) vs as the owner (policy owner_access: true);
//     the function filters on community_id itself either way.
//   GraphQL list: the page PostGraphile reads for subscriptions(first: 100), from the
//     billing_graphql view as billing_api (RLS + the view's scope filter) vs the same
//     columns from billing.subscriptions as the owner with an explicit community_id.
// Settings (app.community_id, app.scopes) are set once per connection, so the figures
// are the queries' own cost. Prints throughput, p50/p99 latency, memory, and writes
// the "RLS cost" section of bench/RESULTS.md. A measurement, never a test.
// Env: BENCH_DURATION (10), BENCH_CONNECTIONS (4), BENCH_KEEP_DB=1, BENCH_REUSE_DB=1.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createCommunity } from '../../src/domain/communities/community-admin';
import { withDatabase } from '../../src/db/migrate';
import { createBenchDatabase, writeResultsSection } from '../support';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = 'billing_bench_graphql';
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

interface Variant { name: string; role: 'billing_api' | 'owner'; sql: string; values: (community: string) => unknown[] }
interface Result { name: string; qps: number; p50: number; p99: number; backendKb: number; buffers: string }

const GRAPHQL_COLUMNS = 'id, member_id, plan_id, status, current_period_end, created_at, updated_at';
const PAIRS: [Variant, Variant][] = [
  [
    { name: 'REST subscriptions_list(limit 100), billing_api (RLS)', role: 'billing_api', sql: `select billing_api.subscriptions_list('{"limit":100}')`, values: () => [] },
    { name: 'REST subscriptions_list(limit 100), owner', role: 'owner', sql: `select billing_api.subscriptions_list('{"limit":100}')`, values: () => [] },
  ],
  [
    { name: 'GraphQL subscriptions(first: 100) page, billing_graphql view as billing_api (RLS + scope)', role: 'billing_api',
      sql: `select ${GRAPHQL_COLUMNS} from billing_graphql.subscriptions order by id asc limit 101`, values: () => [] },
    { name: 'same page from billing.subscriptions as owner, explicit community_id', role: 'owner',
      sql: `select ${GRAPHQL_COLUMNS} from billing.subscriptions where community_id = $1 order by id asc limit 101`, values: (c) => [c] },
  ],
];

async function connect(url: string, v: Variant, community: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, ...(v.role === 'billing_api' ? { options: '-c role=billing_api' } : {}) });
  c.on('error', () => {});
  await c.connect();
  await c.query(`select set_config('app.community_id', $1, false), set_config('app.scopes', 'subscriptions:read members:read', false)`, [community]);
  return c;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];

async function measure(url: string, v: Variant, community: string): Promise<Result> {
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => connect(url, v, community)));
  const values = v.values(community);
  const run = async (ms: number) => {
    const latencies: number[] = [];
    const until = Date.now() + ms;
    await Promise.all(clients.map(async (c) => {
      while (Date.now() < until) {
        const t = process.hrtime.bigint();
        await c.query({ text: v.sql, values, name: `q${v.sql.length}` });
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }));
    return latencies;
  };
  await run(2000); // warm-up: plans, caches
  const lat = (await run(DURATION * 1000)).sort((a, b) => a - b);
  // Memory of one backend after the runs (its memory contexts), and the page reads of one run.
  const plan = await clients[0].query<{ 'QUERY PLAN': string }>({ text: `explain (analyze, buffers, costs off) ${v.sql}`, values });
  await clients[0].query('set role none'); // pg_backend_memory_contexts is for superusers: the same backend, read as its session user
  const mem = await clients[0].query<{ kb: string }>('select (sum(total_bytes) / 1024)::bigint as kb from pg_backend_memory_contexts');
  const buffers = plan.rows.map((r) => r['QUERY PLAN']).find((l) => /Buffers:/.test(l))?.trim() ?? '';
  await Promise.all(clients.map((c) => c.end()));
  const out = { name: v.name, qps: lat.length / DURATION, p50: pct(lat, 0.5), p99: pct(lat, 0.99), backendKb: Number(mem.rows[0].kb), buffers };
  log(`${v.name}: ${out.qps.toFixed(0)} q/s, p50 ${out.p50.toFixed(2)} ms, p99 ${out.p99.toFixed(2)} ms, backend ${out.backendKb} kB, ${buffers}`);
  return out;
}

async function machine(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const v = (await c.query<{ v: string }>('select current_setting($$server_version$$) as v')).rows[0].v;
  await c.end();
  return `${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, PostgreSQL ${v}, Node ${process.version}`;
}

async function main() {
  log(`creating ${DB} on ${new URL(SERVER).host}`);
  const reuse = process.env.BENCH_REUSE_DB === '1'; // a database kept by BENCH_KEEP_DB=1: no reseeding
  const url = reuse ? withDatabase(SERVER, DB) : await createBenchDatabase(SERVER, DB);
  let community = '';
  try {
    const t0 = Date.now();
    if (reuse) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      community = (await c.query<{ id: string }>(`select id from billing.communities where name = 'Bench community'`)).rows[0].id;
      await c.end();
    }
    for (const name of reuse ? [] : ['Bench community', 'Other community']) {
      const owner = new pg.Pool({ connectionString: url, max: 1 });
      const c = await createCommunity(owner, name);
      await owner.end();
      community ||= c.id;
      execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-v', `community=${c.id}`, '-d', url, '-f', path.join(__dirname, '../read/seed.sql')], { stdio: ['ignore', 'ignore', 'inherit'] });
    }
    execFileSync('psql', ['-q', '-d', url, '-c', 'vacuum analyze'], { stdio: ['ignore', 'ignore', 'inherit'] });
    log(`${reuse ? 'reused the seeded database, analyzed' : 'seeded two communities'} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const loadBefore = os.loadavg()[0];
    const rows: string[] = [];
    for (const [rls, owner] of PAIRS) {
      const a = await measure(url, rls, community);
      const b = await measure(url, owner, community);
      const cost = (x: number, y: number) => `${x >= y ? '+' : ''}${(100 * (x - y) / y).toFixed(1)}%`;
      rows.push(`| ${a.name} | ${a.qps.toFixed(0)} | ${a.p50.toFixed(2)} | ${a.p99.toFixed(2)} | ${a.backendKb} | ${a.buffers} | ${cost(b.qps, a.qps)} throughput, ${cost(a.p50, b.p50)} p50 |`);
      rows.push(`| ${b.name} | ${b.qps.toFixed(0)} | ${b.p50.toFixed(2)} | ${b.p99.toFixed(2)} | ${b.backendKb} | ${b.buffers} | (baseline) |`);
    }
    const text = [
      `Run ${new Date().toISOString()} by \`npx tsx bench/graphql/run.ts\` on ${await machine(url)}; 1-minute load average ${loadBefore.toFixed(1)} before, ${os.loadavg()[0].toFixed(1)} after (other work shared the machine). `
        + `Two communities of 100,000 members, 200,000 subscriptions and 1,000,000 events each; ${CONNECTIONS} connections, ${DURATION} s per query after a 2 s warm-up, prepared statements, settings set once per connection. Node RSS at the end: ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MB.`,
      '',
      '| query | q/s | p50 ms | p99 ms | backend memory kB | one run\'s buffers | RLS cost (owner faster by / RLS slower by) |',
      '|---|---:|---:|---:|---:|---|---|',
      ...rows,
    ].join('\n');
    process.stdout.write(`${text}\n`);
    writeResultsSection('## RLS cost (GraphQL and the read API)', text);
  } finally {
    if (process.env.BENCH_KEEP_DB !== '1' && !reuse) {
      const admin = new pg.Client({ connectionString: withDatabase(SERVER, 'postgres') });
      await admin.connect();
      await admin.query(`drop database if exists ${DB} with (force)`);
      await admin.end();
    }
  }
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${err?.stack ?? err}\n`); process.exit(1); });
