// Read API benchmark: `npx tsx bench/read/run.ts`.
// Creates its own database on DATABASE_URL's server (default: the machine's
// PostgreSQL at 127.0.0.1:5432), seeds 100,000 members, 200,000 subscriptions and
// 1,000,000 events, starts the API in a child process with rate limits lifted, and
// measures with autocannon (50 connections) GET /v1/entitlements/check and
// GET /v1/subscriptions?limit=100. pgbench then runs the exact SQL each endpoint
// runs (select billing.api_call(...) with the same arguments) at the same
// concurrency: the database's own ceiling for that request.
// Env: BENCH_DURATION (seconds, default 20), BENCH_CONNECTIONS (50), PG_POOL_SIZE (API pool, 8:
// on two vCPUs 8 beat 16 and 4), BENCH_KEEP_DB=1 (keep the
// database afterwards), BENCH_REUSE_DB=1 (reuse a kept one: no reseeding).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { hashKey } from '../../src/core/ids';
import { withDatabase } from '../../src/db/migrate';
import { createBenchDatabase } from '../support';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = 'billing_bench_read';
const DURATION = Number(process.env.BENCH_DURATION ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const PORT = Number(process.env.BENCH_PORT ?? 3901);
const MEMBERS = 100_000;
const LIMITS = { key_per_minute: 1e9, key_burst: 1e9, ip_per_minute: 1e9, ip_burst: 1e9 };

// autocannon ships no type declarations: the part used here.
interface AutocannonResult { requests: { average: number }; latency: { p50: number; p99: number }; errors: number; non2xx: number }
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

function startServer(url: string): Promise<{ stop(): void; stats(): Promise<ServerStats> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'server.ts')], {
    env: {
      ...process.env, DATABASE_URL: url, NODE_ENV: 'production', BENCH_PORT: String(PORT),
      RATE_LIMIT_KEY_PER_MINUTE: String(LIMITS.key_per_minute), RATE_LIMIT_KEY_BURST: String(LIMITS.key_burst),
      RATE_LIMIT_IP_PER_MINUTE: String(LIMITS.ip_per_minute), RATE_LIMIT_IP_BURST: String(LIMITS.ip_burst),
      PG_POOL_SIZE: process.env.PG_POOL_SIZE ?? '8',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`API exited with ${code}`)));
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('listening')) {
        resolve({
          stop: () => child.kill('SIGTERM'),
          stats: async () => (await (await fetch(`http://127.0.0.1:${PORT}/__rss`)).json()) as ServerStats,
        });
      }
    });
  });
}

interface HttpResult { name: string; rps: number; p50: number; p99: number; errors: number; non2xx: number; rssMb: number; apiCpuUs: number; machineBusy: number }

async function measureHttp(name: string, key: string, pathFor: () => string, stats: () => Promise<ServerStats>): Promise<HttpResult> {
  const run = (duration: number) => autocannon({
    url: `http://127.0.0.1:${PORT}`,
    connections: CONNECTIONS,
    duration,
    headers: { authorization: `Bearer ${key}` },
    requests: [{ method: 'GET', setupRequest: (req: Record<string, unknown>) => ({ ...req, path: pathFor() }) }],
  });
  await run(3); // warm-up: connections, plan caches
  let peak = 0;
  const before = await stats();
  const cpu0 = machineCpu();
  const timer = setInterval(() => { stats().then((s) => { peak = Math.max(peak, s.rss); }).catch(() => {}); }, 1000);
  const r = await run(DURATION);
  clearInterval(timer);
  const cpu1 = machineCpu();
  const after = await stats();
  peak = Math.max(peak, after.rss);
  const total = r.requests.average * DURATION;
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

function pgbench(url: string, name: string, sql: string): PgbenchResult {
  const file = path.join(os.tmpdir(), `bench-read-${process.pid}-${name.replace(/\W+/g, '_')}.sql`);
  fs.writeFileSync(file, sql);
  const out = execFileSync('pgbench', ['-n', '-M', 'prepared', '-c', String(CONNECTIONS), '-j', String(Math.min(os.cpus().length, CONNECTIONS)),
    '-T', String(DURATION), '-f', file, url], { env: { ...process.env, PGOPTIONS: '-c role=billing_api' }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  fs.unlinkSync(file);
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const latencyMs = Number(/latency average = ([\d.]+) ms/.exec(out)?.[1]);
  log(`pgbench ${name}: ${tps.toFixed(0)} tps, latency average ${latencyMs} ms`);
  return { name, tps, latencyMs };
}

// A SQL string literal; colons are spelled chr(58) because pgbench reads ":name" as a variable.
const lit = (s: string) => `('${s.replace(/'/g, "''").replace(/:/g, "' || chr(58) || '")}')`;

function apiCallSql(keyHash: string, scope: string, op: string, args: string): string {
  return `select billing.api_call(${lit(keyHash)}, '127.0.0.1', ${lit(JSON.stringify(LIMITS))}::jsonb, ${lit(scope)}, ${lit(op)}, ${args}, null);\n`;
}

async function machine(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const v = (await c.query<{ v: string }>('select current_setting($$server_version$$) as v')).rows[0].v;
  const settings = (await c.query<{ name: string; setting: string; unit: string | null }>(
    `select name, setting, unit from pg_settings where name in ('shared_buffers', 'max_connections', 'synchronous_commit')`)).rows
    .map((s) => `${s.name}=${s.setting}${s.unit ?? ''}`).join(', ');
  await c.end();
  return `${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, PostgreSQL ${v} (${settings}), Node ${process.version}`;
}

async function main() {
  log(`creating ${DB} on ${new URL(SERVER).host}`);
  let url: string;
  let key: string;
  if (process.env.BENCH_REUSE_DB === '1') {
    // Development shortcut: keep the seeded database, re-run every (idempotent) fixture
    // of db/migrations/fixtures so changed functions apply, then make a new key.
    url = withDatabase(SERVER, DB);
    const fixtures = path.join(__dirname, '../../db/migrations/fixtures');
    for (const file of fs.readdirSync(fixtures).filter((f) => f.endsWith('.sql')).sort()) {
      execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-d', url, '-f', path.join(fixtures, file)], { stdio: ['ignore', 'ignore', 'inherit'] });
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
  const server = await startServer(url);
  const rnd = () => 1 + Math.floor(Math.random() * MEMBERS);
  try {
    const loadBefore = os.loadavg()[0];
  const check = await measureHttp('GET /v1/entitlements/check', key, () => `/v1/entitlements/check?platform=discord&platform_uid=d${rnd()}`, server.stats);
    const list = await measureHttp('GET /v1/subscriptions?limit=100', key, () => '/v1/subscriptions?limit=100', server.stats);
    server.stop();
    const pgCheck = pgbench(url, 'entitlements_check', `\\set n random(1, ${MEMBERS})\n`
      + apiCallSql(hash, 'members:read', 'entitlements_check', `jsonb_build_object('platform', 'discord', 'platform_uid', 'd' || (:n)::text)`));
    const pgList = pgbench(url, 'subscriptions_list', apiCallSql(hash, 'subscriptions:read', 'subscriptions_list', `${lit('{"limit":100}')}::jsonb`));
    const m = await machine(url);
    const row = (h: HttpResult, p: PgbenchResult) =>
      `| ${h.name} | ${h.rps.toFixed(0)} | ${h.p50} | ${h.p99} | ${h.rssMb.toFixed(0)} | ${h.apiCpuUs.toFixed(0)} | ${(100 * h.machineBusy).toFixed(0)}% `
      + `| ${p.tps.toFixed(0)} (avg ${p.latencyMs} ms) | ${(100 * h.rps / p.tps).toFixed(0)}% | ${h.errors + h.non2xx} |`;
    const table = [
      `Machine: ${m}; 1-minute load average ${loadBefore.toFixed(1)} before the runs, ${os.loadavg()[0].toFixed(1)} after. Data: ${MEMBERS.toLocaleString('en')} members, 200,000 subscriptions, 1,000,000 events. `
        + `${CONNECTIONS} connections, ${DURATION} s per run (after a 3 s warm-up); API pool ${process.env.PG_POOL_SIZE ?? '8'}.`,
      '',
      '| endpoint | req/s | p50 ms | p99 ms | API RSS MB | API CPU us/req | machine CPU busy | pgbench same SQL, tps | HTTP / pgbench | errors |',
      '|---|---|---|---|---|---|---|---|---|---|',
      row(check, pgCheck),
      row(list, pgList),
    ].join('\n');
    process.stdout.write(table + '\n');
  } finally {
    server.stop();
    if (process.env.BENCH_KEEP_DB !== '1' && process.env.BENCH_REUSE_DB !== '1') {
      const admin = new pg.Client({ connectionString: withDatabase(SERVER, 'postgres') });
      await admin.connect();
      await admin.query(`drop database if exists ${DB} with (force)`);
      await admin.end();
    }
  }
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${err?.stack ?? err}\n`); process.exit(1); });
