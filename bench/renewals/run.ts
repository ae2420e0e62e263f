// Renewal storm benchmark: `npx tsx bench/renewals/run.ts` (or `npm run bench -- renewals`).
// Creates its own database on DATABASE_URL's server (default: the machine's PostgreSQL
// at 127.0.0.1:5432) with one sandbox community whose BENCH_SUBSCRIPTIONS (100,000)
// monthly subscriptions all end their period at the same moment. It starts the API
// (bench/read/server.ts) and measures GET /v1/entitlements/check alone (the quiet
// p99), then moves the community's clock past that moment, starts one worker process
// (the real worker, worker/index.ts) and queues its subscriptions__apply_due job:
// every subscription is invoiced and charged (sandbox), its period advanced, its
// events and ledger written. It counts renewals and paid invoices as they commit and
// measures the check again while the storm runs. Prints the figures and writes them
// under "## Renewal storm" in bench/RESULTS.md. Goal (issue 17): all renewed within
// 60 s, the check's p99 within 2x of its quiet value.
// The anchor (issue 33), in the same run before the storm: the same renewal batches'
// bare statements. A clone of the seeded database (CREATE DATABASE ... TEMPLATE) has
// the user triggers of the tables the batches write (subscriptions, invoices,
// payment_attempts) disabled, foreign keys and constraints kept, as bench/ledger's
// 'bare' anchor; the same calls the worker's task makes
// (billing_private.worker_apply_due_batch in batches of 500, then _finish) run there
// from one connection while the check runs against the API as during the storm. The
// storm's renewals/s is printed against it; the clone is dropped before the storm. A
// second figure times, in that same anchor run, only the batch's writes inside
// billing.renew_batch (its copy on the clone has a clock around them).
// Env: BENCH_SUBSCRIPTIONS (the size, 100,000: the storm of issue 17; on a shared 2-vCPU
// machine at load 5-10, 20,000 run in 4 minutes, 100,000 in about 17: seed 4.5, anchor
// 3, storm 8; seed, anchor and storm each linear in it), BENCH_CONNECTIONS (the check's, 10),
// BENCH_WORKER_CONCURRENCY (1), BENCH_KEEP_DB=1 (keep the seeded database afterwards).
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';
import { withDatabase } from '../../src/db/migrate';
import { adminQuery, createBenchDatabase, machineLine, serviceNodeFlags, writeResultsSection } from '../support';

const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = process.env.BENCH_DB ?? 'billing_bench_renewals';
const DB_BARE = `${DB}_bare`;
/** The tables a renewal batch writes; their user triggers are off in the bare anchor's clone. */
const BARE_TABLES = ['billing.subscriptions', 'billing.invoices', 'billing.payment_attempts'];
const BATCH = 500; // worker/tasks/subscriptions__apply_due.ts BATCH
const N = Number(process.env.BENCH_SUBSCRIPTIONS ?? 100_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const PORT = Number(process.env.BENCH_PORT ?? 3911);
const GOAL_SECONDS = 60;

// autocannon ships no type declarations: the part used here.
interface AutocannonResult { requests: { average: number; total: number }; latency: { p50: number; p99: number }; errors: number; non2xx: number }
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as {
  (opts: Record<string, unknown>): Promise<AutocannonResult>;
  (opts: Record<string, unknown>, done: (err: Error | null, result: AutocannonResult) => void): { stop(): void };
};

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

async function seed(owner: pg.Pool, communityId: string): Promise<void> {
  const q = (sql: string, values: unknown[] = []) => owner.query(sql, values);
  await q(`update billing.communities set payment_provider = 'sandbox' where id = $1`, [communityId]);
  await q(`insert into billing.tiers (community_id, key, name) values ($1, 'gold', 'Gold')`, [communityId]);
  await q(`insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
    select $1, t.id, 'gold-monthly', 'Gold monthly', 1500, 'usd', 'month' from billing.tiers t where t.community_id = $1`, [communityId]);
  await q(`insert into billing.entitlements (community_id, key, name) values ($1, 'chat', 'Chat')`, [communityId]);
  await q(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id)
    select $1, t.id, e.id from billing.tiers t, billing.entitlements e where t.community_id = $1 and e.community_id = $1`, [communityId]);
  const t0 = Date.now();
  const CHUNK = 5_000;
  // A small first chunk: the plans the triggers keep until the analyze below are made
  // on empty tables.
  for (let from = 1, to = 0; from <= N; from = to + 1) {
    to = Math.min(N, from === 1 ? 1_000 : from + CHUNK - 1);
    // Members with a Discord identity, and their subscriptions through the triggers
    // (events and ledger rows as a checkout would leave them), all ending one day from now.
    await q(`with m as (
        insert into billing.members (community_id) select $1 from generate_series($2::int, $3::int) returning id),
      numbered as (select id, row_number() over () + $2::int - 1 as g from m),
      i as (insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
        select $1, id, 'discord', 'd' || g, 'user' || g from numbered)
      insert into billing.subscriptions (community_id, member_id, plan_id, status, provider,
        current_period_start, current_period_end, billing_anchor)
      select $1, n.id, p.id, 'active', 'sandbox', now() - interval '1 month' + interval '1 day', now() + interval '1 day',
        now() + interval '1 day' - interval '1 month'
      from numbered n, billing.plans p where p.community_id = $1`, [communityId, from, to]);
    // Statistics as autovacuum would keep them (it may be off on the bench's server):
    // the analyze also drops this session's cached plans. Without it, the plans the
    // triggers' functions kept from the first chunk (analytics_refresh's are generic by
    // design, planned on empty tables) probed billing.mrr_movements by the wrong index,
    // scanning the community's movements per row: 65,000 subscriptions took 798 s.
    await q('analyze');
    log(`seeded ${to.toLocaleString('en')} of ${N.toLocaleString('en')} subscriptions (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
}

function startChild(script: string, env: NodeJS.ProcessEnv, ready: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...serviceNodeFlags(), '--import', 'tsx', script], { // npm start's V8 flags
    cwd: path.resolve(__dirname, '../..'), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes(ready)) { child.removeAllListeners('exit'); resolve(child); }
    });
  });
}

const checkOptions = (key: string, seconds: number) => ({
  url: `http://127.0.0.1:${PORT}`, connections: CONNECTIONS, duration: seconds,
  headers: { authorization: `Bearer ${key}` },
  requests: [{ method: 'GET', setupRequest: (req: Record<string, unknown>) => ({ ...req, path: `/v1/entitlements/check?platform=discord&platform_uid=d${1 + Math.floor(Math.random() * N)}` }) }],
});

const check = (key: string, seconds: number): Promise<AutocannonResult> => autocannon(checkOptions(key, seconds));

/** The check until stop() (the storm's length is not known in advance). */
function checkUntilStopped(key: string): { stop(): Promise<AutocannonResult> } {
  let resolve!: (r: AutocannonResult) => void;
  let reject!: (e: Error) => void;
  const result = new Promise<AutocannonResult>((res, rej) => { resolve = res; reject = rej; });
  const instance = autocannon(checkOptions(key, 3600), (err, r) => { if (err) reject(err); else resolve(r); });
  return { stop: () => { instance.stop(); return result; } };
}

/**
 * On the anchor's clone only: billing.renew_batch again with a clock around its writes
 * (the invoices' numbers and insert, their payment attempts, the subscriptions'
 * update: from `with blocks as (` to the update's row count), summed in the session
 * setting bench.renew_writes_us. False (and the figure left out) when the function no
 * longer has those markers.
 */
async function timeRenewWrites(db: pg.Client): Promise<boolean> {
  const { rows: [{ def }] } = await db.query<{ def: string }>(`select pg_get_functiondef('billing.renew_batch(text[], timestamptz)'::regprocedure) as def`);
  const begin = '  with blocks as (';
  const end = '  get diagnostics v_done = row_count;';
  if (def.split(begin).length !== 2 || def.split(end).length !== 2 || !def.includes('\ndeclare\n')) {
    log('billing.renew_batch has changed shape: the writes alone are not timed');
    return false;
  }
  await db.query(def.replace('\ndeclare\n', '\ndeclare\n  v_bench_t timestamptz;\n')
    .replace(begin, `  v_bench_t := clock_timestamp();\n${begin}`)
    .replace(end, `${end}\n  perform set_config('bench.renew_writes_us', (coalesce(nullif(current_setting('bench.renew_writes_us', true), '')::float8, 0)
    + extract(epoch from clock_timestamp() - v_bench_t) * 1e6)::text, false);`));
  return true;
}

/**
 * The anchor: on the clone at `url`, the renewal batches' triggers off, the clock moved
 * as for the storm, the worker task's calls timed from one connection while the check
 * runs against the API (on the storm's database, as during the storm).
 */
async function bareBatches(url: string, communityId: string, key: string): Promise<{ renewed: number; seconds: number; rate: number; writesSeconds: number | null; check: AutocannonResult }> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    for (const table of BARE_TABLES) await db.query(`alter table ${table} disable trigger user`);
    const timed = await timeRenewWrites(db);
    await db.query(`update billing.communities set clock_offset = interval '1 day 1 minute' where id = $1`, [communityId]);
    const during = checkUntilStopped(key);
    const t0 = performance.now();
    let after: string | null = null;
    for (;;) {
      const batch: pg.QueryResult<{ r: { last_id: string | null; more: boolean } }> = await db.query(
        'select billing_private.worker_apply_due_batch($1, $2, $3) as r', [communityId, after, BATCH]);
      const { more, last_id: last } = batch.rows[0].r;
      if (!more) break;
      after = last;
    }
    await db.query('select billing_private.worker_apply_due_finish($1)', [communityId]);
    const seconds = (performance.now() - t0) / 1000;
    const check = await during.stop();
    const { rows: [c] } = await db.query<{ renewed: number }>(`select count(*)::int as renewed from billing.subscriptions
      where community_id = $1 and current_period_end > now() + interval '2 days'`, [communityId]);
    const writesSeconds = timed
      ? Number((await db.query<{ us: string | null }>(`select current_setting('bench.renew_writes_us', true) as us`)).rows[0].us ?? 0) / 1e6 : null;
    log(`anchor (bare statements): ${c.renewed.toLocaleString('en')} renewed in ${seconds.toFixed(1)} s (${(c.renewed / seconds).toFixed(0)}/s); `
      + `its writes alone ${writesSeconds === null ? 'not timed' : `${writesSeconds.toFixed(1)} s`}; check meanwhile p99 ${check.latency.p99} ms`);
    return { renewed: c.renewed, seconds, rate: c.renewed / seconds, writesSeconds, check };
  } finally {
    await db.end();
  }
}

async function main(): Promise<void> {
  log(`creating ${DB} on ${new URL(SERVER).host}`);
  const url = await createBenchDatabase(SERVER, DB);
  let owner = new pg.Pool({ connectionString: url, max: 2 });
  const children: ChildProcess[] = [];
  try {
    const community = await createCommunity(owner, 'Storm community');
    const { key } = await createKey(owner, community.id, ['members:read']);
    await seed(owner, community.id);
    // The anchor's clone of the seed, taken while nothing else is connected to it.
    await owner.end();
    await adminQuery(SERVER, `drop database if exists ${DB_BARE} with (force)`, `create database ${DB_BARE} template ${DB}`);
    owner = new pg.Pool({ connectionString: url, max: 2 });
    const api = await startChild(path.join(__dirname, '../read/server.ts'), {
      DATABASE_URL: url, NODE_ENV: 'production', BENCH_PORT: String(PORT), LOG_LEVEL: 'info',
      RATE_LIMIT_KEY_PER_MINUTE: '1000000000', RATE_LIMIT_KEY_BURST: '1000000000',
      RATE_LIMIT_IP_PER_MINUTE: '1000000000', RATE_LIMIT_IP_BURST: '1000000000',
    }, 'listening');
    children.push(api);
    await check(key, 3);
    const quiet = await check(key, 10);
    log(`quiet check: ${quiet.requests.average.toFixed(0)} req/s, p50 ${quiet.latency.p50} ms, p99 ${quiet.latency.p99} ms`);


    // The anchor: the same batches' bare statements on the clone, the check running meanwhile.
    const bare = await bareBatches(withDatabase(SERVER, DB_BARE), community.id, key);
    await adminQuery(SERVER, `drop database if exists ${DB_BARE} with (force)`);

    const worker = await startChild(path.join(__dirname, '../webhooks/worker.ts'), {
      BENCH_DATABASE_URL: url, BENCH_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      BENCH_CONCURRENCY: process.env.BENCH_WORKER_CONCURRENCY ?? '1',
    }, 'ready');
    children.push(worker);
    const loadBefore = os.loadavg()[0];
    // Time passes the period end; the job the cron would queue within the minute.
    await owner.query(`update billing.communities set clock_offset = interval '1 day 1 minute' where id = $1`, [community.id]);
    const started = Date.now();
    await owner.query(`select graphile_worker.add_job('subscriptions__apply_due', json_build_object('community_id', $1::text))`, [community.id]);
    const during = checkUntilStopped(key);
    const progress: string[] = [];
    let renewed = 0;
    let paid = 0;
    const deadline = started + 15 * 60_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      const { rows: [r] } = await owner.query<{ renewed: number; paid: number }>(`select
        (select count(*)::int from billing.subscriptions where community_id = $1 and current_period_end > now() + interval '2 days') as renewed,
        (select count(*)::int from billing.invoices where community_id = $1 and status = 'paid') as paid`, [community.id]);
      ({ renewed, paid } = r);
      const line = `${((Date.now() - started) / 1000).toFixed(0)} s: ${renewed.toLocaleString('en')} renewed, ${paid.toLocaleString('en')} invoices paid`;
      log(line);
      if ((Date.now() - started) % 10_000 < 1000) progress.push(line);
      if (renewed >= N && paid >= N) break;
    }
    const seconds = (Date.now() - started) / 1000;
    const busy = await during.stop();
    const { rows: [wrong] } = await owner.query<{ n: number }>(`select count(*)::int as n from (
        select s.id from billing.subscriptions s
        left join billing.invoices i on i.community_id = s.community_id and i.subscription_id = s.id and i.status = 'paid'
        where s.community_id = $1 group by s.id having count(i.id) <> 1) x`, [community.id]);
    const { rows: [v] } = await owner.query<{ v: string }>('select current_setting($$server_version$$) as v');
    const done = renewed >= N && paid >= N;
    const rate = renewed / seconds;
    const p99Ratio = busy.latency.p99 / quiet.latency.p99;
    const body = [
      `Run ${new Date(started).toISOString()} by \`npx tsx bench/renewals/run.ts\` on ${machineLine(v.v)} (1-minute load ${loadBefore.toFixed(1)} before the storm).`,
      `${N.toLocaleString('en')} sandbox subscriptions of one community end their period at the same moment; one worker process `
        + `(concurrency ${process.env.BENCH_WORKER_CONCURRENCY ?? '1'}) applies them in batches of 500, one transaction each. `
        + `Meanwhile autocannon sends GET /v1/entitlements/check over ${CONNECTIONS} connections.`,
      '',
      `**Anchor** (issue 33): the same renewal batches' bare statements, i.e. the worker's calls (worker_apply_due_batch, ${BATCH} per batch, then _finish) `
        + `on a clone of the same seed whose ${BARE_TABLES.join(', ')} have their user triggers disabled (no events, ledger, outbox, rollup or audit; `
        + 'constraints and foreign keys kept), from one connection, in this run before the storm with the check running as during it. '
        + 'Its second figure counts only the time inside renew_batch\'s writes (invoice numbers and insert, payment attempts, subscription update), '
        + 'not the batch\'s selection, locks or terms.',
      '',
      '| figure | value |',
      '|---|---:|',
      `| renewed (period advanced) | ${renewed.toLocaleString('en')} of ${N.toLocaleString('en')} |`,
      `| invoices paid | ${paid.toLocaleString('en')} |`,
      `| subscriptions without exactly one paid invoice | ${wrong.n.toLocaleString('en')} |`,
      `| storm time (job queued to last renewal seen) | ${done ? `${seconds.toFixed(1)} s` : `not done after ${seconds.toFixed(0)} s`} |`,
      `| renewals per second | ${rate.toFixed(0)} |`,
      `| anchor: bare statements, renewed | ${bare.renewed.toLocaleString('en')} of ${N.toLocaleString('en')} in ${bare.seconds.toFixed(1)} s |`,
      `| anchor: bare statements, renewals per second | ${bare.rate.toFixed(0)} |`,
      `| storm / anchor | **${(100 * rate / bare.rate).toFixed(0)}%** (goal of issue 33: >= 30%) |`,
      `| second anchor: the batches' writes alone (time inside renew_batch's insert and update statements), renewals per second | ${bare.writesSeconds ? (bare.renewed / bare.writesSeconds).toFixed(0) : 'not timed'} |`,
      `| storm / writes alone | ${bare.writesSeconds ? `${(100 * rate * bare.writesSeconds / bare.renewed).toFixed(0)}%` : '-'} |`,
      `| check alone: req/s, p50, p99 | ${quiet.requests.average.toFixed(0)}, ${quiet.latency.p50} ms, ${quiet.latency.p99} ms |`,
      `| check during the storm: req/s, p50, p99 | ${busy.requests.average.toFixed(0)}, ${busy.latency.p50} ms, ${busy.latency.p99} ms |`,
      `| check errors during the storm | ${busy.errors + busy.non2xx} |`,
      `| check during the anchor: req/s, p50, p99 | ${bare.check.requests.average.toFixed(0)}, ${bare.check.latency.p50} ms, ${bare.check.latency.p99} ms |`,
      `| check p99 during the storm / quiet | **${p99Ratio.toFixed(2)}x** (goal: <= 2x) |`,
      '',
      `Goal (issue 17): within ${GOAL_SECONDS} s, and the check's p99 within 2x of its quiet value: `
        + `**${done && seconds <= GOAL_SECONDS ? 'met' : 'missed'}** on time, **${busy.latency.p99 <= 2 * quiet.latency.p99 ? 'met' : 'missed'}** on p99.`,
      '',
      'Progress: ' + progress.join('; '),
    ].join('\n');
    process.stdout.write(`\n${body}\n`);
    writeResultsSection('## Renewal storm', body);
    log('wrote the "Renewal storm" section of bench/RESULTS.md');
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await owner.end();
    await adminQuery(SERVER, `drop database if exists ${DB_BARE} with (force)`);
    if (process.env.BENCH_KEEP_DB !== '1') await adminQuery(SERVER, `drop database if exists ${DB} with (force)`);
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
