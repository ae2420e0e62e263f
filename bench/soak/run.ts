// Soak: `npx tsx bench/soak/run.ts` (or `npm run bench -- soak`). SOAK_SECONDS of
// traffic (default 600) at SOAK_RATE requests started per second (default 25), never
// part of `npm test`.
//
// It starts a private embedded PostgreSQL (its own port and data directory, so it can
// be restarted), migrates a database, and runs the API and a worker as child processes
// (bench/soak/api.ts, bench/webhooks/worker.ts) with a local webhook receiver in this
// process. Four sandbox communities (the demo catalog) each have one endpoint on the
// receiver. Traffic, open loop at a steady rate: reads (subscriptions, entitlement
// checks, events, plans, members), checkouts (link + sandbox payment), lifecycle
// changes (cancel, reactivate, switch, pause, resume) and, every 10 s, a renewal round
// through the sandbox test clock (one community SOAK_CLOCK_DAYS ahead, default 3, so
// renewals come steadily: half the time applied at once by billing.sandbox_advance,
// half left for the worker's minute cron).
// At 40% of the run the worker is killed (SIGKILL) and started again; at 60% the
// database is stopped, kept down SOAK_DB_DOWN_SECONDS (default 10) and started again. Then traffic stops and the run waits (up to 5 minutes) for
// every delivery and every due period end.
//
// Figures: throughput, latency p50/p99, errors by status and code, deliveries lost
// (events with a delivery row whose webhook-id never reached the receiver, plus events
// written after the endpoints that got no delivery row), invoices wrong (lines that do
// not add up, paid without exactly one successful payment or not in full, payments on
// unpaid invoices, two invoices for one subscription period), members with two live
// subscriptions, memory (RSS) of each process. Printed, and written as the "Soak"
// section of bench/RESULTS.md with machine info and load average.
import { spawn, ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { packageRoot } from '../../src/core/config';
import { SCOPES } from '../../src/core/scopes';
import { ensureDatabase } from '../../src/db/database';
import { freePort, startEmbedded, EmbeddedDatabase } from '../../src/db/embedded';
import { ensureLogin } from '../../src/db/logins';
import { applyMigrations } from '../../src/db/migrate';
import { applyCatalog, readCatalogFile } from '../../src/domain/catalog/catalog-file';
import { sandboxAdvance } from '../../src/domain/checkout/checkout-completion';
import { createCommunity, createKey } from '../../src/domain/communities/community-admin';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const RATE = Number(process.env.SOAK_RATE ?? 25);
/** Days one community's test clock moves per renewal round (every 10 s, communities in turn). */
const CLOCK_DAYS = Number(process.env.SOAK_CLOCK_DAYS ?? 3);
const COMMUNITIES = 4;
const MAX_IN_FLIGHT = 200;
const REQUEST_TIMEOUT_MS = 15_000;
const DRAIN_LIMIT_MS = 300_000;
const RESULTS = path.join(__dirname, '..', 'RESULTS.md');

const started = Date.now();
const say = (line: string) => process.stderr.write(`[soak ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- processes --------------------------------------------------------------------------

function rssMb(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch {
    return null;
  }
}

async function spawnChild(name: string, file: string, env: NodeJS.ProcessEnv, ready: string, logFile: string): Promise<ChildProcess> {
  const log = fs.openSync(logFile, 'a');
  const proc = spawn(process.execPath, ['--import', 'tsx', file], {
    cwd: packageRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', log],
  });
  const lines = readline.createInterface({ input: proc.stdout! });
  await new Promise<void>((resolve, reject) => {
    lines.on('line', (l) => { if (l.trim() === ready) resolve(); });
    proc.once('exit', (code) => reject(new Error(`${name} exited with ${code} (log: ${logFile})`)));
  });
  return proc;
}

/**
 * A child process kept running: one that exits without being asked to (a crash) is
 * counted and started again, as a process supervisor would.
 */
class Supervised {
  proc!: ChildProcess;
  crashes: string[] = [];
  incarnation = 0;
  private stopping = false;

  constructor(private readonly name: string, private readonly file: string, private readonly env: NodeJS.ProcessEnv,
    private readonly ready: string, private readonly logFile: string) {}

  async start(): Promise<void> {
    this.proc = await spawnChild(this.name, this.file, this.env, this.ready, this.logFile);
    this.incarnation++;
    const proc = this.proc;
    proc.once('exit', (code, signal) => {
      if (this.stopping || proc !== this.proc) return;
      this.crashes.push(`${this.name} exited (${signal ?? `code ${code}`}) at ${((Date.now() - started) / 1000).toFixed(0)} s`);
      say(this.crashes[this.crashes.length - 1]);
      void this.restart();
    });
  }

  private async restart(): Promise<void> {
    for (let delay = 500; !this.stopping; delay = Math.min(delay * 2, 10_000)) {
      try {
        await this.start();
        return;
      } catch (err) {
        say(`${this.name} did not start again: ${(err as Error).message}`);
        await sleep(delay);
      }
    }
  }

  /** SIGKILL on purpose (not a crash), then started again. */
  async killAndRestart(): Promise<void> {
    const proc = this.proc;
    this.proc = undefined as unknown as ChildProcess;
    await sigkill(proc);
    await this.start();
  }

  stop(): void {
    this.stopping = true;
    this.proc?.kill('SIGTERM');
  }
}

async function sigkill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGKILL');
  await exited;
}

// ---- the receiver -----------------------------------------------------------------------

const received = new Map<string, number>();
let receivedTotal = 0;

async function startReceiver(): Promise<{ url: string; server: http.Server }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['webhook-id'] ?? '');
      received.set(id, (received.get(id) ?? 0) + 1);
      receivedTotal++;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server };
}

// ---- traffic ----------------------------------------------------------------------------

interface Community { id: string; key: string; tiers: Record<string, string>; plans: Record<string, string>; buyers: string[]; subs: string[] }

const latencies: number[] = [];
const byKind = new Map<string, number[]>();
const errors = new Map<string, number>();
let completed = 0;
let skipped = 0;
let inFlight = 0;
let apiBase = '';

function countError(what: string) { errors.set(what, (errors.get(what) ?? 0) + 1); }

async function request(kind: string, method: string, url: string, key: string | null, body?: unknown, form = false): Promise<{ status: number; body: any } | null> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const t0 = performance.now();
  try {
    const res = await fetch(url.startsWith('http') ? url : `${apiBase}${url}`, {
      method, redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: form ? '' : body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    const ms = performance.now() - t0;
    latencies.push(ms);
    (byKind.get(kind) ?? byKind.set(kind, []).get(kind)!).push(ms);
    completed++;
    let parsed: any = null; // eslint-disable-line @typescript-eslint/no-explicit-any
    try { parsed = JSON.parse(text); } catch { /* a page */ }
    // An API error names its code; the sandbox pay page answers a buyer in HTML (409
    // "Cannot pay this checkout" when the member got a live subscription meanwhile).
    if (res.status >= 400) countError(parsed ? `${res.status} ${parsed.code ?? ''}`.trim() : `${res.status} (${kind}: an HTML page)`);
    return { status: res.status, body: parsed };
  } catch (err) {
    countError((err as Error).name === 'TimeoutError' ? 'timeout' : `network: ${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message}`);
    return null;
  }
}

const pick = <T>(xs: T[]): T | undefined => (xs.length ? xs[Math.floor(Math.random() * xs.length)] : undefined);

async function read(c: Community) {
  const r = Math.random();
  if (r < 0.3) {
    const res = await request('list subscriptions', 'GET', '/v1/subscriptions?limit=100', c.key);
    if (res?.status === 200) c.subs = res.body.data.map((s: { id: string }) => s.id);
  } else if (r < 0.6) {
    const buyer = pick(c.buyers) ?? 'nobody';
    await request('entitlement check', 'GET', `/v1/entitlements/check?namespace=soak&external_user_id=${buyer}`, c.key);
  } else if (r < 0.8) {
    await request('events', 'GET', '/v1/events?limit=20', c.key);
  } else if (r < 0.9) {
    await request('plans', 'GET', '/v1/plans', c.key);
  } else {
    await request('members', 'GET', '/v1/members?limit=20', c.key);
  }
}

async function checkout(c: Community) {
  const buyer = `b${crypto.randomBytes(6).toString('hex')}`;
  const [tier, plan] = Math.random() < 0.5 ? ['gold', 'gold-monthly'] : ['silver', 'silver-monthly'];
  const link = await request('checkout link', 'POST', '/v1/checkout-links', c.key,
    { tier_id: c.tiers[tier], plan_id: c.plans[plan], subject: { external: { namespace: 'soak', external_user_id: buyer } } });
  if (link?.status !== 200) return;
  const paid = await request('sandbox pay', 'POST', link.body.url, null, undefined, true);
  if (paid?.status === 303) c.buyers.push(buyer);
}

async function lifecycle(c: Community) {
  const sub = pick(c.subs);
  if (!sub) return checkout(c);
  const r = Math.random();
  if (r < 0.25) await request('cancel', 'POST', `/v1/subscriptions/${sub}/cancel`, c.key);
  else if (r < 0.45) await request('reactivate', 'POST', `/v1/subscriptions/${sub}/reactivate`, c.key);
  else if (r < 0.7) await request('switch', 'POST', `/v1/subscriptions/${sub}/switch`, c.key, { plan_id: c.plans[Math.random() < 0.5 ? 'gold-monthly' : 'silver-monthly'] });
  else if (r < 0.85) await request('pause', 'POST', `/v1/subscriptions/${sub}/pause`, c.key, {});
  else await request('resume', 'POST', `/v1/subscriptions/${sub}/resume`, c.key);
}

function tick(communities: Community[]) {
  if (inFlight >= MAX_IN_FLIGHT) { skipped++; return; }
  const c = pick(communities)!;
  const r = Math.random();
  const op = r < 0.55 ? read(c) : r < 0.75 ? checkout(c) : lifecycle(c);
  inFlight++;
  void op.finally(() => { inFlight--; });
}

// ---- checks -----------------------------------------------------------------------------

async function deliveryGaps(owner: pg.Pool, ids: string[], since: Date): Promise<{ undelivered: number; withoutDelivery: number; deliveries: number }> {
  const { rows } = await owner.query<{ event_id: string }>(
    'select distinct event_id from billing.webhook_deliveries where community_id = any ($1)', [ids]);
  const undelivered = rows.filter((r) => !received.has(r.event_id)).length;
  const { rows: missing } = await owner.query<{ n: number }>(
    `select count(*)::int as n from billing.events e where e.community_id = any ($1) and e.created_at > $2
       and not exists (select 1 from billing.webhook_deliveries d where d.community_id = e.community_id and d.event_id = e.id)`, [ids, since]);
  return { undelivered, withoutDelivery: missing[0].n, deliveries: rows.length };
}

async function overdue(owner: pg.Pool, ids: string[]): Promise<number> {
  const { rows } = await owner.query<{ n: number }>(
    `select count(*)::int as n from billing.subscriptions s where s.community_id = any ($1) and s.provider = 'sandbox'
       and (s.status in ('active', 'trialing', 'cancelling') and s.current_period_end <= billing.community_now(s.community_id)
            or s.status = 'paused' and s.paused_until <= billing.community_now(s.community_id))`, [ids]);
  return rows[0].n;
}

async function invoiceChecks(owner: pg.Pool, ids: string[]) {
  const { rows } = await owner.query<Record<string, number>>(
    `with inv as (
       select i.*, (select coalesce(sum((l->>'amount_cents')::bigint), 0) from jsonb_array_elements(i.lines) l) as line_sum,
         (select count(*) from billing.payment_attempts a where a.community_id = i.community_id and a.invoice_id = i.id and a.status = 'succeeded') as ok
       from billing.invoices i where i.community_id = any ($1))
     select count(*)::int as invoices,
       count(*) filter (where status = 'paid')::int as paid,
       count(*) filter (where line_sum <> total_cents)::int as lines_do_not_add_up,
       count(*) filter (where status = 'paid' and (ok <> 1 or amount_paid_cents <> total_cents))::int as paid_wrongly,
       count(*) filter (where status <> 'paid' and ok > 0)::int as payment_on_unpaid,
       (select count(*)::int from (select 1 from inv where billing_reason in ('subscription_create', 'subscription_cycle')
          group by subscription_id, period_start having count(*) > 1) d) as periods_invoiced_twice,
       (select count(*)::int from (select 1 from billing.subscriptions s where s.community_id = any ($1) and s.status <> 'cancelled'
          group by s.community_id, s.member_id having count(*) > 1) m) as members_with_two_live_subscriptions,
       (select count(*)::int from billing.subscriptions s where s.community_id = any ($1)) as subscriptions,
       (select count(*)::int from inv where billing_reason = 'subscription_cycle') as renewals
     from inv`, [ids]);
  return rows[0];
}

// ---- report -----------------------------------------------------------------------------

function pct(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function writeSection(text: string) {
  const current = fs.existsSync(RESULTS) ? fs.readFileSync(RESULTS, 'utf8') : '# Benchmarks\n';
  const start = current.indexOf('\n## Soak\n');
  let next = start < 0 ? -1 : current.indexOf('\n## ', start + 1);
  if (start >= 0 && next < 0) next = current.length;
  const updated = start < 0 ? `${current.trimEnd()}\n\n${text}` : `${current.slice(0, start)}\n${text}${current.slice(next)}`;
  fs.writeFileSync(RESULTS, `${updated.trimEnd()}\n`);
}

// ---- main -------------------------------------------------------------------------------

async function main() {
  const load0 = os.loadavg();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-soak-'));
  fs.chmodSync(dataDir, 0o755);
  const port = await freePort();
  say(`private PostgreSQL on port ${port}, data in ${dataDir}`);
  let server: EmbeddedDatabase = await startEmbedded(dataDir, { port });
  const url = server.url('billing_soak');
  await ensureDatabase(server.url('postgres'), 'billing_soak');
  await applyMigrations(url, { includeCurrent: true });
  const appUrl = await ensureLogin(url, 'billing_app');
  const workerUrl = await ensureLogin(url, 'billing_worker');
  const owner = new pg.Pool({ connectionString: url, max: 4 });
  owner.on('error', () => {});
  const pgVersion = (await owner.query<{ v: string }>(`select current_setting('server_version') as v`)).rows[0].v;

  const receiver = await startReceiver();
  const encryptionKey = crypto.randomBytes(32).toString('base64');
  const apiPort = await freePort();
  apiBase = `http://127.0.0.1:${apiPort}`;
  const apiLog = path.join(dataDir, 'api.log');
  const workerLog = path.join(dataDir, 'worker.log');
  const api = new Supervised('API', 'bench/soak/api.ts', {
    DATABASE_URL: url, APP_DATABASE_URL: appUrl, SOAK_PORT: String(apiPort), WEBHOOK_ENCRYPTION_KEY: encryptionKey,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'warn', LOG_FORMAT: 'json', PG_POOL_SIZE: '10',
    RATE_LIMIT_KEY_PER_MINUTE: '1000000', RATE_LIMIT_KEY_BURST: '100000', RATE_LIMIT_IP_PER_MINUTE: '1000000', RATE_LIMIT_IP_BURST: '100000',
  }, 'listening', apiLog);
  await api.start();
  const workerEnv = { BENCH_DATABASE_URL: workerUrl, BENCH_ENCRYPTION_KEY: encryptionKey, LOG_LEVEL: 'warn', LOG_FORMAT: 'json' };
  const worker = new Supervised('worker', 'bench/webhooks/worker.ts', workerEnv, 'ready', workerLog);
  await worker.start();

  const catalog = readCatalogFile(path.join(packageRoot, 'db/demo/demo-catalog.json'));
  const communities: Community[] = [];
  for (let i = 0; i < COMMUNITIES; i++) {
    const { id } = await createCommunity(owner, `Soak ${i + 1}`);
    const ids = await applyCatalog(owner, id, catalog);
    const { key } = await createKey(owner, id, [...SCOPES], 'soak');
    const c: Community = { id, key, tiers: ids.tiers, plans: ids.plans, buyers: [], subs: [] };
    const ep = await request('setup', 'POST', '/v1/webhooks/endpoints', key, { url: `${receiver.url}/${id}` });
    if (ep?.status !== 201) throw new Error(`endpoint: ${JSON.stringify(ep)}`);
    communities.push(c);
  }
  const ids = communities.map((c) => c.id);
  const since = new Date();
  latencies.length = 0; byKind.clear(); errors.clear(); completed = 0;

  // Memory: every 5 s, each process (each worker incarnation on its own).
  const memory = new Map<string, { first: number; last: number; max: number }>();
  const sample = () => {
    for (const [name, pid] of [[`API #${api.incarnation}`, api.proc?.pid], [`worker #${worker.incarnation}`, worker.proc?.pid], ['runner + receiver', process.pid]] as const) {
      const mb = rssMb(pid);
      if (mb === null) continue;
      const m = memory.get(name);
      if (!m) memory.set(name, { first: mb, last: mb, max: mb });
      else { m.last = mb; m.max = Math.max(m.max, mb); }
    }
  };
  sample();
  const sampler = setInterval(sample, 5_000);

  say(`traffic: ${SECONDS} s at ${RATE} requests/s over ${COMMUNITIES} communities`);
  const t0 = Date.now();
  const traffic = setInterval(() => tick(communities), 1000 / RATE);
  let round = 0;
  const clockErrors: string[] = [];
  const renewals = setInterval(() => {
    const c = communities[round % COMMUNITIES];
    // Half through the CLI's `sandbox advance` (which runs its transaction again after a
    // deadlock with the traffic), half by moving the clock alone for the worker's cron.
    const step = round++ % 2 === 0
      ? sandboxAdvance(owner, c.id, CLOCK_DAYS)
      : owner.query(`update billing.communities set clock_offset = clock_offset + make_interval(days => $2) where id = $1`, [c.id, CLOCK_DAYS]);
    void Promise.resolve(step).catch((err: Error) => { clockErrors.push(err.message); });
  }, 10_000);
  const faults: string[] = [];
  const killAt = t0 + SECONDS * 400;
  const restartAt = t0 + SECONDS * 600;
  let killed = false;
  let restarted = false;
  while (Date.now() < t0 + SECONDS * 1000) {
    await sleep(250);
    if (!killed && Date.now() >= killAt) {
      killed = true;
      sample();
      const at = ((Date.now() - t0) / 1000).toFixed(0);
      const t = Date.now();
      await worker.killAndRestart();
      faults.push(`worker SIGKILL at ${at} s, new worker ready ${((Date.now() - t) / 1000).toFixed(1)} s later`);
      say(faults[faults.length - 1]);
    }
    if (!restarted && Date.now() >= restartAt) {
      restarted = true;
      const at = ((Date.now() - t0) / 1000).toFixed(0);
      const t = Date.now();
      await server.stop();
      // Down 10 s (issue 18), traffic still coming.
      await sleep(Number(process.env.SOAK_DB_DOWN_SECONDS ?? 10) * 1000);
      server = await startEmbedded(dataDir, { port });
      faults.push(`database restart at ${at} s (fast shutdown, ${process.env.SOAK_DB_DOWN_SECONDS ?? 10} s down, start: ${((Date.now() - t) / 1000).toFixed(1)} s without a server)`);
      say(faults[faults.length - 1]);
    }
  }
  clearInterval(traffic);
  clearInterval(renewals);
  const trafficSeconds = (Date.now() - t0) / 1000;
  while (inFlight > 0) await sleep(100);
  sample();
  say(`traffic done: ${completed} requests in ${trafficSeconds.toFixed(0)} s; waiting for deliveries and period ends`);

  // Drain: every delivery received and every due period end applied (the worker's cron runs each minute).
  const drainStart = Date.now();
  let gaps = await deliveryGaps(owner, ids, since);
  let late = await overdue(owner, ids);
  while ((gaps.undelivered > 0 || late > 0) && Date.now() - drainStart < DRAIN_LIMIT_MS) {
    await sleep(2_000);
    gaps = await deliveryGaps(owner, ids, since);
    late = await overdue(owner, ids);
  }
  const drainSeconds = (Date.now() - drainStart) / 1000;
  clearInterval(sampler);
  sample();
  const money = await invoiceChecks(owner, ids);
  const { rows: ev } = await owner.query<{ n: number }>('select count(*)::int as n from billing.events where community_id = any ($1) and created_at > $2', [ids, since]);
  const duplicates = [...received.values()].filter((n) => n > 1).length;
  const apiLogText = fs.readFileSync(apiLog, 'utf8').split('\n').filter(Boolean);
  const apiLogLines = apiLogText.length;
  // What the API's 5xx answers were: the messages of its "unexpected error" lines.
  const causes = new Map<string, number>();
  for (const line of apiLogText) {
    try {
      const j = JSON.parse(line) as { msg?: string; err?: { message?: string; code?: string }; method?: string; route?: string };
      if (j.msg === 'unexpected error') {
        const m = `${(j.err?.message ?? '?').replace(/\d+/g, 'N').slice(0, 80)}${j.err?.code ? ` [${j.err.code}]` : ''} on ${j.method ?? '?'} ${j.route ?? '?'}`;
        causes.set(m, (causes.get(m) ?? 0) + 1);
      }
    } catch { /* a stack trace line */ }
  }
  const workerLogLines = fs.readFileSync(workerLog, 'utf8').split('\n').filter(Boolean).length;

  api.stop();
  worker.stop();
  await owner.end();
  receiver.server.closeAllConnections();
  receiver.server.close();
  await server.stop();
  const load1 = os.loadavg();
  fs.rmSync(dataDir, { recursive: true, force: true });

  // ---- the section ----
  const cpus = os.cpus();
  const when = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const errorRows = [...errors.entries()].sort((a, b) => b[1] - a[1]);
  const wrong = money.lines_do_not_add_up + money.paid_wrongly + money.payment_on_unpaid + money.periods_invoiced_twice;
  const lost = gaps.undelivered + gaps.withoutDelivery;
  const kinds = [...byKind.entries()].filter(([k]) => k !== 'setup').sort((a, b) => b[1].length - a[1].length);
  const text = [
    '## Soak',
    '',
    `\`npx tsx bench/soak/run.ts\` (\`SOAK_SECONDS\`, default 600; \`SOAK_RATE\`, default 25 requests started per second;`,
    `\`SOAK_CLOCK_DAYS\`, default 3), this run at ${RATE}/s with ${CLOCK_DAYS}-day clock steps,`,
    'written by the script. A private embedded PostgreSQL, the API and one worker as child processes, a',
    'local webhook receiver; four sandbox communities with the demo catalog and one endpoint each. Mixed',
    'open-loop traffic (55% reads, 20% checkouts paid on the sandbox page, 25% cancel/reactivate/switch/',
    'pause/resume), a renewal round through the sandbox test clock every 10 s (one community N days ahead; half applied',
    'at once, half by the worker\'s cron), one worker SIGKILL + restart at 40% and one database restart at',
    '60% of the run; then a drain until every delivery and period end is done (at most 5 minutes). A',
    'child process that exits on its own is counted as a crash and started again, as a supervisor would.',
    '4xx answers are expected (a cancel of a cancelled subscription is 409 conflict, a switch to the',
    'current plan 422, ...); they are listed with the rest.',
    '',
    `Run ${when}: ${trafficSeconds.toFixed(0)} s of traffic. Machine: ${cpus.length} x ${cpus[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB,`,
    `${os.type()} ${os.release()}, Node ${process.version}, PostgreSQL ${pgVersion} (embedded). Load average`,
    `(1/5/15 min) ${load0.map((x) => x.toFixed(1)).join('/')} at the start, ${load1.map((x) => x.toFixed(1)).join('/')} at the end (the machine is shared).`,
    '',
    '| figure | value |',
    '|---|---|',
    `| requests completed | ${completed} (${(completed / trafficSeconds).toFixed(1)}/s; offered ${RATE}/s, ${skipped} ticks skipped at ${MAX_IN_FLIGHT} in flight) |`,
    `| latency p50 / p99 / max | ${pct(latencies, 50).toFixed(0)} / ${pct(latencies, 99).toFixed(0)} / ${Math.max(...latencies).toFixed(0)} ms |`,
    `| faults | ${faults.join('; ')} |`,
    `| events written / with a delivery | ${ev[0].n} / ${gaps.deliveries} |`,
    `| **deliveries lost** | **${lost}** (${gaps.undelivered} never received, ${gaps.withoutDelivery} events without a delivery row) |`,
    `| deliveries received (duplicates: ids received more than once) | ${receivedTotal} (${duplicates}) |`,
    `| drain after traffic | ${drainSeconds.toFixed(0)} s; period ends still overdue: ${late} |`,
    `| invoices (paid) / renewals / subscriptions | ${money.invoices} (${money.paid}) / ${money.renewals} / ${money.subscriptions} |`,
    `| **invoices wrong** | **${wrong}** (lines not adding up ${money.lines_do_not_add_up}, paid wrongly ${money.paid_wrongly}, payment on unpaid ${money.payment_on_unpaid}, period invoiced twice ${money.periods_invoiced_twice}) |`,
    `| members with two live subscriptions | ${money.members_with_two_live_subscriptions} |`,
    `| test clock calls failed | ${clockErrors.length}${clockErrors.length ? ` (${[...new Set(clockErrors)].slice(0, 2).join('; ')})` : ''} |`,
    `| process crashes (restarted by the runner, as a supervisor would) | ${[...api.crashes, ...worker.crashes].join('; ') || 'none'} |`,
    `| log lines (API / worker) | ${apiLogLines} / ${workerLogLines} |`,
    `| API unexpected errors by message | ${[...causes.entries()].sort((a, b) => b[1] - a[1]).map(([m, n]) => `${n} x ${m}`).join('; ') || 'none'} |`,
    '',
    '| request | n | p50 ms | p99 ms |',
    '|---|---:|---:|---:|',
    ...kinds.map(([k, xs]) => `| ${k} | ${xs.length} | ${pct(xs, 50).toFixed(0)} | ${pct(xs, 99).toFixed(0)} |`),
    '',
    '| errors by status and code | n |',
    '|---|---:|',
    ...(errorRows.length ? errorRows.map(([k, n]) => `| ${k} | ${n} |`) : ['| none | 0 |']),
    '',
    '| process (#n: its nth start) | RSS first / last / max (MB) |',
    '|---|---|',
    ...[...memory.entries()].map(([k, m]) => `| ${k} | ${m.first} / ${m.last} / ${m.max} |`),
    '',
  ].join('\n');
  process.stdout.write(`${text}\n`);
  writeSection(text);
  say(`written to ${path.relative(process.cwd(), RESULTS)}`);
  process.exit(lost === 0 && wrong === 0 && api.crashes.length + worker.crashes.length === 0 ? 0 : 1);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
