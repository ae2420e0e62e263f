// Member search benchmark (issue 31 item 2): `npx tsx bench/members/run.ts` (or `npm run
// bench -- members`). Creates its own database on DATABASE_URL's server (default: the
// machine's PostgreSQL at 127.0.0.1:5432), seeds 100,000 members (bench/members/seed.sql),
// starts the API in a child process (bench/read/server.ts) with rate limits lifted, and
// times GET /v1/members searches and filters one request at a time, beside the anchor:
// the plain first page (GET /v1/members), the list as it was before search. Prints p50,
// p95 and max per request and writes them under "## Member search" in bench/RESULTS.md.
// Env: BENCH_REQUESTS (measured requests per case, default 200, after 20 warm-up ones),
// BENCH_KEEP_DB=1 (keep the database), BENCH_DB (default billing_bench_members).
import { execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { adminQuery, createBenchDatabase, machineLine, serviceNodeFlags, writeResultsSection } from '../support';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = process.env.BENCH_DB ?? 'billing_bench_members';
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const WARMUP = 20;
const PORT = Number(process.env.BENCH_PORT ?? 3911);
const MEMBERS = 100_000;

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const rnd = (n = MEMBERS) => 1 + Math.floor(Math.random() * n);

function startApi(url: string): Promise<{ stop(): void }> {
  const big = '1000000000';
  const child = spawn(process.execPath, [...serviceNodeFlags(), '--import', 'tsx', path.join(__dirname, '../read/server.ts')], {
    env: { ...process.env, NODE_ENV: 'production', BENCH_PORT: String(PORT), DATABASE_URL: url, PG_POOL_SIZE: '4',
      RATE_LIMIT_KEY_PER_MINUTE: big, RATE_LIMIT_KEY_BURST: big, RATE_LIMIT_IP_PER_MINUTE: big, RATE_LIMIT_IP_BURST: big },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`the API exited with ${code}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('listening')) resolve({ stop: () => { child.removeAllListeners('exit'); child.kill('SIGTERM'); } });
    });
  });
}

interface Case { name: string; path: () => string; path_shown: string }
interface Result { name: string; shown: string; p50: number; p95: number; max: number; rows: number }

async function measure(key: string, c: Case): Promise<Result> {
  const times: number[] = [];
  let rows = 0;
  for (let i = 0; i < WARMUP + REQUESTS; i++) {
    const t0 = performance.now();
    const res = await fetch(`http://127.0.0.1:${PORT}${c.path()}`, { headers: { authorization: `Bearer ${key}` } });
    const body = await res.json() as { data?: unknown[] };
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
    if (i >= WARMUP) { times.push(ms); rows += body.data?.length ?? 0; }
  }
  times.sort((a, b) => a - b);
  const at = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))];
  const r = { name: c.name, shown: c.path_shown, p50: at(0.5), p95: at(0.95), max: times[times.length - 1], rows: rows / REQUESTS };
  log(`${r.name}: p50 ${r.p50.toFixed(1)} ms, p95 ${r.p95.toFixed(1)} ms, max ${r.max.toFixed(1)} ms, ${r.rows.toFixed(1)} rows a page`);
  return r;
}

async function main() {
  log(`creating ${DB} on ${new URL(SERVER).host}`);
  const url = await createBenchDatabase(SERVER, DB);
  const owner = new pg.Pool({ connectionString: url, max: 1 });
  const community = await createCommunity(owner, 'Bench members');
  const key = (await createKey(owner, community.id, ['members:read'])).key;
  const t0 = Date.now();
  execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', '-v', `community=${community.id}`, '-d', url, '-f', path.join(__dirname, 'seed.sql')], { stdio: ['ignore', 'ignore', 'inherit'] });
  log(`seeded in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const tiers = (await owner.query<{ id: string; key: string }>('select id, key from billing.tiers where community_id = $1', [community.id])).rows;
  const gold = tiers.find((t) => t.key === 'gold')!.id;
  const version = (await owner.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0].v;
  const sample = (await owner.query<{ id: string }>('select id from billing.members where community_id = $1 order by random() limit 500', [community.id])).rows.map((r) => r.id);
  await owner.end();
  const day = new Date(Date.now() - 100 * 864e5).toISOString().slice(0, 10);
  const cases: Case[] = [
    { name: 'anchor: the plain first page', path: () => '/v1/members', path_shown: '/v1/members' },
    { name: 'a Discord username', path: () => `/v1/members?q=user${rnd()}`, path_shown: '?q=user{n}' },
    { name: 'a Discord username in capitals', path: () => `/v1/members?q=USER${rnd()}`, path_shown: '?q=USER{n}' },
    { name: 'an email (part of it)', path: () => `/v1/members?q=person${3 * rnd(33333)}@`, path_shown: '?q=person{3n}@' },
    { name: 'an external user id', path: () => `/v1/members?q=u${2 * rnd(50000)}`, path_shown: '?q=u{2n}' },
    { name: 'a member id (its last 12 characters)', path: () => `/v1/members?q=${sample[rnd(sample.length) - 1].slice(-12)}`, path_shown: '?q={12 hex}' },
    { name: '111 matches', path: () => `/v1/members?q=user${99 + rnd(900)}`, path_shown: '?q=user{3 digits}' },
    { name: 'every member matches', path: () => '/v1/members?q=user', path_shown: '?q=user' },
    { name: '11,112 matches, mostly older than the newest 2,000', path: () => `/v1/members?q=user${rnd(9)}`, path_shown: '?q=user{1 digit}' },
    { name: 'two characters (no trigram)', path: () => `/v1/members?q=${10 + rnd(89)}`, path_shown: '?q={2 digits}' },
    { name: 'no match', path: () => `/v1/members?q=nobody${rnd()}`, path_shown: '?q=nobody{n}' },
    { name: 'a username and a status', path: () => `/v1/members?q=user${rnd()}&status=active`, path_shown: '?q=user{n}&status=active' },
    { name: 'status=past_due (10%)', path: () => '/v1/members?status=past_due', path_shown: '?status=past_due' },
    { name: 'a tier', path: () => `/v1/members?tier_id=${gold}`, path_shown: '?tier_id={gold}' },
    { name: 'tag=vip (1%)', path: () => '/v1/members?tag=vip', path_shown: '?tag=vip' },
    { name: 'joined on one day 100 days ago', path: () => `/v1/members?created_after=${day}T00:00:00Z&created_before=${day}T23:59:59Z`, path_shown: '?created_after=..&created_before=..' },
    { name: 'a common search, page 2', path: () => '/v1/members?q=user&cursor=CURSOR', path_shown: '?q=user&cursor=..' },
  ];
  const api = await startApi(url);
  const results: Result[] = [];
  try {
    // page 2 of a common search: the cursor of its first page
    const first = await (await fetch(`http://127.0.0.1:${PORT}/v1/members?q=user`, { headers: { authorization: `Bearer ${key}` } })).json() as { next_cursor: string };
    for (const c of cases) {
      if (c.path_shown.includes('cursor')) c.path = () => `/v1/members?q=user&cursor=${first.next_cursor}`;
      results.push(await measure(key, c));
    }
  } finally {
    api.stop();
    if (process.env.BENCH_KEEP_DB !== '1') await adminQuery(SERVER, `drop database if exists ${pg.escapeIdentifier(DB)} with (force)`);
  }
  const anchor = results[0];
  const body = [
    `Run ${new Date().toISOString()} by \`npx tsx bench/members/run.ts\` on ${machineLine(version)}.`,
    `Data: ${MEMBERS.toLocaleString('en')} members of one community (each with a Discord identity userN, a quarter with a Telegram one, half with an external subject, `
      + 'a third with an email, 1% tagged vip), one subscription each. One request at a time over HTTP to the API (rate limits lifted, pool of 4), '
      + `${REQUESTS} measured requests per case after ${WARMUP} warm-up ones, each with a new random value; pages of 25. `
      + 'The anchor is the plain first page, the list as it was before search.',
    '',
    '| case | request | p50 ms | p95 ms | max ms | rows a page | p50 / anchor |',
    '|---|---|---:|---:|---:|---:|---:|',
    ...results.map((r) => `| ${r.name} | \`${r.shown}\` | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | ${r.max.toFixed(1)} | ${r.rows.toFixed(1)} | ${(r.p50 / anchor.p50).toFixed(2)} |`),
    '',
    'How a search is served (docs/decisions/member-search.md): the newest 2,000 members after the cursor filtered in id order, then, when the page is still short, the older matches found by index (the trigram index for q) as the owner, the page read again under the tenant policy.',
  ].join('\n');
  process.stdout.write(`\n${body}\n`);
  writeResultsSection('## Member search', body);
  log(`wrote the "Member search" section of bench/RESULTS.md (load average ${os.loadavg()[0].toFixed(1)})`);
}

main().then(() => process.exit(0), (err) => { process.stderr.write(`${err?.stack ?? err}\n`); process.exit(1); });
