// Prometheus metrics (prom-client), one registry per process, served at /metrics.
// Counters and histograms are updated where things happen; gauges about the database
// (pools, queue, ledger) are read at scrape time by collectors registered with
// observeDatabase(). docs/operations.md ("Metrics") says what each one means.
import client from 'prom-client';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export const httpRequests = new client.Counter({
  name: 'billing_http_requests_total',
  help: 'HTTP requests answered, by route template, method and status code.',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [registry],
});

export const httpDuration = new client.Histogram({
  name: 'billing_http_request_duration_seconds',
  help: 'Time from request received to response finished, by route template and method.',
  labelNames: ['route', 'method'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const rateLimitRefusals = new client.Counter({
  name: 'billing_rate_limit_refusals_total',
  help: 'Requests refused with 429 by the per-key or per-IP rate limit.',
  registers: [registry],
});

export const readsServed = new client.Counter({
  name: 'billing_reads_total',
  help: 'Read operations of API keys by where they ran: standby (READ_DATABASE_URL) or primary.',
  labelNames: ['target'],
  registers: [registry],
});

export const readReplicaUp = new client.Gauge({
  name: 'billing_read_replica_up',
  help: 'Whether this process reads from a standby of READ_DATABASE_URL (1) or skips it (0: unreachable, behind READ_MAX_LAG, not a standby).',
  labelNames: ['replica'],
  registers: [registry],
});

export const readReplicaLag = new client.Gauge({
  name: 'billing_read_replica_lag_seconds',
  help: 'How far a standby was behind the primary at its last check (0: it had replayed the primary\'s position).',
  labelNames: ['replica'],
  registers: [registry],
});

export const webhookDeliveries = new client.Counter({
  name: 'billing_webhook_deliveries_total',
  help: 'Webhook delivery attempts made by this process, by outcome (success, http_error, network_error, unsigned).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookJobsPutBack = new client.Counter({
  name: 'billing_webhook_jobs_put_back_total',
  help: 'Webhook delivery jobs this process fetched while their endpoint held its share of the slots, and put back in the queue, due at once.',
  registers: [registry],
});

export const webhookDuration = new client.Histogram({
  name: 'billing_webhook_delivery_duration_seconds',
  help: 'Duration of one webhook delivery attempt (the POST to the endpoint).',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
  registers: [registry],
});

export const stripeCalls = new client.Counter({
  name: 'billing_stripe_calls_total',
  help: 'Requests to the Stripe API, by outcome (success, client_error, server_error, network_error).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const jobs = new client.Counter({
  name: 'billing_jobs_total',
  help: 'graphile-worker jobs run by this process, by task and outcome (success, error).',
  labelNames: ['task', 'outcome'] as const,
  registers: [registry],
});

export const jobDuration = new client.Histogram({
  name: 'billing_job_duration_seconds',
  help: 'Duration of graphile-worker jobs, by task.',
  labelNames: ['task'] as const,
  buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
  registers: [registry],
});

/** A pool as pg.Pool exposes its counts (structural: core does not import pg). */
export interface PoolCounts { totalCount: number; idleCount: number; waitingCount: number }

/** Runs one read-only query as the owner role. */
export type OwnerQuery = <R>(text: string) => Promise<{ rows: R[] }>;

const pools = new Map<string, PoolCounts>();
let ownerQuery: OwnerQuery | null = null;

new client.Gauge({
  name: 'billing_db_pool_connections',
  help: 'Connections of each pool (api, owner) by state: in_use, idle, and waiting (clients queued for a connection).',
  labelNames: ['pool', 'state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [name, p] of pools) {
      this.set({ pool: name, state: 'in_use' }, p.totalCount - p.idleCount);
      this.set({ pool: name, state: 'idle' }, p.idleCount);
      this.set({ pool: name, state: 'waiting' }, p.waitingCount);
    }
  },
});

// Queue: graphile-worker's jobs table, one aggregate per scrape. Pending = waiting to
// run (run_at passed, not locked, attempts left); scheduled = run_at in the future
// (retries); running = locked by a worker; failed = out of attempts (permanently).
const queueJobs = new client.Gauge({
  name: 'billing_queue_jobs',
  help: 'graphile-worker jobs by state: pending (due, not running), scheduled (due later), running, failed (attempts exhausted).',
  labelNames: ['state'] as const,
  registers: [registry],
});
const queueOldest = new client.Gauge({
  name: 'billing_queue_oldest_pending_seconds',
  help: 'Age of the oldest pending job (now - run_at), 0 when none is pending.',
  registers: [registry],
});
const eventsWritten = new client.Gauge({
  name: 'billing_events_written',
  help: 'Rows inserted into billing.events (the event outbox and ledger feed) since the PostgreSQL statistics were last reset (pg_stat_user_tables): use rate().',
  registers: [registry],
});
const subscriptions = new client.Gauge({
  name: 'billing_subscriptions',
  help: 'Subscriptions by status across all communities (e.g. past_due growth).',
  labelNames: ['status'] as const,
  registers: [registry],
});
const scrapeErrors = new client.Counter({
  name: 'billing_metrics_scrape_errors_total',
  help: 'Database reads of a /metrics scrape that failed (their gauges keep the last value).',
  registers: [registry],
});

const QUEUE_SQL = `
  select count(*) filter (where locked_at is null and attempts < max_attempts and run_at <= now())::int as pending,
         count(*) filter (where locked_at is null and attempts < max_attempts and run_at > now())::int as scheduled,
         count(*) filter (where locked_at is not null)::int as running,
         count(*) filter (where attempts >= max_attempts and locked_at is null)::int as failed,
         coalesce(extract(epoch from now() - min(run_at) filter (where locked_at is null and attempts < max_attempts and run_at <= now())), 0)::float8 as oldest
    from graphile_worker._private_jobs`;
const EVENTS_SQL = `select coalesce(sum(n_tup_ins), 0)::float8 as n from pg_stat_user_tables where schemaname = 'billing' and relname = 'events'`;
const SUBSCRIPTIONS_SQL = `select status, count(*)::int as n from billing.subscriptions group by status`;

async function collectDatabase(): Promise<void> {
  const query = ownerQuery;
  if (!query) return;
  const guard = async (f: () => Promise<void>) => { try { await f(); } catch { scrapeErrors.inc(); } };
  await Promise.all([
    guard(async () => {
      const { rows: [q] } = await query<{ pending: number; scheduled: number; running: number; failed: number; oldest: number }>(QUEUE_SQL);
      for (const state of ['pending', 'scheduled', 'running', 'failed'] as const) queueJobs.set({ state }, q[state]);
      queueOldest.set(q.oldest);
    }),
    guard(async () => {
      const { rows: [e] } = await query<{ n: number }>(EVENTS_SQL);
      eventsWritten.set(e.n);
    }),
    guard(async () => {
      const { rows } = await query<{ status: string; n: number }>(SUBSCRIPTIONS_SQL);
      subscriptions.reset();
      for (const r of rows) subscriptions.set({ status: r.status }, r.n);
    }),
  ]);
}

/** Pools to report, and the owner connection the scrape-time queries use. */
export function observeDatabase(opts: { pools: Record<string, PoolCounts>; ownerQuery: OwnerQuery }): void {
  for (const [name, p] of Object.entries(opts.pools)) pools.set(name, p);
  ownerQuery = opts.ownerQuery;
}

/** The Prometheus text of every metric, database gauges read now. */
export async function scrape(): Promise<{ contentType: string; body: string }> {
  await collectDatabase();
  return { contentType: registry.contentType, body: await registry.metrics() };
}
