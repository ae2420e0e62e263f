// Read API benchmark: `npx tsx bench/read/run.ts` (or `npm run bench -- read`).
// Creates its own database on DATABASE_URL's server (default: the machine's
// PostgreSQL at 127.0.0.1:5432), seeds 100,000 members, 200,000 subscriptions and
// 1,000,000 events, starts the API in a child process with rate limits lifted, and
// measures with autocannon (50 connections) GET /v1/entitlements/check (one key, then 50 keys of the community) and
// GET /v1/subscriptions?limit=100. In the same run, the anchors of the check:
//   - the bare anchor (issue 33; bare-anchor-server.ts): Express 5 + pg, the API's pool
//     size, a named prepared statement calling one plain plpgsql function that sets the
//     tenant with set_config and reads copies of the same ledger rows under its own RLS
//     policy, no function of the project; the check's ratios are against it;
//   - the rules' floor (bare-anchor-server.ts with BENCH_FLOOR=1; two rows, one key and
//     50): the bare anchor plus the least the check's rules ask of any server (the key
//     hashed and checked in the statement, its scope, a token counted, an access log
//     line), the most the check could reach with the anchor's own parts;
//   - the old anchor (anchor-server.ts; a second row): an unnamed statement calling a SQL
//     function over billing.current_community_id();
//   - pgbench of the check's own statement (src/operations/gate.ts GATE_RUN on a leased
//     token, as the API sends it) at the API's pool size and at autocannon's connection
//     count, BENCH_PGBENCH_SECONDS each, with p50/p99 from its transaction log (skipped,
//     and said, when pgbench is not installed);
// and pgbench of `select 1`, of the old anchor's function and of the SQL each endpoint
// runs. Prints the figures and writes them under "## Read API" in bench/RESULTS.md.
// Env: BENCH_DURATION (seconds, default 20), BENCH_WARMUP (seconds of load before each
// measured run, default 15), BENCH_CONNECTIONS (50), PG_POOL_SIZE (API and anchor
// pools, 8: on two vCPUs 8 beat 16 and 4), BENCH_PGBENCH_SECONDS (5), BENCH_MEMBERS
// (100000) and BENCH_EVENTS (1000000) for smoke runs, BENCH_KEEP_DB=1 (keep the database
// afterwards), BENCH_REUSE_DB=1 (reuse a kept one: re-run the fixtures, no reseeding),
// BENCH_DB (the database's name, default billing_bench_read), BENCH_CPU_PROF (a folder:
// every server started writes its V8 CPU profile there, --cpu-prof).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { hashKey } from '../../src/core/ids';
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { withDatabase } from '../../src/db/migrate';
import { autocannon, createBenchDatabase, machineCpu, machineLine, serviceNodeFlags, writeResultsSection } from '../support';
import { fixtureFiles, fixturesDir } from '../../test/support/fixtures';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = process.env.BENCH_DB ?? 'billing_bench_read';
const DURATION = Number(process.env.BENCH_DURATION ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 15);
const PORT = Number(process.env.BENCH_PORT ?? 3901);
const MEMBERS = Number(process.env.BENCH_MEMBERS ?? 100_000);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const POOL = Number(process.env.PG_POOL_SIZE ?? 8);
const PGBENCH_SECONDS = Number(process.env.BENCH_PGBENCH_SECONDS ?? 5);
const LIMITS = { key_per_minute: 1e9, key_burst: 1e9, ip_per_minute: 1e9, ip_burst: 1e9 };

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

const createDatabase = () => createBenchDatabase(SERVER, DB);

async function seed(url: string): Promise<{ key: string; communityId: string }> {
  const owner = new pg.Pool({ connectionString: url, max: 1 });
  const community = await createCommunity(owner, 'Bench community');
  const key = await createKey(owner, community.id, ['members:read', 'subscriptions:read']);
  await owner.end();
  const t0 = Date.now();
  execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-v', `community=${community.id}`, '-v', `members=${MEMBERS}`, '-v', `events=${EVENTS}`, '-d', url, '-f', path.join(__dirname, 'seed.sql')], { stdio: ['ignore', 'ignore', 'inherit'] });
  log(`seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { key: key.key, communityId: community.id };
}

interface ServerStats { rss: number; cpuMicros: number }

/** Busy and total jiffies of the whole machine (/proc/stat). */
interface Child { stop(): void; stats(): Promise<ServerStats>; port: number }

/**
 * A server in a child process; resolves once it prints "listening". Its stderr (the
 * API's access log: one JSON line per request, as in production) goes to a file, so
 * the logging is paid for without flooding the terminal.
 */
function startChild(script: string, port: number, env: NodeJS.ProcessEnv, nodeFlags: string[] = []): Promise<Child> {
  const logFile = path.join(os.tmpdir(), `bench-read-${path.basename(script, '.ts')}-${process.pid}.log`);
  const err = fs.openSync(logFile, 'w');
  // BENCH_CPU_PROF=<dir>: each server writes a V8 CPU profile there when it stops.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...nodeFlags, ...profile, '--import', 'tsx', path.join(__dirname, script)], {
    env: { ...process.env, NODE_ENV: 'production', BENCH_PORT: String(port), PG_POOL_SIZE: String(POOL), ...env },
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
}, serviceNodeFlags()); // with npm start's V8 flags; the anchors run with node's defaults

const startAnchor = (url: string, communityId: string) => startChild('anchor-server.ts', PORT + 1, { DATABASE_URL: url, BENCH_COMMUNITY: communityId });
const startBareAnchor = (url: string, communityId: string, floor = false) => startChild('bare-anchor-server.ts', PORT + (floor ? 3 : 2),
  { DATABASE_URL: url, BENCH_COMMUNITY: communityId, BENCH_FLOOR: floor ? '1' : '0' });

/** The bare anchor's read: the member's active entitlement rows in the community named by the plpgsql variable. */
const bareQuery = (community: string) => `
    select me.id, me.entitlement_id, e.key, e.name, me.revision, me.status, me.granted_at, me.revoked_at, me.sources, me.benefits
    from bench_bare.member_identities i
    join bench_bare.member_entitlements me on me.community_id = i.community_id and me.member_id = i.member_id
    join bench_bare.entitlements e on e.community_id = me.community_id and e.id = me.entitlement_id
    where i.community_id = ${community} and i.platform = p_platform and i.platform_uid = p_uid and me.status = 'active';`;

/**
 * The bare anchor's data and its one function (issue 33): copies of the seeded
 * identities, ledger rows and entitlements in a schema of their own, each table with
 * RLS forced and one policy comparing community_id with a setting (no billing.*
 * function, policy or trigger), and a plain plpgsql function that sets that setting
 * for the transaction and reads the member's active entitlements. Run as the owner
 * after the seed (again on a reused database: the copies follow the data).
 */
const BARE_SQL = `
drop schema if exists bench_bare cascade;
create schema bench_bare;
create table bench_bare.member_identities as
  select community_id, platform, platform_uid, member_id from billing.member_identities;
alter table bench_bare.member_identities add primary key (community_id, platform, platform_uid);
create table bench_bare.entitlements as select community_id, id, key, name from billing.entitlements;
alter table bench_bare.entitlements add primary key (community_id, id);
create table bench_bare.member_entitlements as
  select community_id, id, member_id, entitlement_id, status, revision, granted_at, revoked_at, sources, benefits
  from billing.member_entitlements;
alter table bench_bare.member_entitlements add primary key (community_id, id);
create unique index on bench_bare.member_entitlements (community_id, member_id, entitlement_id);
do $$
declare t text;
begin
  foreach t in array array['member_identities', 'entitlements', 'member_entitlements'] loop
    execute format('alter table bench_bare.%I enable row level security', t);
    execute format('alter table bench_bare.%I force row level security', t);
    execute format('create policy tenant on bench_bare.%I using (community_id = current_setting(%L, true))', t, 'bench_bare.community_id');
    execute format('grant select on bench_bare.%I to billing_api', t);
  end loop;
end $$;
create function bench_bare.check_entitlements(p_community text, p_platform text, p_uid text)
  returns table (id text, entitlement_id text, key text, name text, revision bigint, status text,
    granted_at timestamptz, revoked_at timestamptz, sources jsonb, benefits jsonb)
  language plpgsql volatile
as $f$
begin
  perform set_config('bench_bare.community_id', p_community, true);
  return query
${bareQuery('p_community')}
end
$f$;
-- The rules' floor (bare-anchor-server.ts, BENCH_FLOOR=1): the key looked up by its
-- hash, refused when unknown or revoked (BL401) or without the scope (BL403), its
-- community the tenant; readable by billing_api, so no security definer is paid.
create table bench_bare.api_keys as select key_hash, id, community_id, scopes, revoked_at from billing_private.api_keys;
alter table bench_bare.api_keys add primary key (key_hash);
create function bench_bare.check_entitlements_keyed(p_key_hash text, p_scope text, p_platform text, p_uid text)
  returns table (id text, entitlement_id text, key text, name text, revision bigint, status text,
    granted_at timestamptz, revoked_at timestamptz, sources jsonb, benefits jsonb)
  language plpgsql volatile
as $f$
declare
  v_community text;
  v_scopes text[];
begin
  select k.community_id, k.scopes into v_community, v_scopes from bench_bare.api_keys k
  where k.key_hash = p_key_hash and k.revoked_at is null;
  if v_community is null then
    raise exception using errcode = 'BL401', message = 'A valid API key is required.';
  end if;
  if not (p_scope = any (v_scopes)) then
    raise exception using errcode = 'BL403', message = 'This key lacks the scope ' || p_scope || '.';
  end if;
  perform set_config('bench_bare.community_id', v_community, true);
  return query
${bareQuery('v_community')}
end
$f$;
grant usage on schema bench_bare to billing_api;
grant select on bench_bare.api_keys to billing_api;
grant execute on function bench_bare.check_entitlements(text, text, text) to billing_api;
grant execute on function bench_bare.check_entitlements_keyed(text, text, text, text) to billing_api;
analyze bench_bare.member_identities, bench_bare.entitlements, bench_bare.member_entitlements, bench_bare.api_keys;
`;

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

interface PgbenchResult { name: string; clients: number; tps: number; latencyMs: number; p50?: number; p99?: number }

/** The pgbench of the machine's PostgreSQL, or null (the bench then says so and skips its rows). */
function findPgbench(): string | null {
  const candidates = ['pgbench', ...['17', '16', '15', '14'].map((v) => `/usr/lib/postgresql/${v}/bin/pgbench`)];
  for (const c of candidates) {
    try {
      execFileSync(c, ['--version'], { stdio: 'ignore' });
      return c;
    } catch { /* next */ }
  }
  return null;
}
const PGBENCH = findPgbench();

/**
 * pgbench of `sql` (a custom script) with prepared statements. percentiles: also log
 * every transaction (-l) and read p50/p99 of their latencies from the log.
 */
function pgbench(url: string, name: string, sql: string, pgoptions = '-c role=billing_api',
  opts: { clients?: number; seconds?: number; percentiles?: boolean } = {}): PgbenchResult {
  const clients = opts.clients ?? CONNECTIONS;
  const file = path.join(os.tmpdir(), `bench-read-${process.pid}-${name.replace(/\W+/g, '_')}.sql`);
  const logDir = opts.percentiles ? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-read-pgbench-')) : null;
  fs.writeFileSync(file, sql);
  const out = execFileSync(PGBENCH ?? 'pgbench', ['-n', '-M', 'prepared', '-c', String(clients), '-j', String(Math.min(os.cpus().length, clients)),
    '-T', String(opts.seconds ?? DURATION), ...(logDir ? ['-l', '--log-prefix', path.join(logDir, 'tx')] : []), '-f', file, url],
  { env: { ...process.env, PGOPTIONS: pgoptions }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  fs.unlinkSync(file);
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const latencyMs = Number(/latency average = ([\d.]+) ms/.exec(out)?.[1]);
  const result: PgbenchResult = { name, clients, tps, latencyMs };
  if (logDir) {
    // One line per transaction: client, transaction, latency in us, script, epoch s, us.
    const us: number[] = [];
    for (const f of fs.readdirSync(logDir)) {
      for (const line of fs.readFileSync(path.join(logDir, f), 'utf8').split('\n')) {
        const v = Number(line.split(' ')[2]);
        if (line && Number.isFinite(v)) us.push(v);
      }
    }
    fs.rmSync(logDir, { recursive: true, force: true });
    us.sort((a, b) => a - b);
    const at = (p: number) => (us.length === 0 ? NaN : us[Math.min(us.length - 1, Math.floor(p * us.length))] / 1000);
    result.p50 = at(0.5);
    result.p99 = at(0.99);
  }
  log(`pgbench ${name} (${clients} clients): ${tps.toFixed(0)} tps, latency average ${latencyMs} ms`
    + (result.p50 === undefined ? '' : `, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99!.toFixed(2)} ms`));
  return result;
}

// A SQL string literal; colons are spelled chr(58) because pgbench reads ":name" as a variable.
const lit = (s: string) => `('${s.replace(/'/g, "''").replace(/:/g, "' || chr(58) || '")}')`;

function apiCallLeasedSql(keyHash: string, scope: string, op: string, args: string): string {
  return `select billing.gate_run(${lit(keyHash)}, ${lit(scope)}, ${lit(op)}, ${args});\n`;
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
    const member = (await owner.query<{ id: string }>(`select member_id as id from billing.member_identities where community_id = $1 and platform_uid = $2`, [communityId, `d${Math.ceil(MEMBERS / 2)}`])).rows[0].id;
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
  await owner.query(BARE_SQL); // after the keys: the rules' floor reads a copy of them
  await owner.end();
  const rnd = () => 1 + Math.floor(Math.random() * MEMBERS);
  const loadBefore = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  const started = new Date().toISOString();
  let anchor: Child | null = null;
  let server: Child | null = null;
  try {
    // The bare anchor first, then the old one, then the API: each alone on the machine.
    const bareServer = await startBareAnchor(url, communityId);
    anchor = bareServer;
    // The bare anchor answers what the API answers: a seeded member is entitled.
    const probe = await (await fetch(`http://127.0.0.1:${bareServer.port}/v1/entitlements/check?platform=discord&platform_uid=d1`)).json() as { entitled: boolean };
    if (!probe.entitled) throw new Error('the bare anchor answers d1 not entitled: its copies of the ledger are wrong');
    const bare = await measureHttp('bare anchor: Express 5 + pg, named prepared statement, one plpgsql RLS function (set_config)', key,
      () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, bareServer);
    bareServer.stop();
    // The rules' floor: the bare anchor plus the least the check's rules ask (a key
    // hashed and looked up in the statement, its scope, a token counted, an access log line).
    const floorServer = await startBareAnchor(url, communityId, true);
    anchor = floorServer;
    const floorProbe = await fetch(`http://127.0.0.1:${floorServer.port}/v1/entitlements/check?platform=discord&platform_uid=d1`, { headers: { authorization: `Bearer ${key}` } });
    const refused = await fetch(`http://127.0.0.1:${floorServer.port}/v1/entitlements/check?platform=discord&platform_uid=d1`, { headers: { authorization: `Bearer ${key}x` } });
    const probed = await floorProbe.text();
    if (!probed.startsWith('{"entitled":true') || refused.status !== 401) throw new Error(`the rules' floor answers wrongly: ${probed.slice(0, 200)}; ${refused.status} to a wrong key`);
    const floor = await measureHttp('rules\' floor: the bare anchor + key checked in its statement, scope, token count, access log', key,
      () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, floorServer);
    const floor50 = await measureHttp('rules\' floor, 50 keys', keys50, () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, floorServer);
    floorServer.stop();
    const oldServer = await startAnchor(url, communityId);
    anchor = oldServer;
    const old = await measureHttp('old anchor: Express 5 + pg, unnamed statement, SQL function over billing.current_community_id()', key,
      () => `/check?platform=discord&platform_uid=d${rnd()}`, oldServer);
    oldServer.stop();
    anchor = null;
    server = await startApi(url);
    const check = await measureHttp('GET /v1/entitlements/check', key, () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, server);
    const check50 = await measureHttp('GET /v1/entitlements/check, 50 keys', keys50, () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, server);
    const list = await measureHttp('GET /v1/subscriptions?limit=100', key, () => '/v1/subscriptions?limit=100', server);
    const pages = await measurePages(url, communityId, server);
    server.stop();
    server = null;
    const community = `-c role=billing_api -c app.community_id=${communityId}`;
    const version = await pgVersion(url);
    const pct = (a: number, b: number) => `${(100 * a / b).toFixed(0)}%`;
    const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(2));
    const httpRow = (h: HttpResult) =>
      `| ${h.name} | ${h.rps.toFixed(0)} | ${h.p50} | ${h.p99} | ${h.rssMb.toFixed(0)} | ${h.apiCpuUs.toFixed(0)} | ${(100 * h.machineBusy).toFixed(0)}% | ${h.errors + h.non2xx} |`;
    const pgRow = (p: PgbenchResult) => `| ${p.name} | ${p.clients} | ${p.tps.toFixed(0)} | ${p.latencyMs} | ${ms(p.p50)} | ${ms(p.p99)} |`;
    // The check's own statement, as the API sends it on a leased token (gate.ts GATE_RUN,
    // billing.gate_run with a request id), a member at random per transaction.
    const checkStatement = `\\set n random(1, ${MEMBERS})\n`
      + `select billing.gate_run(${lit(hash)}, ${lit('members:read')}, ${lit('entitlements_check')}, `
      + `jsonb_build_object('platform', 'discord', 'platform_uid', 'd' || (:n)::text), `
      + `'00000000-0000-4000-8000-000000000033') as t;\n`;
    let pgLines: string[];
    let pgRatios: string[] = [];
    if (PGBENCH) {
      const pgCheckPool = pgbench(url, 'the check\'s own statement (leased token)', checkStatement, undefined, { clients: POOL, seconds: PGBENCH_SECONDS, percentiles: true });
      const pgCheckConns = pgbench(url, 'the check\'s own statement (leased token)', checkStatement, undefined, { clients: CONNECTIONS, seconds: PGBENCH_SECONDS, percentiles: true });
      const pgBare = pgbench(url, 'the bare anchor\'s statement', `\\set n random(1, ${MEMBERS})\n`
        + `select * from bench_bare.check_entitlements(${lit(communityId)}, 'discord', 'd' || (:n)::text);\n`, undefined,
      { clients: POOL, seconds: PGBENCH_SECONDS, percentiles: true });
      const pgFloor = pgbench(url, 'the rules\' floor\'s statement', `\\set n random(1, ${MEMBERS})\n`
        + `select * from bench_bare.check_entitlements_keyed(${lit(hash)}, ${lit('members:read')}, 'discord', 'd' || (:n)::text);\n`, undefined,
      { clients: POOL, seconds: PGBENCH_SECONDS, percentiles: true });
      const pgSelect1 = pgbench(url, 'select_1', 'select 1;\n');
      const pgAnchor = pgbench(url, 'old_anchor_rls_function', `\\set n random(1, ${MEMBERS})\nselect * from bench_anchor.entitlements('discord', 'd' || (:n)::text);\n`, community);
      const pgCheckToken = pgbench(url, 'entitlements_check_token_per_request', `\\set n random(1, ${MEMBERS})\n`
        + apiCallSql(hash, 'members:read', 'entitlements_check', `jsonb_build_object('platform', 'discord', 'platform_uid', 'd' || (:n)::text)`));
      const pgList = pgbench(url, 'subscriptions_list_leased', apiCallLeasedSql(hash, 'subscriptions:read', 'subscriptions_list', `${lit('{"limit":100}')}::jsonb`));
      pgLines = [
        `pgbench of the check's own statement and of the bare anchor's (\`${checkStatement.split('\n')[1].replace(/'[0-9a-f]{64}'/, "'<key hash>'")}\`, `
          + `a custom script with prepared statements, as billing_api, ${PGBENCH_SECONDS} s at the API's pool size and at autocannon's connection count; `
          + 'latency percentiles from its per-transaction log), then the older pgbench rows (prepared, as billing_api, '
          + `${DURATION} s each; the tenant set per session for the old anchor's function):`,
        '',
        '| SQL | clients | tps | latency avg ms | p50 ms | p99 ms |',
        '|---|---:|---:|---:|---:|---:|',
        pgRow(pgCheckPool), pgRow(pgCheckConns), pgRow(pgBare), pgRow(pgFloor), pgRow(pgSelect1), pgRow(pgAnchor), pgRow(pgCheckToken), pgRow(pgList),
      ];
      pgRatios = [
        `- entitlement check over HTTP / pgbench of its own statement at ${POOL} clients: ${pct(check.rps, pgCheckPool.tps)} `
          + `(bare anchor / the same: ${pct(bare.rps, pgCheckPool.tps)}); the check's statement / the bare anchor's, both at ${POOL} clients: `
          + `**${pct(pgCheckPool.tps, pgBare.tps)}**, p99 ${ms(pgCheckPool.p99)} / ${ms(pgBare.p99)} ms; the rules' floor's statement / the bare anchor's: `
          + `**${pct(pgFloor.tps, pgBare.tps)}**; the check's statement / the floor's: ${pct(pgCheckPool.tps, pgFloor.tps)}.`,
        `- its statement on a leased token / with a token taken per request (${CONNECTIONS} clients): ${pct(pgCheckConns.tps, pgCheckToken.tps)}.`,
        `- subscriptions?limit=100 over HTTP / pgbench of its SQL: **${pct(list.rps, pgList.tps)}** (goal >= 85%).`,
      ];
    } else {
      log('pgbench not found (PATH, /usr/lib/postgresql/*/bin): its rows are skipped');
      pgLines = ['pgbench: not installed on this machine (looked in PATH and /usr/lib/postgresql/*/bin): its rows are skipped in this run.'];
    }
    const body = [
      `Run ${started} by \`npx tsx bench/read/run.ts\` on ${machineLine(version)} (1-minute load before the runs: ${loadBefore.split(' ')[0]}).`,
      `Data: ${MEMBERS.toLocaleString('en')} members, ${(2 * MEMBERS).toLocaleString('en')} subscriptions, ${MEMBERS.toLocaleString('en')} ledger rows with jsonb sources and benefits, ${EVENTS.toLocaleString('en')} events. `
        + `${CONNECTIONS} connections, ${DURATION} s per run after a ${WARMUP} s warm-up on the same server; API and anchor pools of ${POOL}; `
        + 'autocannon, the servers, PostgreSQL and pgbench share the machine. The API writes its access log (one JSON line per request) to a file; '
        + 'rate limits are lifted (a burst of 10^9: leases of 20 tokens, growing to 100 for a busy key).',
      '',
      `**Bare anchor** (issue 33): a bare Express 5 + pg server with the API's pool size (${POOL}) answering the same GET /v1/entitlements/check `
        + 'with a named prepared statement calling one plain plpgsql function that sets the tenant with set_config and reads copies of the same '
        + 'seeded ledger rows under their own RLS policy, no function of the project (bench/read/bare-anchor-server.ts). '
        + 'The old anchor (a second row) sends an unnamed statement calling a SQL function over billing.current_community_id().',
      '',
      'HTTP (autocannon):',
      '',
      '| server / endpoint | req/s | p50 ms | p99 ms | RSS MB | server CPU us/req | machine CPU busy | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|',
      httpRow(bare), httpRow(floor), httpRow(floor50), httpRow(old), httpRow(check), httpRow(check50), httpRow(list),
      '',
      ...pgLines,
      '',
      'Operator dashboard pages on the same data (an owner signed in; 20 requests in a row per page after one warm-up, while nothing else runs):',
      '',
      '| page | status | p50 ms | p95 ms | max ms | HTML kB |',
      '|---|---:|---:|---:|---:|---:|',
      ...pages.map((p) => `| ${p.page} | ${p.status} | ${p.p50.toFixed(1)} | ${p.p95.toFixed(1)} | ${p.max.toFixed(1)} | ${p.kb.toFixed(0)} |`),
      '',
      'Ratios, each from figures of this run:',
      '',
      `- entitlement check / bare anchor: **${pct(check.rps, bare.rps)}** with one key, **${pct(check50.rps, bare.rps)}** with 50 keys (goal of issue 33: >= 100%); `
        + `p99 ${check.p99} / ${check50.p99} ms against the bare anchor's ${bare.p99} ms: **${(check.p99 / bare.p99).toFixed(2)}x** / **${(check50.p99 / bare.p99).toFixed(2)}x** (goal <= 1.5x); `
        + `RSS ${check.rssMb.toFixed(0)} MB against ${bare.rssMb.toFixed(0)} MB.`,
      `- the rules' floor / bare anchor: **${pct(floor.rps, bare.rps)}** with one key, **${pct(floor50.rps, bare.rps)}** with 50 keys; p99 `
        + `${(floor.p99 / bare.p99).toFixed(2)}x / ${(floor50.p99 / bare.p99).toFixed(2)}x the bare anchor's. The floor is the most any server keeping the check's rules `
        + 'can reach with the anchor\'s own parts (Express, pg, a plpgsql function): what bounds item 2 of issue 33.',
      `- entitlement check / the rules' floor: **${pct(check.rps, floor.rps)}** with one key, **${pct(check50.rps, floor50.rps)}** with 50 keys; `
        + `p99 ${(check.p99 / floor.p99).toFixed(2)}x / ${(check50.p99 / floor50.p99).toFixed(2)}x the floor's.`,
      `- entitlement check / old anchor: ${pct(check.rps, old.rps)} with one key (bare anchor / old anchor: ${pct(bare.rps, old.rps)}).`,
      ...pgRatios,
    ].join('\n');
    process.stdout.write(`\n${body}\n`);
    writeResultsSection('## Read API', body);
    log('wrote the "Read API" section of bench/RESULTS.md');
  } finally {
    anchor?.stop();
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
