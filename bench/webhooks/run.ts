// Webhook delivery benchmark: `npx tsx bench/webhooks/run.ts [--events 10000]
// [--rates 500,1000,1500] [--step-seconds 5] [--batch 25] [--workers 1] [--concurrency 8]
// [--endpoints 2] [--anchor-posts-per-job 1]`.
//
// Creates its own database (on DATABASE_URL's server, or the machine's PostgreSQL at
// postgres://postgres@127.0.0.1:5432), one community with N endpoints on a local
// keep-alive receiver, and worker processes (worker/index.ts startWorker). Then:
//   1. sustained: for each of --rates (events/s; each event goes to every endpoint), commits
//      --step-seconds of entitlement events at that rate, --batch per INSERT/commit, and
//      measures deliveries/s and commit-to-receipt p50/p99 (issue 33: what is offered up
//      to the anchor's rate must be met with p99 under 100 ms);
//   2. backlog: commits the same number again as fast as it can (500 per statement)
//      and measures how fast the queue drains;
//   3. the anchor (issue 33), in the same run once the service's workers have stopped:
//      graphile-worker (the project's version, anchor-worker.ts) in as many processes
//      with the same concurrency, draining a full queue of as many jobs as the backlog
//      had deliveries (--anchor-posts-per-job k: a k-th as many jobs of k POSTs each,
//      sent at once), each a plain HTTP POST of a body of the backlog's mean size to
//      the same receiver (no signing, no delivery rows); the queue is filled in one
//      transaction and timed from its commit to the last receipt. Prints the backlog's
//      deliveries/s against it.
// Every delivery is verified (HMAC of id.timestamp.body) and counted: nothing may be
// lost, and duplicates are reported. The receiver computes an HMAC of each anchor
// request too (the same work per request), not checked.
import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import crypto from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { applyMigrations, withDatabase } from '../../src/db/migrate';
import { encryptSecret, generateSecret, parseEncryptionKey, secretKey } from '../../src/webhooks/crypto';
import { writeResultsSection } from '../support';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const EVENTS = arg('events', 10_000);
const RATES = (() => {
  const i = process.argv.indexOf('--rates');
  return (i >= 0 ? process.argv[i + 1] : '500,1000,1500').split(',').map(Number).filter((r) => r > 0);
})();
const STEP_SECONDS = arg('step-seconds', 5);
// issue 33 item 5: the sustained phase's p99 at every offer up to the anchor's rate
const SUSTAINED_P99_MS = 100;
const BATCH = arg('batch', 25);
const WORKERS = arg('workers', 1);
const CONCURRENCY = arg('concurrency', 8);
const ENDPOINTS = arg('endpoints', 2);
const ANCHOR_POSTS_PER_JOB = Math.max(1, arg('anchor-posts-per-job', 1));
const SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ANCHOR_HMAC_KEY = Buffer.alloc(32, 33);
// Its package.json is not among graphile-worker's exports: read from node_modules.
const GRAPHILE_WORKER_VERSION = (JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../node_modules/graphile-worker/package.json'), 'utf8')) as { version: string }).version;

interface Receipt { at: number; ok: boolean; bytes: number }

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100/s)
  } catch {
    return 0;
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main() {
  const dbName = `billing_bench_webhooks_${Date.now()}`;
  const admin = new pg.Client({ connectionString: withDatabase(SERVER, 'postgres') });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  const url = withDatabase(SERVER, dbName);
  if (process.env.BENCH_AUTO_EXPLAIN) {
    // Diagnostics: slow statements (nested ones too) go to the server log with their plans.
    await admin.query(`alter database ${dbName} set session_preload_libraries = 'auto_explain'`);
    await admin.query(`alter database ${dbName} set auto_explain.log_min_duration = ${Number(process.env.BENCH_AUTO_EXPLAIN)}`);
    await admin.query(`alter database ${dbName} set auto_explain.log_nested_statements = ${process.env.BENCH_AUTO_EXPLAIN_NESTED === '0' ? 'off' : 'on'}`);
    await admin.query(`alter database ${dbName} set auto_explain.log_analyze = ${process.env.BENCH_AUTO_EXPLAIN_NESTED === '0' ? 'off' : 'on'}`);
  }
  const owner = new pg.Pool({ connectionString: url, max: 4 });
  owner.on('error', () => {});
  const workers: ChildProcess[] = [];
  const anchorWorkers: ChildProcess[] = [];
  const server = http.createServer();
  try {
    await applyMigrations(url, { includeCurrent: true });
    const key = crypto.randomBytes(32).toString('base64');
    const { rows: [community] } = await owner.query<{ id: string }>(`insert into billing.communities (name) values ('bench') returning id`);

    // Receiver: verifies every delivery and records when it arrived.
    const hmacKeys = new Map<string, Buffer>();
    const receipts = new Map<string, Receipt[]>(); // "<endpoint path> <webhook-id>" -> receipts
    let badSignatures = 0;
    const anchorReceipts = new Map<string, { at: number; count: number }>(); // "<anchor path> <id>"
    server.keepAliveTimeout = 60_000;
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = performance.timeOrigin + performance.now();
        const body = Buffer.concat(chunks).toString('utf8');
        const id = String(req.headers['webhook-id']);
        if (req.url?.startsWith('/anchor/')) {
          crypto.createHmac('sha256', ANCHOR_HMAC_KEY).update(`${id}.0.${body}`).digest('base64');
          const slot = `${req.url} ${id}`;
          const got = anchorReceipts.get(slot);
          if (got) got.count++;
          else anchorReceipts.set(slot, { at, count: 1 });
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
          res.end('ok');
          return;
        }
        const ts = String(req.headers['webhook-timestamp']);
        const k = hmacKeys.get(req.url ?? '');
        const expected = k ? `v1,${crypto.createHmac('sha256', k).update(`${id}.${ts}.${body}`).digest('base64')}` : '';
        const ok = String(req.headers['webhook-signature']).split(' ').includes(expected);
        if (!ok) badSignatures++;
        const slot = `${req.url} ${id}`;
        const list = receipts.get(slot) ?? [];
        list.push({ at, ok, bytes: Buffer.byteLength(body) });
        receipts.set(slot, list);
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;

    for (let i = 0; i < ENDPOINTS; i++) {
      const { rows: [e] } = await owner.query<{ id: string }>(`select billing.gen_id('we') as id`);
      const secret = generateSecret();
      const p = `/hook/${i}`;
      hmacKeys.set(p, secretKey(secret));
      await owner.query(`insert into billing.webhook_endpoints (community_id, id, url) values ($1, $2, $3)`, [community.id, e.id, `http://127.0.0.1:${port}${p}`]);
      await owner.query(`insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext) values ($1, $2, $3)`,
        [community.id, e.id, encryptSecret(parseEncryptionKey(key), community.id, e.id, secret)]);
    }

    const startWorkers = async (script: string, into: ChildProcess[]) => {
      for (let i = 0; i < WORKERS; i++) {
        const proc = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, script)], {
          cwd: path.resolve(__dirname, '../..'),
          env: { ...process.env, BENCH_DATABASE_URL: url, BENCH_ENCRYPTION_KEY: key, BENCH_CONCURRENCY: String(CONCURRENCY) },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        into.push(proc);
        await new Promise<void>((resolve, reject) => {
          readline.createInterface({ input: proc.stdout! }).once('line', () => { proc.removeAllListeners('exit'); resolve(); });
          proc.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
        });
      }
    };
    await startWorkers('worker.ts', workers);

    const data = (n: number) => ({
      member: { id: `mem_${n}`, identities: [{ platform: 'discord', platform_uid: String(100000 + n), username: `user${n}` }], external_subjects: [] },
      entitlement: { id: `ment_${n}`, entitlement_id: 'ent_bench', key: 'vip', name: 'VIP', revision: 1, status: 'active', granted_at: new Date().toISOString(), revoked_at: null,
        sources: [{ type: 'subscription', id: `sub_${n}`, status: 'active', tier_id: 'tier_x', plan_id: 'plan_x', client_reference_id: null, valid_until: null }], benefits: [] },
      changes: { added_benefits: [], removed_benefits: [] }, reason: 'activation', trigger_event_id: null,
    });

    const client = new pg.Client({ connectionString: url });
    await client.connect();
    async function commitBatch(from: number, count: number, commits: Map<string, number>) {
      const payload = JSON.stringify(Array.from({ length: count }, (_, i) => data(from + i)));
      await client.query('begin');
      const { rows } = await client.query<{ id: string }>(
        `insert into billing.events (community_id, type, data)
         select $1, 'member.entitlement.granted', d from jsonb_array_elements($2::jsonb) d returning id`, [community.id, payload]);
      await client.query('commit');
      const at = performance.timeOrigin + performance.now();
      for (const r of rows) commits.set(r.id, at);
    }

    async function waitDrained(commits: Map<string, number>, timeoutMs: number) {
      const expected = commits.size * ENDPOINTS;
      const deadline = Date.now() + timeoutMs;
      const count = () => {
        let n = 0;
        for (const id of commits.keys()) for (let i = 0; i < ENDPOINTS; i++) if (receipts.has(`/hook/${i} ${id}`)) n++;
        return n;
      };
      while (Date.now() < deadline) {
        if (count() >= expected) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    }

    function measure(label: string, commits: Map<string, number>) {
      const latencies: number[] = [];
      let lost = 0;
      let duplicates = 0;
      let first = Infinity;
      let last = 0;
      for (const [id, committedAt] of commits) {
        first = Math.min(first, committedAt);
        for (let i = 0; i < ENDPOINTS; i++) {
          const got = receipts.get(`/hook/${i} ${id}`);
          if (!got) { lost++; continue; }
          duplicates += got.length - 1;
          latencies.push(got[0].at - committedAt);
          last = Math.max(last, got[0].at);
        }
      }
      latencies.sort((a, b) => a - b);
      const deliveries = latencies.length;
      const seconds = (last - first) / 1000;
      const result = {
        phase: label, events: commits.size, deliveries, lost, duplicates,
        seconds: Number(seconds.toFixed(2)), deliveries_per_second: Math.round(deliveries / seconds),
        p50_ms: Number(percentile(latencies, 50).toFixed(1)), p99_ms: Number(percentile(latencies, 99).toFixed(1)),
        max_ms: Number(latencies[latencies.length - 1]?.toFixed(1)),
      };
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return result;
    }

    // Warm-up: connections, prepared statements, JIT.
    const warm = new Map<string, number>();
    await commitBatch(0, 50, warm);
    await waitDrained(warm, 30_000);

    // 1. Sustained, at each of --rates in turn.
    const steps: { rate: number; result: ReturnType<typeof measure> }[] = [];
    for (const rate of RATES) {
      const sustained = new Map<string, number>();
      const events = Math.max(BATCH, Math.round(rate * STEP_SECONDS));
      const startAt = performance.now();
      for (let sent = 0; sent < events; sent += BATCH) {
        const due = startAt + (sent / rate) * 1000;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await commitBatch(sent, Math.min(BATCH, events - sent), sustained);
      }
      await waitDrained(sustained, 120_000);
      steps.push({ rate, result: measure(`sustained ${rate} events/s (offer ${rate * ENDPOINTS} deliveries/s)`, sustained) });
    }

    // 2. Backlog: everything committed at once.
    const backlog = new Map<string, number>();
    for (let sent = 0; sent < EVENTS; sent += 500) await commitBatch(sent, Math.min(500, EVENTS - sent), backlog);
    await waitDrained(backlog, 120_000);
    const b = measure('backlog (all committed at once)', backlog);

    const final = async () => (await owner.query(`select count(*) filter (where status = 'succeeded')::int as succeeded,
      count(*)::int as total from billing.webhook_deliveries`)).rows[0];
    let state = await final();
    for (let i = 0; i < 100 && state.succeeded < state.total; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = await final();
    }
    process.stdout.write(`${JSON.stringify({ delivery_rows: state, bad_signatures: badSignatures, load_average: os.loadavg().map((l) => Number(l.toFixed(2))), machine: `${os.cpus().length} x ${os.cpus()[0]?.model}`, node: process.version, workers: WORKERS, concurrency: CONCURRENCY })}\n`);
    // Where the CPU went (whole run: warm-up, both phases): the worker processes, this
    // process (receiver + producer) and the database backends serving this database.
    const { rows: backends } = await owner.query<{ pid: number; app: string }>(`select pid, coalesce(nullif(application_name, ''), 'producer') as app from pg_stat_activity where datname = current_database()`);
    const byApp: Record<string, number> = {};
    for (const b of backends) byApp[b.app] = Number(((byApp[b.app] ?? 0) + cpuSeconds(b.pid)).toFixed(2));
    const cpu = {
      worker_processes: Number(workers.reduce((t, w) => t + cpuSeconds(w.pid!), 0).toFixed(2)),
      receiver_and_producer: Number(((process.cpuUsage().user + process.cpuUsage().system) / 1e6).toFixed(2)),
      postgres_backends: Number(backends.reduce((t, b) => t + cpuSeconds(b.pid), 0).toFixed(2)),
      postgres_by_client: byApp,
    };
    // Counted at the receiver, not computed: every request that reached it.
    let requests = 0;
    for (const list of receipts.values()) requests += list.length;

    // 3. The anchor: the service's workers stop; graphile-worker alone drains a full queue
    // of plain POSTs, as many as the backlog delivered, each of the backlog's mean body size.
    const stopped = workers.map((w) => new Promise<void>((resolve) => { if (w.exitCode !== null) resolve(); else w.once('exit', () => resolve()); }));
    for (const w of workers) w.kill('SIGTERM');
    await Promise.race([Promise.all(stopped), new Promise((r) => setTimeout(r, 10_000))]);
    let backlogBytes = 0;
    let backlogBodies = 0;
    for (const id of backlog.keys()) {
      for (let i = 0; i < ENDPOINTS; i++) {
        const got = receipts.get(`/hook/${i} ${id}`);
        if (got) { backlogBytes += got[0].bytes; backlogBodies++; }
      }
    }
    const bodyBytes = Math.round(backlogBytes / Math.max(backlogBodies, 1));
    const jobs = Math.ceil((EVENTS * ENDPOINTS) / ANCHOR_POSTS_PER_JOB);
    const posts = jobs * ANCHOR_POSTS_PER_JOB;
    const anchorBody = (() => {
      const shell = JSON.stringify({ type: 'bench.anchor', pad: '' });
      return JSON.stringify({ type: 'bench.anchor', pad: 'x'.repeat(Math.max(0, bodyBytes - shell.length)) });
    })();
    await startWorkers('anchor-worker.ts', anchorWorkers);
    const anchorCpu0 = anchorWorkers.reduce((t, w) => t + cpuSeconds(w.pid!), 0);
    await client.query('begin');
    await client.query(`select graphile_worker.add_job('bench_anchor__post', json_build_object(
        'url', $1::text || (g % $2::int)::text, 'body', $3::text,
        'ids', (select json_agg('anchor_' || g || '_' || k) from generate_series(1, $5::int) k)))
      from generate_series(1, $4::int) g`, [`http://127.0.0.1:${port}/anchor/`, ENDPOINTS, anchorBody, jobs, ANCHOR_POSTS_PER_JOB]);
    await client.query('commit');
    const anchorStart = performance.timeOrigin + performance.now();
    const anchorDeadline = Date.now() + 300_000;
    while (anchorReceipts.size < posts && Date.now() < anchorDeadline) await new Promise((r) => setTimeout(r, 50));
    let anchorLast = 0;
    let anchorDuplicates = 0;
    for (const r of anchorReceipts.values()) { anchorLast = Math.max(anchorLast, r.at); anchorDuplicates += r.count - 1; }
    const anchorSeconds = (anchorLast - anchorStart) / 1000;
    const anchor = {
      phase: `anchor: graphile-worker, plain POSTs from a full queue (${ANCHOR_POSTS_PER_JOB} per job)`, jobs, posts, deliveries: anchorReceipts.size, lost: posts - anchorReceipts.size,
      duplicates: anchorDuplicates, seconds: Number(anchorSeconds.toFixed(2)), deliveries_per_second: Math.round(anchorReceipts.size / anchorSeconds),
      body_bytes: Buffer.byteLength(anchorBody), backlog_mean_body_bytes: bodyBytes,
      cpu_seconds: Number((anchorWorkers.reduce((t, w) => t + cpuSeconds(w.pid!), 0) - anchorCpu0).toFixed(2)),
    };
    process.stdout.write(`${JSON.stringify(anchor)}\n`);
    const ratio = `${((100 * b.deliveries_per_second) / anchor.deliveries_per_second).toFixed(0)}%`;
    // Every offer up to the anchor's rate: met (98% of the offer or more) with p99 under the goal.
    const judged = steps.map(({ rate, result }) => {
      const offer = rate * ENDPOINTS;
      const upTo = offer <= anchor.deliveries_per_second;
      const met = result.deliveries_per_second >= 0.98 * offer && result.lost === 0 && result.duplicates === 0;
      return { offer, upTo, met, ok: met && result.p99_ms < SUSTAINED_P99_MS, result };
    });
    const sustainedVerdict = judged.filter((j) => j.upTo).length === 0
      ? `no offer at or under the anchor's ${anchor.deliveries_per_second} deliveries/s was run`
      : judged.filter((j) => j.upTo).every((j) => j.ok)
        ? `every offer up to the anchor's ${anchor.deliveries_per_second} deliveries/s met with p99 under ${SUSTAINED_P99_MS} ms`
        : `not every offer up to the anchor's ${anchor.deliveries_per_second} deliveries/s met with p99 under ${SUSTAINED_P99_MS} ms`;
    process.stdout.write(`${JSON.stringify({ backlog_over_anchor: ratio, sustained: sustainedVerdict })}\n`);
    process.stdout.write(`${JSON.stringify({ cpu_seconds: cpu, receiver_requests: requests, distinct_deliveries: receipts.size })}\n`);
    const row = (r: ReturnType<typeof measure>) =>
      `| ${r.phase} | ${r.events.toLocaleString('en')} | ${r.deliveries.toLocaleString('en')} | ${r.lost} | ${r.duplicates} | ${r.seconds} | ${r.deliveries_per_second} | ${r.p50_ms} | ${r.p99_ms} | ${r.max_ms} |`;
    writeResultsSection('## Webhooks', [
      `Run ${new Date().toISOString()} by \`npx tsx bench/webhooks/run.ts\` (${EVENTS.toLocaleString('en')} events in the backlog, ${ENDPOINTS} endpoints, `
        + `sustained phases of ${STEP_SECONDS} s at ${RATES.join(', ')} events/s in commits of ${BATCH}, ${WORKERS} worker process(es) with concurrency ${CONCURRENCY}) `
        + `on ${os.cpus().length} vCPU (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}; load average at the end `
        + `${os.loadavg().map((l) => l.toFixed(1)).join(' ')}. The receiver (in the bench process) verifies every signature and counts every request.`,
      '',
      `**Anchor** (issue 33): graphile-worker ${GRAPHILE_WORKER_VERSION} in ${WORKERS} process(es) of concurrency ${CONCURRENCY} (the service's worker setup) `
        + `draining a full queue of ${jobs.toLocaleString('en')} jobs of ${ANCHOR_POSTS_PER_JOB} POST(s) each (${posts.toLocaleString('en')} in all, at least the backlog's deliveries; `
        + `committed in one transaction), each a plain HTTP POST of ${anchor.body_bytes} bytes (the backlog's mean body) to the same receiver, no signing and no delivery rows `
        + '(bench/webhooks/anchor-worker.ts; the service\'s own jobs carry up to 50 deliveries of one endpoint).',
      '',
      '| phase | events | deliveries received | lost | duplicates | seconds | deliveries/s | p50 ms | p99 ms | max ms |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...steps.map((x) => row(x.result)), row(b),
      `| ${anchor.phase} | ${jobs.toLocaleString('en')} jobs, ${posts.toLocaleString('en')} POSTs | ${anchor.deliveries.toLocaleString('en')} | ${anchor.lost} | ${anchor.duplicates} | ${anchor.seconds} | ${anchor.deliveries_per_second} | - | - | - |`,
      '',
      `Backlog / anchor: **${ratio}** of the anchor's deliveries/s (goal of issue 33: >= 80%). Sustained: **${sustainedVerdict}** `
        + `(${judged.map((j) => `offer ${j.offer}/s: met ${j.result.deliveries_per_second}/s, p99 ${j.result.p99_ms} ms${j.upTo ? '' : ', above the anchor'}`).join('; ')}). `
        + `Anchor worker CPU: ${anchor.cpu_seconds} s.`,
      '',
      `Receiver: ${requests.toLocaleString('en')} requests in all (warm-up included), ${receipts.size.toLocaleString('en')} distinct (endpoint, webhook-id); `
        + `bad signatures ${badSignatures}; delivery rows ${state.succeeded.toLocaleString('en')} succeeded of ${state.total.toLocaleString('en')}. `
        + `CPU seconds: worker ${cpu.worker_processes}, receiver and producer ${cpu.receiver_and_producer}, PostgreSQL backends ${cpu.postgres_backends}.`,
    ].join('\n'));
    await client.end();
    if (steps.some((x) => x.result.lost) || b.lost || badSignatures || anchor.lost) process.exitCode = 1;
  } finally {
    for (const w of [...workers, ...anchorWorkers]) w.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    for (const w of [...workers, ...anchorWorkers]) w.kill('SIGKILL');
    server.closeAllConnections();
    server.close();
    await owner.end();
    if (process.argv.includes('--keep')) process.stdout.write(`kept database ${dbName}\n`);
    else await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
