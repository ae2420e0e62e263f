// One machine's cluster, measured (issue 32 item 5): `npx tsx bench/cluster/run.ts` (or
// `npm run bench -- cluster`). A measurement, never a test.
//
// On loopback, under a temp directory removed at the end, with the Debian binaries of
// PostgreSQL 15 (/usr/lib/postgresql/15/bin, PG_BIN to change; as root every server runs
// as the postgres system user, as src/db/embedded.ts and test/support/pgbouncer.ts do):
//   1. a primary (initdb, wal_level=replica, a pg_hba line for replication), migrated
//      and seeded as bench/read seeds (bench/read/seed.sql, smaller: BENCH_MEMBERS);
//   2. two streaming standbys (`pg_basebackup -R`), PgBouncer (Debian's, in transaction
//      mode, test/support/pgbouncer.ts), two worker processes (WORKER_DATABASE_URL,
//      direct), and the API processes of three setups, all running throughout:
//        single server: one API process on the primary directly (DATABASE_URL);
//        pooled: two API processes through PgBouncer (DATABASE_POOLER=transaction,
//          APP_DATABASE_URL), reads on the primary;
//        cluster: two more, through PgBouncer too, given the standbys
//          (READ_DATABASE_URL, comma-separated; READ_MAX_LAG from BENCH_READ_MAX_LAG,
//          else the service's default);
//   3. the setups in turn, BENCH_ROUNDS times (A B C A B C, so that other work on the
//      machine falls on each alike): the entitlement check under autocannon
//      (BENCH_CONNECTIONS, split over the setup's APIs) and, at the same time, a write
//      mix (BENCH_WRITERS loops: cancel then reactivate a subscription through the API,
//      each write followed at once by a read of that subscription by another key through
//      the other API process, and by the same read as SQL on a standby: a read that does
//      not show the write is stale); replay_lag sampled from pg_stat_replication on the
//      primary every 200 ms, and each server's transactions in the bench database
//      counted (pg_stat_database: where the API's reads really ran).
// Prints a table and writes it under "## Cluster" in bench/RESULTS.md.
// Env: BENCH_MEMBERS (20000), BENCH_EVENTS (20000), BENCH_DURATION (10 s measured per
// setup and round), BENCH_WARMUP (3 s), BENCH_ROUNDS (2), BENCH_CONNECTIONS (50),
// BENCH_WRITERS (4), PG_POOL_SIZE (8, each API's pool), BENCH_PGBOUNCER_POOL (8 server connections), BENCH_READ_MAX_LAG,
// PG_BIN, BENCH_KEEP_DIR=1 (keep the temp directory, for a look at the servers' logs).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { freePort } from '../../src/db/embedded';
import { derivedPassword, ensureLogin, loginUrl } from '../../src/db/logins';
import { applyMigrations, withDatabase } from '../../src/db/migrate';
import { autocannon, machineCpu, machineLine, writeResultsSection } from '../support';
import { pgbouncerBinary, startPgBouncer, type PgBouncer } from '../../test/support/pgbouncer';

const BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const DB = 'billing_bench_cluster';
const MEMBERS = Number(process.env.BENCH_MEMBERS ?? 20_000);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WRITERS = Number(process.env.BENCH_WRITERS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const POOL = Number(process.env.PG_POOL_SIZE ?? 8);
const BOUNCER_POOL = Number(process.env.BENCH_PGBOUNCER_POOL ?? 8);
const READ_MAX_LAG = process.env.BENCH_READ_MAX_LAG;
const LIMITS = { RATE_LIMIT_KEY_PER_MINUTE: '1000000000', RATE_LIMIT_KEY_BURST: '1000000000', RATE_LIMIT_IP_PER_MINUTE: '1000000000', RATE_LIMIT_IP_BURST: '1000000000' };

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------- servers

/** As root, PostgreSQL and PgBouncer run as the postgres system user (they refuse root). */
const runAs: { uid: number; gid: number } | undefined = process.getuid?.() === 0
  ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) }
  : undefined;

const bin = (name: string) => path.join(BIN, name);

function runTool(name: string, args: string[]): void {
  execFileSync(bin(name), args, { ...(runAs ?? {}), stdio: ['ignore', 'pipe', 'pipe'], cwd: '/' });
}

interface Server { name: string; port: number; dir: string; child: ChildProcess; url(db: string, user?: string): string }

async function startServer(root: string, name: string, dir: string, port: number): Promise<Server> {
  const logFile = path.join(root, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  if (runAs) fs.fchownSync(fd, runAs.uid, runAs.gid);
  const child = spawn(bin('postgres'), ['-D', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${root}`],
    { ...(runAs ?? {}), stdio: ['ignore', fd, fd], cwd: '/' });
  fs.closeSync(fd);
  const server: Server = { name, port, dir, child, url: (db, user = 'postgres') => `postgres://${user}@127.0.0.1:${port}/${db}` };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`${name} exited: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    const c = new pg.Client({ connectionString: server.url('postgres') });
    try {
      await c.connect();
      await c.end();
      return server;
    } catch {
      await c.end().catch(() => {});
      if (i > 300) throw new Error(`${name} did not start: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
      await sleep(100);
    }
  }
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => s.child.once('exit', () => resolve()));
  s.child.kill('SIGINT'); // fast shutdown
  await Promise.race([exited, sleep(20_000)]);
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql, values)).rows;
  } finally {
    await c.end();
  }
}

// ---------------------------------------------------------------- service processes

interface Proc { name: string; port?: number; stop(): Promise<void> }

/** A child of ours (api.ts or worker.ts); resolves once it prints `ready` (its stderr to a log in root). */
function startProc(root: string, name: string, script: string, ready: string, env: NodeJS.ProcessEnv, port?: number): Promise<Proc> {
  const logFile = path.join(root, `${name}.log`);
  const fd = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, script)], {
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'warn', PG_POOL_SIZE: String(POOL), ...LIMITS, ...env },
    stdio: ['ignore', 'pipe', fd],
  });
  fs.closeSync(fd);
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${name} exited with ${code}: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`));
    child.once('exit', onExit);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (!out.includes(ready)) return;
      out = '';
      resolve({
        name, port,
        stop: async () => {
          child.off('exit', onExit);
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise<void>((r) => child.once('exit', () => r()));
          child.kill('SIGTERM');
          await Promise.race([exited, sleep(10_000)]);
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        },
      });
    });
  });
}

// ---------------------------------------------------------------- load

/** Busy and total jiffies of the whole machine (/proc/stat). */
const pct = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]);

interface WriteStats {
  writes: number; failed: number; latencies: number[]; probes: number; stale: number; firstFailure?: string;
  /** The same probe as SQL straight on a standby (round robin), at the same moment: what a read there would see. */
  standbyProbes: number; standbyStale: number; perStandby: number[];
}

/**
 * WRITERS loops until `until`: each owns its own subscriptions (no two writers on one
 * row), cancels one (status cancelling: access is kept, so the check's answers do not
 * change), reads it back at once with the read key through the next API process, then
 * reactivates it (active again) and reads it back likewise.
 */
async function writeMix(apis: string[], writeKey: string, readKey: string, subs: string[][], until: () => boolean,
  standbys: pg.Pool[]): Promise<WriteStats> {
  const stats: WriteStats = { writes: 0, failed: 0, latencies: [], probes: 0, stale: 0, standbyProbes: 0, standbyStale: 0, perStandby: standbys.map(() => 0) };
  let next = 0;
  const onStandby = async (sub: string, expect: string) => {
    if (standbys.length === 0) return;
    const i = next++ % standbys.length;
    stats.perStandby[i]++;
    const { rows } = await standbys[i].query<{ status: string }>('select status from billing.subscriptions where id = $1', [sub]);
    stats.standbyProbes++;
    if (rows[0]?.status !== expect) stats.standbyStale++;
  };
  const call = async (base: string, key: string, method: string, p: string) => {
    const res = await fetch(`${base}${p}`, { method, headers: { authorization: `Bearer ${key}` } });
    const body = await res.text();
    return { status: res.status, body };
  };
  const step = async (w: number, sub: string, action: 'cancel' | 'reactivate', expect: string) => {
    const writeApi = apis[w % apis.length];
    const readApi = apis[(w + 1) % apis.length];
    const t0 = performance.now();
    const r = await call(writeApi, writeKey, 'POST', `/v1/subscriptions/${sub}/${action}`);
    stats.latencies.push(performance.now() - t0);
    if (r.status >= 300) {
      stats.failed++;
      stats.firstFailure ??= `${action} ${r.status} ${r.body.slice(0, 200)}`;
      return false;
    }
    stats.writes++;
    const [g] = await Promise.all([call(readApi, readKey, 'GET', `/v1/subscriptions/${sub}`), onStandby(sub, expect)]);
    if (g.status !== 200) {
      stats.failed++;
      stats.firstFailure ??= `read after ${action} ${g.status} ${g.body.slice(0, 200)}`;
      return true;
    }
    stats.probes++;
    if ((JSON.parse(g.body) as { status?: string }).status !== expect) stats.stale++;
    return true;
  };
  await Promise.all(subs.map(async (mine, w) => {
    for (let i = 0; !until(); i++) {
      const sub = mine[i % mine.length];
      if (await step(w, sub, 'cancel', 'cancelling')) await step(w, sub, 'reactivate', 'active');
    }
  }));
  return stats;
}

interface LagStats { samples: number; p50: number; p99: number; max: number; maxBytes: number; standbys: number }

/** replay_lag (ms; null, i.e. caught up and idle, counts as 0) and bytes behind, from the primary's pg_stat_replication. */
function sampleLag(primaryUrl: string): { stop(): Promise<LagStats> } {
  const lags: number[] = [];
  let maxBytes = 0;
  let standbys = 0;
  let running = true;
  const c = new pg.Client({ connectionString: primaryUrl });
  const loop = (async () => {
    await c.connect();
    while (running) {
      const { rows } = await c.query<{ ms: number | null; bytes: string | null }>(
        `select extract(epoch from replay_lag) * 1000 as ms, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::text as bytes from pg_stat_replication`);
      standbys = Math.max(standbys, rows.length);
      for (const r of rows) {
        lags.push(r.ms === null ? 0 : Number(r.ms));
        maxBytes = Math.max(maxBytes, Number(r.bytes ?? 0));
      }
      await sleep(200);
    }
    await c.end();
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      lags.sort((a, b) => a - b);
      return { samples: lags.length, p50: pct(lags, 0.5), p99: pct(lags, 0.99), max: lags[lags.length - 1] ?? NaN, maxBytes, standbys };
    },
  };
}

/** Transactions committed in the bench database, per server (pg_stat_database; a standby counts its own). */
async function xacts(servers: Server[]): Promise<number[]> {
  return Promise.all(servers.map(async (s) => Number((await query<{ n: string }>(s.url('postgres'),
    `select pg_stat_force_next_flush(), (select xact_commit + xact_rollback from pg_stat_database where datname = $1)::text as n`, [DB]))[0].n)));
}

interface Phase {
  name: string; apis: number; rps: number; perApi: number[]; p50: number; p99: number; errors: number;
  writes: WriteStats; lag: LagStats | null; xactShare: number[] | null; busy: number;
}

/** The check's load split over `apis` (autocannon, CONNECTIONS in all) and the write mix, at once, after a warm-up of the check alone. */
async function measure(name: string, apis: string[], keys: { check: string; write: string; read: string }, subs: string[][],
  lagOf: string | null, servers: Server[]): Promise<Phase> {
  const standbyPools = servers.slice(1).map((sv) => new pg.Pool({ connectionString: sv.url(DB), max: 2 }));
  const rnd = () => 1 + Math.floor(Math.random() * MEMBERS);
  const load = (duration: number) => Promise.all(apis.map((url, i) => autocannon({
    url, duration,
    connections: Math.floor(CONNECTIONS / apis.length) + (i < CONNECTIONS % apis.length ? 1 : 0),
    headers: { authorization: `Bearer ${keys.check}` },
    requests: [{ method: 'GET', setupRequest: (req: Record<string, unknown>) => ({ ...req, path: `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}` }) }],
  })));
  log(`${name}: warm-up ${WARMUP} s`);
  await load(WARMUP);
  log(`${name}: measuring ${DURATION} s`);
  const lag = lagOf ? sampleLag(lagOf) : null;
  const x0 = await xacts(servers);
  const cpu0 = machineCpu();
  const end = Date.now() + DURATION * 1000;
  const [results, writes] = await Promise.all([load(DURATION), writeMix(apis, keys.write, keys.read, subs, () => Date.now() >= end, standbyPools)]);
  const cpu1 = machineCpu();
  await Promise.all(standbyPools.map((pool) => pool.end()));
  await sleep(500); // the probes' backends flush their statistics as they exit
  const x1 = await xacts(servers);
  const lagStats = lag ? await lag.stop() : null;
  const perApi = results.map((r) => r.requests.average);
  const rps = perApi.reduce((a, b) => a + b, 0);
  // Both autocannons carry the same load: the request-weighted p50, the worse p99.
  const phase: Phase = {
    name, apis: apis.length, rps, perApi,
    p50: results.reduce((a, r) => a + r.latency.p50 * r.requests.average, 0) / Math.max(rps, 1),
    p99: Math.max(...results.map((r) => r.latency.p99)),
    errors: results.reduce((a, r) => a + r.errors + r.non2xx, 0),
    writes,
    lag: lagStats,
    // The standbys' count less this script's own probes there (one transaction each, round robin).
    xactShare: servers.length > 1 ? x1.map((v, i) => v - x0[i] - (i === 0 ? 0 : writes.perStandby[i - 1])) : null,
    busy: (cpu1.busy - cpu0.busy) / Math.max(cpu1.total - cpu0.total, 1),
  };
  writes.latencies.sort((a, b) => a - b);
  log(`${name}: check ${rps.toFixed(0)} req/s (${perApi.map((r) => r.toFixed(0)).join(' + ')}), p50 ${phase.p50.toFixed(1)} ms, p99 ${phase.p99} ms, errors ${phase.errors}; `
    + `writes ${(writes.writes / DURATION).toFixed(0)}/s (failed ${writes.failed}${writes.firstFailure ? `, first: ${writes.firstFailure}` : ''}), `
    + `stale ${writes.stale}/${writes.probes}, on a standby ${writes.standbyStale}/${writes.standbyProbes}; machine ${(100 * phase.busy).toFixed(0)}% busy`
    + (lagStats ? `; replay lag p50 ${lagStats.p50.toFixed(1)} ms, p99 ${lagStats.p99.toFixed(1)} ms, max ${lagStats.max.toFixed(1)} ms (${lagStats.standbys} standbys)` : '')
    + (phase.xactShare ? `; transactions per server ${phase.xactShare.join(' / ')}` : ''));
  return phase;
}

// ---------------------------------------------------------------- main

async function main() {
  // What the run needs, before anything starts: Debian's postgresql-15 and pgbouncer packages.
  for (const tool of ['initdb', 'postgres', 'pg_basebackup', 'psql']) {
    if (!fs.existsSync(bin(tool))) throw new Error(`${bin(tool)} is missing: install Debian's postgresql-15 (or set PG_BIN)`);
  }
  pgbouncerBinary();
  const started = new Date().toISOString();
  const loadBefore = os.loadavg()[0].toFixed(1);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-cluster-'));
  if (runAs) fs.chownSync(root, runAs.uid, runAs.gid);
  const servers: Server[] = [];
  const procs: Proc[] = [];
  let bouncer: PgBouncer | null = null;
  const cleanup = async () => {
    for (const p of procs.splice(0).reverse()) await p.stop().catch(() => {});
    await bouncer?.stop().catch(() => {});
    bouncer = null;
    for (const s of servers.splice(0).reverse()) await stopServer(s).catch(() => {});
    if (process.env.BENCH_KEEP_DIR === '1') log(`kept ${root}`);
    else fs.rmSync(root, { recursive: true, force: true });
  };
  process.once('SIGINT', () => { void cleanup().then(() => process.exit(130)); });
  try {
    // 1. The primary.
    const primaryDir = path.join(root, 'primary');
    runTool('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
    fs.appendFileSync(path.join(primaryDir, 'postgresql.conf'), [
      '', 'wal_level = replica', 'max_wal_senders = 10', 'hot_standby = on', 'max_connections = 200',
      'shared_buffers = 128MB', 'wal_keep_size = 512MB', 'hot_standby_feedback = on', '',
    ].join('\n'));
    fs.appendFileSync(path.join(primaryDir, 'pg_hba.conf'), '\nhost replication all 127.0.0.1/32 trust\n');
    const primary = await startServer(root, 'primary', primaryDir, await freePort());
    servers.push(primary);
    const version = (await query<{ v: string }>(primary.url('postgres'), `select current_setting('server_version') as v`))[0].v;
    log(`primary PostgreSQL ${version} on 127.0.0.1:${primary.port}; migrating and seeding ${MEMBERS} members`);
    await query(primary.url('postgres'), `create database ${DB}`);
    const ownerUrl = primary.url(DB);
    let t0 = Date.now();
    await applyMigrations(ownerUrl, { includeCurrent: true });
    log(`migrated in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const owner = new pg.Pool({ connectionString: ownerUrl, max: 1 });
    const community = await createCommunity(owner, 'Bench community');
    const keys = {
      check: (await createKey(owner, community.id, ['members:read'])).key,
      write: (await createKey(owner, community.id, ['subscriptions:read', 'subscriptions:write'])).key,
      read: (await createKey(owner, community.id, ['subscriptions:read'])).key,
    };
    t0 = Date.now();
    execFileSync(bin('psql'), ['-q', '-v', 'ON_ERROR_STOP=1', '-v', `community=${community.id}`, '-v', `members=${MEMBERS}`, '-v', `events=${EVENTS}`,
      '-d', ownerUrl, '-f', path.join(__dirname, '..', 'read', 'seed.sql')], { stdio: ['ignore', 'ignore', 'inherit'] });
    log(`seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    // Each writer's own subscriptions: current, active ones.
    const ids = (await owner.query<{ id: string }>(`select id from billing.subscriptions where community_id = $1 and status = 'active' order by id limit $2`,
      [community.id, WRITERS * 50])).rows.map((r) => r.id);
    await owner.end();
    const subs = Array.from({ length: WRITERS }, (_, w) => ids.filter((_, i) => i % WRITERS === w));
    await ensureLogin(ownerUrl, 'billing_app');
    const workerUrl = await ensureLogin(ownerUrl, 'billing_worker');
    const encryptionKey = crypto.randomBytes(32).toString('base64');
    const workerEnv = { DATABASE_URL: ownerUrl, WORKER_DATABASE_URL: workerUrl, BENCH_ENCRYPTION_KEY: encryptionKey };

    // 2. The standbys, PgBouncer, and every setup's processes, all running from here on.
    const standbys: Server[] = [];
    for (const n of [1, 2]) {
      const dir = path.join(root, `standby${n}`);
      t0 = Date.now();
      runTool('pg_basebackup', ['-D', dir, '-R', '-X', 'stream', '-c', 'fast',
        '-d', `host=127.0.0.1 port=${primary.port} user=postgres application_name=standby${n}`]);
      const s = await startServer(root, `standby${n}`, dir, await freePort());
      servers.push(s);
      standbys.push(s);
      log(`standby${n} on 127.0.0.1:${s.port} (base backup and start ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    }
    for (let i = 0; ; i++) {
      const rows = await query<{ n: number }>(primary.url('postgres'), `select count(*)::int as n from pg_stat_replication where state = 'streaming'`);
      if (rows[0].n === standbys.length) break;
      if (i > 100) throw new Error(`${rows[0].n} of ${standbys.length} standbys streaming`);
      await sleep(100);
    }
    bouncer = await startPgBouncer(primary.url('postgres'), { billing_app: derivedPassword(ownerUrl, 'billing_app') }, BOUNCER_POOL);
    const appLogin = loginUrl(ownerUrl, 'billing_app');
    const pooledEnv = { DATABASE_URL: ownerUrl, APP_DATABASE_URL: bouncer.through(appLogin), DATABASE_POOLER: 'transaction' };
    const readUrls = standbys.map((s) => { const u = new URL(appLogin); u.port = String(s.port); return u.toString(); });
    const clusterEnv = { ...pooledEnv, READ_DATABASE_URL: readUrls.join(','), ...(READ_MAX_LAG ? { READ_MAX_LAG } : {}) };
    const start = async (name: string, env: NodeJS.ProcessEnv) => {
      const api = await startApi(root, name, env);
      procs.push(api);
      return apiUrl(api);
    };
    const setups = [
      { name: 'single server: 1 API, direct to the primary', apis: [await start('single-api', { DATABASE_URL: ownerUrl })] },
      { name: 'pooled: 2 APIs via PgBouncer, reads on the primary', apis: [await start('pooled-api1', pooledEnv), await start('pooled-api2', pooledEnv)] },
      { name: 'cluster: 2 APIs via PgBouncer, READ_DATABASE_URL = the 2 standbys', apis: [await start('cluster-api1', clusterEnv), await start('cluster-api2', clusterEnv)] },
    ];
    for (const n of [1, 2]) procs.push(await startProc(root, `worker${n}`, 'worker.ts', 'ready', workerEnv));

    // 3. The setups in turn, ROUNDS times (A B C A B C: another load on the machine falls on each alike).
    const rounds: Phase[][] = setups.map(() => []);
    for (let r = 1; r <= ROUNDS; r++) {
      for (const [i, setup] of setups.entries()) {
        rounds[i].push(await measure(`round ${r}, ${setup.name}`, setup.apis, keys, subs, primary.url('postgres'), servers));
      }
    }
    const jobsLeft = (await query<{ n: string }>(primary.url(DB), 'select count(*)::text as n from graphile_worker._private_jobs')
      .catch(() => [{ n: '?' }]))[0].n;
    await cleanup();

    // 5. The report.
    const f0 = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : '-');
    const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '-');
    const row = (p: Phase) => {
      const w = p.writes;
      const lag = p.lag ? `${f1(p.lag.p50)} / ${f1(p.lag.p99)} / ${f1(p.lag.max)} (${(p.lag.maxBytes / 1024).toFixed(0)} kB)` : '-';
      const share = p.xactShare ? p.xactShare.map((n) => n.toLocaleString('en')).join(' / ') : '(one server)';
      return `| ${p.name} | ${p.apis} | ${f0(p.rps)}${p.apis > 1 ? ` (${p.perApi.map(f0).join(' + ')})` : ''} | ${f1(p.p50)} | ${p.p99} | ${p.errors} | `
        + `${f0(w.writes / DURATION)} | ${f1(pct(w.latencies, 0.5))} / ${f1(pct(w.latencies, 0.99))} | ${w.failed} | ${w.stale} of ${w.probes} | ${w.standbyProbes ? `${w.standbyStale} of ${w.standbyProbes}` : '-'} | ${lag} | ${share} | ${f0(100 * p.busy)}% |`;
    };
    const cluster = rounds[2];
    const mean = (ps: Phase[], f: (p: Phase) => number) => ps.reduce((a, p) => a + f(p), 0) / ps.length;
    const sum = (ps: Phase[], f: (p: Phase) => number) => ps.reduce((a, p) => a + f(p), 0);
    const rps = rounds.map((ps) => mean(ps, (p) => p.rps));
    const spread = Math.max(...rounds.map((ps) => 100 * (Math.max(...ps.map((p) => p.rps)) / Math.min(...ps.map((p) => p.rps)) - 1)));
    const wps = rounds.map((ps) => mean(ps, (p) => p.writes.writes / DURATION));
    const p99s = rounds.map((ps) => ps.map((p) => p.p99).join(', '));
    const onStandbys = sum(cluster, (p) => (p.xactShare ?? []).slice(1).reduce((a, b) => a + b, 0));
    const onPrimary = sum(cluster, (p) => p.xactShare?.[0] ?? 0);
    const routed = onStandbys > 100 * ROUNDS;
    const stale = (ps: Phase[]) => `${sum(ps, (p) => p.writes.stale)} of ${sum(ps, (p) => p.writes.probes)}`;
    const standbyStale = sum(rounds.flat(), (p) => p.writes.standbyStale);
    const standbyProbes = sum(rounds.flat(), (p) => p.writes.standbyProbes);
    const lags = rounds.flat().flatMap((p) => (p.lag ? [p.lag] : []));
    const body = [
      `Run ${started} by \`npx tsx bench/cluster/run.ts\` on ${machineLine(`${version} (Debian binaries, ${BIN})`)} (1-minute load before the run: ${loadBefore}${Number(loadBefore) > 1 ? '; other work shared the machine' : ''}).`,
      `All on loopback on this one machine: a primary and two streaming standbys (\`pg_basebackup -R\`, wal_level=replica, synchronous_commit on, no synchronous standby), `
        + `PgBouncer ${pgbouncerVersion()} in transaction mode (${BOUNCER_POOL} server connections), five API processes (one per setup below, all running throughout, `
        + 'idle when not measured) and two worker processes (direct, WORKER_DATABASE_URL), autocannon and the writers share its cores. '
        + `Data as bench/read seeds it, smaller: ${MEMBERS.toLocaleString('en')} members, ${(2 * MEMBERS).toLocaleString('en')} subscriptions, ${EVENTS.toLocaleString('en')} events. `
        + `The setups in turn, ${ROUNDS} rounds (A B C A B C); each: ${WARMUP} s warm-up of the check, then ${DURATION} s of GET /v1/entitlements/check over ${CONNECTIONS} connections `
        + `(split over its APIs) and, at the same time, ${WRITERS} writers looping cancel / reactivate of their own subscriptions through its APIs, each write followed at once by a GET `
        + 'of that subscription with another key through the other API process (a read that does not show the write is stale), and by the same read as SQL straight on a '
        + `standby (the two in turn). API pools of ${POOL}; rate limits lifted.`,
      '',
      '| setup, round | APIs | check req/s | p50 ms | p99 ms | check errors | writes/s | write p50 / p99 ms | write errors | stale reads (API) | stale on a standby (SQL) | replay lag p50 / p99 / max ms (max behind) | transactions: primary / standbys | machine CPU busy |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...rounds.flatMap((ps, i) => ps.map((p, r) => row({ ...p, name: `${setups[i].name}, round ${r + 1}` }))),
      '',
      `Mean of the rounds: check ${rps.map(f0).join(' / ')} req/s (single / pooled / cluster), p99 of each round ${p99s.join(' / ')} ms; `
        + `writes ${wps.map(f0).join(' / ')} per second.`,
      '',
      `- cluster / single server: check **${(100 * rps[2] / rps[0]).toFixed(0)}%** of the throughput, writes ${(100 * wps[2] / wps[0]).toFixed(0)}%; `
        + `pooled / single server: check ${(100 * rps[1] / rps[0]).toFixed(0)}%, writes ${(100 * wps[1] / wps[0]).toFixed(0)}%; the rounds of one setup differ by up to `
        + `${spread.toFixed(0)}% in check req/s. On one machine the added processes share the same ${os.cpus().length} cores: these ratios can show the topology's cost `
        + '(a pooler hop, unnamed statements parsed each time, WAL shipped and replayed twice) where it exceeds that spread, never what a cluster of machines would add.',
      routed
        ? `- Reads ran on the standbys in the cluster setup (${onStandbys.toLocaleString('en')} transactions there against ${onPrimary.toLocaleString('en')} on the primary); `
          + `stale reads through the API: ${stale(cluster)} reads right after another key's write.`
        : `- **The API did not route reads**: in the cluster setup the standbys committed ${onStandbys} transactions in the bench database (this script's own probes left out, to within a few) `
          + `while the primary committed ${onPrimary.toLocaleString('en')}: this branch's service ignores READ_DATABASE_URL (read routing, issue 32 item 1, is on another branch), `
          + 'so its figures are those of the pooled setup again, with the standbys only replaying; the lag is real, stale reads through the API cannot happen until reads go to a standby.',
      `- Stale on a standby: **${standbyStale} of ${standbyProbes}** (${(100 * standbyStale / Math.max(standbyProbes, 1)).toFixed(0)}%) reads on a standby, sent as soon as the write `
        + 'was answered, did not show it yet: what an API reading there without read-your-writes would answer another key.',
      `- replay_lag sampled every 200 ms on the primary in every round (${lags.reduce((a, l) => a + l.samples, 0)} samples over ${Math.max(0, ...lags.map((l) => l.standbys))} standbys; `
        + `null, caught up, counted as 0); the most behind: ${(Math.max(0, ...lags.map((l) => l.maxBytes)) / 1024).toFixed(0)} kB of WAL. `
        + `READ_MAX_LAG: ${READ_MAX_LAG ?? "the service's default"}. Worker jobs left in the queue at the end: ${jobsLeft}.`,
    ].join('\n');
    process.stdout.write(`\n${body}\n`);
    writeResultsSection('## Cluster', body);
    log('wrote the "Cluster" section of bench/RESULTS.md');
  } finally {
    await cleanup();
  }
}

async function startApi(root: string, name: string, env: NodeJS.ProcessEnv): Promise<Proc> {
  const port = await freePort();
  return startProc(root, name, 'api.ts', 'listening', { ...env, BENCH_PORT: String(port) }, port);
}

function apiUrl(p: Proc): string {
  return `http://127.0.0.1:${p.port}`;
}

function pgbouncerVersion(): string {
  try {
    const out = execFileSync(pgbouncerBinary(), ['--version'], { encoding: 'utf8' });
    return /(\d+\.\d+(\.\d+)?)/.exec(out)?.[1] ?? '?';
  } catch {
    return '?';
  }
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${err?.stack ?? err}\n`); process.exit(1); });
