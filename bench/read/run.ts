// Read API benchmark: `npx tsx bench/read/run.ts` (or `npm run bench -- read`).
// Creates its own database on DATABASE_URL's server (default: the machine's
// PostgreSQL at 127.0.0.1:5432), seeds 100,000 members, 200,000 subscriptions and
// 1,000,000 events, starts the API in a child process with rate limits lifted, and
// measures with autocannon (50 connections) GET /v1/entitlements/check (one key, then 50 keys of the community) and
// GET /v1/subscriptions?limit=100. In the same run, the anchors: a bare Express 5 + pg
// server answering the check from one RLS function (anchor-server.ts), and pgbench of
// `select 1`, of that RLS function, and of the SQL each endpoint runs. Prints the
// figures and writes them under "## Read API" in bench/RESULTS.md.
// Env: BENCH_DURATION (seconds, default 20), BENCH_WARMUP (seconds of load before each
// measured run, default 15), BENCH_CONNECTIONS (50), PG_POOL_SIZE (API
// pool, 8: on two vCPUs 8 beat 16 and 4), BENCH_KEEP_DB=1 (keep the database
// afterwards), BENCH_REUSE_DB=1 (reuse a kept one: re-run the fixtures, no reseeding),
// BENCH_DB (the database's name, default billing_bench_read).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { hashKey } from '../../src/core/ids';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { withDatabase } from '../../src/db/migrate';
import { createBenchDatabase, machineLine, writeResultsSection } from '../support';
import { fixtureFiles, fixturesDir } from '../../test/support/fixtures';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = process.env.BENCH_DB ?? 'billing_bench_read';
const DURATION = Number(process.env.BENCH_DURATION ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 15);
const PORT = Number(process.env.BENCH_PORT ?? 3901);
const MEMBERS = 100_000;
const LIMITS = { key_per_minute: 1e9, key_burst: 1e9, ip_per_minute: 1e9, ip_burst: 1e9 };

// autocannon ships no type declarations: the part used here.
interface AutocannonResult { requests: { average: number; total?: number }; latency: { p50: number; p99: number }; errors: number; non2xx: number }
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as (opts: Record<string, unknown>) => Promise<AutocannonResult>;

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

const createDatabase = () => createBenchDatabase(SERVER, DB);

async function seed(url: string): Promise<{ key: string; communityId: string }> {
  const owner = new pg.Pool({ connectionString: url, max: 1 });
  const community = await createCommunity(owner, 'Bench community');
  const key = await createKey(owner, community.id, ['members:read', 'subscriptions:read']);
  await owner.end();
  const t0 = Date.now();
  execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-v', `community=${community.id}`, '-d', url, '-f', path.join(__dirname, 'seed.sql')], { stdio: ['ignore', 'ignore', 'inherit'] });
  log(`seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { key: key.key, communityId: community.id };
}

interface ServerStats { rss: number; cpuMicros: number }

/** Busy and total jiffies of the whole machine (/proc/stat). */
function machineCpu(): { busy: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + (f[4] ?? 0);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

interface Child { stop(): void; stats(): Promise<ServerStats>; port: number }

/**
 * A server in a child process; resolves once it prints "listening". Its stderr (the
 * API's access log: one JSON line per request, as in production) goes to a file, so
 * the logging is paid for without flooding the terminal.
 */
function startChild(script: string, port: number, env: NodeJS.ProcessEnv): Promise<Child> {
  const logFile = path.join(os.tmpdir(), `bench-read-${path.basename(script, '.ts')}-${process.pid}.log`);
  const err = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, script)], {
    env: { ...process.env, NODE_ENV: 'production', BENCH_PORT: String(port), PG_POOL_SIZE: process.env.PG_POOL_SIZE ?? '8', ...env },
    stdio: ['ignore', 'pipe', err],
  });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`${script} exited with ${code} (log: ${logFile})`)));
    let stopped = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('listening')) {
        resolve({
          port,
          stop: () => {
            if (stopped) return;
            stopped = true;
            child.removeAllListeners('exit');
            child.kill('SIGTERM');
            fs.closeSync(err);
            fs.rmSync(logFile, { force: true });
          },
          stats: async () => (await (await fetch(`http://127.0.0.1:${port}/__rss`)).json()) as ServerStats,
        });
      }
    });
  });
}

const startApi = (url: string) => startChild('server.ts', PORT, {
  DATABASE_URL: url,
  RATE_LIMIT_KEY_PER_MINUTE: String(LIMITS.key_per_minute), RATE_LIMIT_KEY_BURST: String(LIMITS.key_burst),
  RATE_LIMIT_IP_PER_MINUTE: String(LIMITS.ip_per_minute), RATE_LIMIT_IP_BURST: String(LIMITS.ip_burst),
});

const startAnchor = (url: string, communityId: string) => startChild('anchor-server.ts', PORT + 1, { DATABASE_URL: url, BENCH_COMMUNITY: communityId });

/** The anchor's one RLS function: the member's active entitlement rows, no JSON built. */
const ANCHOR_SQL = `
create schema if not exists bench_anchor;
create or replace function bench_anchor.entitlements(p_platform text, p_uid text)
  returns table (entitlement_id text, status text, sources jsonb, benefits jsonb, granted_at timestamptz)
  language sql stable
as $$
  select me.entitlement_id, me.status, me.sources, me.benefits, me.granted_at
  from billing.member_identities i
  join billing.member_entitlements me on me.community_id = i.community_id and me.member_id = i.member_id
  where i.community_id = billing.current_community_id() and i.platform = p_platform and i.platform_uid = p_uid
    and me.status = 'active'
$$;
grant usage on schema bench_anchor to billing_api;
grant execute on function bench_anchor.entitlements(text, text) to billing_api;
`;

interface HttpResult { name: string; rps: number; p50: number; p99: number; errors: number; non2xx: number; rssMb: number; apiCpuUs: number; machineBusy: number }

/** keys: one key for every request, or several, each request taking one at random (one bucket each). */
async function measureHttp(name: string, keys: string | string[], pathFor: () => string, server: Child): Promise<HttpResult> {
  const stats = server.stats;
  const all = typeof keys === 'string' ? [keys] : keys;
  const run = (duration: number) => autocannon({
    url: `http://127.0.0.1:${server.port}`,
    connections: CONNECTIONS,
    duration,
    headers: { authorization: `Bearer ${all[0]}` },
    requests: [{
      method: 'GET',
      setupRequest: (req: Record<string, unknown>) => (all.length === 1 ? { ...req, path: pathFor() } : {
        ...req, path: pathFor(), headers: { ...(req.headers as Record<string, string>), authorization: `Bearer ${all[Math.floor(Math.random() * all.length)]}` },
      }),
    }],
  });
  await run(WARMUP); // warm-up: connections, plan caches, and the JIT (a 3 s warm-up left the API at half its steady rate)
  let peak = 0;
  const before = await stats();
  const cpu0 = machineCpu();
  const timer = setInterval(() => { stats().then((s) => { peak = Math.max(peak, s.rss); }).catch(() => {}); }, 1000);
  const r = await run(DURATION);
  clearInterval(timer);
  const cpu1 = machineCpu();
  const after = await stats();
  peak = Math.max(peak, after.rss);
  const total = r.requests.total ?? r.requests.average * DURATION;
  const out = {
    name, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx, rssMb: peak / 2 ** 20,
    apiCpuUs: (after.cpuMicros - before.cpuMicros) / Math.max(total, 1),
    machineBusy: (cpu1.busy - cpu0.busy) / Math.max(cpu1.total - cpu0.total, 1),
  };
  log(`${name}: ${out.rps.toFixed(0)} req/s, p50 ${out.p50} ms, p99 ${out.p99} ms, errors ${out.errors}, non-2xx ${out.non2xx}, RSS ${out.rssMb.toFixed(0)} MB, `
    + `API CPU ${out.apiCpuUs.toFixed(0)} us/request, machine ${(100 * out.machineBusy).toFixed(0)}% busy`);
  return out;
}

interface PgbenchResult { name: string; tps: number; latencyMs: number }

function pgbench(url: string, name: string, sql: string, pgoptions = '-c role=billing_api'): PgbenchResult {
  const file = path.join(os.tmpdir(), `bench-read-${process.pid}-${name.replace(/\W+/g, '_')}.sql`);
  fs.writeFileSync(file, sql);
  const out = execFileSync('pgbench', ['-n', '-M', 'prepared', '-c', String(CONNECTIONS), '-j', String(Math.min(os.cpus().length, CONNECTIONS)),
    '-T', String(DURATION), '-f', file, url], { env: { ...process.env, PGOPTIONS: pgoptions }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  fs.unlinkSync(file);
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const latencyMs = Number(/latency average = ([\d.]+) ms/.exec(out)?.[1]);
  log(`pgbench ${name}: ${tps.toFixed(0)} tps, latency average ${latencyMs} ms`);
  return { name, tps, latencyMs };
}

// A SQL string literal; colons are spelled chr(58) because pgbench reads ":name" as a variable.
const lit = (s: string) => `('${s.replace(/'/g, "''").replace(/:/g, "' || chr(58) || '")}')`;

function apiCallLeasedSql(keyHash: string, scope: string, op: string, args: string): string {
  return `select billing.api_call(${lit(keyHash)}, null, null, ${lit(scope)}, ${lit(op)}, ${args}, null, true);\n`;
}

function apiCallSql(keyHash: string, scope: string, op: string, args: string): string {
  return `select billing.api_call(${lit(keyHash)}, '127.0.0.1', ${lit(JSON.stringify(LIMITS))}::jsonb, ${lit(scope)}, ${lit(op)}, ${args}, null);\n`;
}

interface PageResult { page: string; status: number; p50: number; p95: number; max: number; kb: number }

/**
 * The operator dashboard on the same 100,000 members: an owner signs in by a one-time
 * link, then each page is fetched 20 times in a row (after one warm-up); ms per page.
 */
async function measurePages(url: string, communityId: string, server: Child): Promise<PageResult[]> {
  const owner = new pg.Pool({ connectionString: url, max: 1 });
  const api = new pg.Pool({ connectionString: url, max: 1, options: '-c role=billing_api' });
  try {
    const invitation = await inviteOperator(owner, communityId, `bench-${Date.now()}@example.com`, 'owner');
    const signed = await signInWithLink(api, invitation.token, '127.0.0.1');
    if (!signed.ok) throw new Error(`sign-in failed: ${signed.reason}`);
    const cookie = `billing_session=${encodeURIComponent(signed.session.token)}`;
    const member = (await owner.query<{ id: string }>(`select member_id as id from billing.member_identities where community_id = $1 and platform_uid = 'd50000'`, [communityId])).rows[0].id;
    const pages = ['/dashboard', '/dashboard/subscriptions', '/dashboard/members', `/dashboard/members/${member}`, '/dashboard/invoices', '/dashboard/events', '/dashboard/catalog'];
    const results: PageResult[] = [];
    for (const page of pages) {
      const times: number[] = [];
      let status = 0;
      let bytes = 0;
      for (let i = 0; i <= 20; i++) {
        const t0 = performance.now();
        const res = await fetch(`http://127.0.0.1:${server.port}${page}`, { headers: { cookie }, redirect: 'manual' });
        const body = await res.text();
        if (i > 0) times.push(performance.now() - t0);
        status = res.status;
        bytes = body.length;
      }
      times.sort((a, b) => a - b);
      const r = { page: page.replace(member, '{member}'), status, p50: times[10], p95: times[18], max: times[19], kb: bytes / 1024 };
      log(`dashboard ${r.page}: ${r.status}, p50 ${r.p50.toFixed(1)} ms, p95 ${r.p95.toFixed(1)} ms, ${r.kb.toFixed(0)} kB`);
      results.push(r);
    }
    return results;
  } finally {
    await owner.end();
    await api.end();
  }
}

async function pgVersion(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const v = (await c.query<{ v: string }>('select current_setting($$server_version$$) as v')).rows[0].v;
  const settings = (await c.query<{ name: string; setting: string; unit: string | null }>(
    `select name, setting, unit from pg_settings where name in ('shared_buffers', 'max_connections', 'synchronous_commit')`)).rows
    .map((s) => `${s.name}=${s.setting}${s.unit ?? ''}`).join(', ');
  await c.end();
  return `${v} (${settings})`;
}

async function main() {
  log(`creating ${DB} on ${new URL(SERVER).host}`);
  let url: string;
  let key: string;
  if (process.env.BENCH_REUSE_DB === '1') {
    // Development shortcut: keep the seeded database, re-run every (idempotent) fixture
    // of db/migrations/fixtures, in load order, so changed functions apply, then make a new key.
    url = withDatabase(SERVER, DB);
    for (const file of fixtureFiles()) {
      execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-d', url, '-f', path.join(fixturesDir, file)], { stdio: ['ignore', 'ignore', 'inherit'] });
    }
    const owner = new pg.Pool({ connectionString: url, max: 1 });
    const { rows } = await owner.query<{ id: string }>(`select id from billing.communities where name = 'Bench community'`);
    key = (await createKey(owner, rows[0].id, ['members:read', 'subscriptions:read'])).key;
    await owner.end();
  } else {
    url = await createDatabase();
    key = (await seed(url)).key;
  }
  const hash = hashKey(key);
  const owner = new pg.Pool({ connectionString: url, max: 1 });
  await owner.query(ANCHOR_SQL);
  const communityId = (await owner.query<{ id: string }>(`select id from billing.communities where name = 'Bench community'`)).rows[0].id;
  // Fifty keys of the same community, each request of the 50-key run taking one at random.
  const keys50 = [key];
  for (let i = 1; i < 50; i++) keys50.push((await createKey(owner, communityId, ['members:read'])).key);
  await owner.end();
  const rnd = () => 1 + Math.floor(Math.random() * MEMBERS);
  const loadBefore = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  const started = new Date().toISOString();
  const anchor = await startAnchor(url, communityId);
  let server: Child | null = null;
  try {
    const bare = await measureHttp('anchor: Express 5 + pg, one RLS function', key, () => `/check?platform=discord&platform_uid=d${rnd()}`, anchor);
    anchor.stop();
    server = await startApi(url);
    const check = await measureHttp('GET /v1/entitlements/check', key, () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, server);
    const check50 = await measureHttp('GET /v1/entitlements/check, 50 keys', keys50, () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, server);
    const list = await measureHttp('GET /v1/subscriptions?limit=100', key, () => '/v1/subscriptions?limit=100', server);
    const pages = await measurePages(url, communityId, server);
    server.stop();
    server = null;
    const community = `-c role=billing_api -c app.community_id=${communityId}`;
    const pgSelect1 = pgbench(url, 'select_1', 'select 1;\n');
    const pgAnchor = pgbench(url, 'anchor_rls_function', `\\set n random(1, ${MEMBERS})\nselect * from bench_anchor.entitlements('discord', 'd' || (:n)::text);\n`, community);
    const pgCheckLeased = pgbench(url, 'entitlements_check_leased', `\\set n random(1, ${MEMBERS})\n`
      + apiCallLeasedSql(hash, 'members:read', 'entitlements_check', `jsonb_build_object('platform', 'discord', 'platform_uid', 'd' || (:n)::text)`));
    const pgCheckToken = pgbench(url, 'entitlements_check_token_per_request', `\\set n random(1, ${MEMBERS})\n`
      + apiCallSql(hash, 'members:read', 'entitlements_check', `jsonb_build_object('platform', 'discord', 'platform_uid', 'd' || (:n)::text)`));
    const pgList = pgbench(url, 'subscriptions_list_leased', apiCallLeasedSql(hash, 'subscriptions:read', 'subscriptions_list', `${lit('{"limit":100}')}::jsonb`));
    const version = await pgVersion(url);
    const pct = (a: number, b: number) => `${(100 * a / b).toFixed(0)}%`;
    const httpRow = (h: HttpResult) =>
      `| ${h.name} | ${h.rps.toFixed(0)} | ${h.p50} | ${h.p99} | ${h.rssMb.toFixed(0)} | ${h.apiCpuUs.toFixed(0)} | ${(100 * h.machineBusy).toFixed(0)}% | ${h.errors + h.non2xx} |`;
    const pgRow = (p: PgbenchResult) => `| ${p.name} | ${p.tps.toFixed(0)} | ${p.latencyMs} |`;
    const body = [
      `Run ${started} by \`npx tsx bench/read/run.ts\` on ${machineLine(version)} (1-minute load before the runs: ${loadBefore.split(' ')[0]}).`,
      `Data: ${MEMBERS.toLocaleString('en')} members, 200,000 subscriptions, 200,000 ledger rows, 1,000,000 events. `
        + `${CONNECTIONS} connections, ${DURATION} s per run after a ${WARMUP} s warm-up on the same server; API and anchor pools of ${process.env.PG_POOL_SIZE ?? '8'}; `
        + 'autocannon, the servers, PostgreSQL and pgbench share the machine. The API writes its access log (one JSON line per request) to a file; '
        + 'rate limits are lifted (a burst of 10^9: leases of 20 tokens).',
      '',
      'HTTP (autocannon):',
      '',
      '| server / endpoint | req/s | p50 ms | p99 ms | RSS MB | server CPU us/req | machine CPU busy | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      httpRow(bare), httpRow(check), httpRow(check50), httpRow(list),
      '',
      `pgbench (${CONNECTIONS} clients, prepared statements, as billing_api):`,
      '',
      '| SQL | tps | latency avg ms |',
      '|---|---:|---:|',
      pgRow(pgSelect1), pgRow(pgAnchor), pgRow(pgCheckLeased), pgRow(pgCheckToken), pgRow(pgList),
      '',
      'Operator dashboard pages on the same data (an owner signed in; 20 requests in a row per page after one warm-up, while nothing else runs):',
      '',
      '| page | status | p50 ms | p95 ms | max ms | HTML kB |',
      '|---|---:|---:|---:|---:|---:|',
      ...pages.map((p) => `| ${p.page} | ${p.status} | ${p.p50.toFixed(1)} | ${p.p95.toFixed(1)} | ${p.max.toFixed(1)} | ${p.kb.toFixed(0)} |`),
      '',
      'Ratios, each from figures of this run:',
      '',
      `- entitlement check / bare Express + pg anchor: **${pct(check.rps, bare.rps)}** with one key, **${pct(check50.rps, bare.rps)}** with 50 keys (goal of issue 17: >= 85%); p99 ${check.p99} / ${check50.p99} ms (goal < 25 ms; the anchor's own p99: ${bare.p99} ms).`,
      `- entitlement check over HTTP / pgbench of its SQL on a leased token: ${pct(check.rps, pgCheckLeased.tps)}.`,
      `- its SQL on a leased token / with a token taken per request: ${pct(pgCheckLeased.tps, pgCheckToken.tps)}.`,
      `- subscriptions?limit=100 over HTTP / pgbench of its SQL: **${pct(list.rps, pgList.tps)}** (goal >= 85%).`,
    ].join('\n');
    process.stdout.write(`\n${body}\n`);
    writeResultsSection('## Read API', body);
    log('wrote the "Read API" section of bench/RESULTS.md');
  } finally {
    anchor.stop();
    server?.stop();
    if (process.env.BENCH_KEEP_DB !== '1' && process.env.BENCH_REUSE_DB !== '1') {
      const admin = new pg.Client({ connectionString: withDatabase(SERVER, 'postgres') });
      await admin.connect();
      await admin.query(`drop database if exists ${DB} with (force)`);
      await admin.end();
    }
  }
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${err?.stack ?? err}\n`); process.exit(1); });
