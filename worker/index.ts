// The worker process: graphile-worker running worker/tasks with LISTEN/NOTIFY (new
// jobs start within milliseconds of their commit; pollInterval only matters for jobs
// scheduled in the future, such as webhook retries). It connects as billing_worker
// (src/db/logins.ts): graphile-worker's own tables, and our SECURITY DEFINER doors
// (billing_private.worker_*, webhook_*, purge_expired), nothing else. Any number of workers
// may run at once: graphile-worker locks each job to one of them.
//
// Dead workers: graphile-worker releases the jobs of a worker that died without
// shutting down only after 4 hours. Each worker started here beats in
// billing_private.worker_heartbeats every heartbeatMs; any of them that sees another
// silent for staleAfterMs hands its jobs back to the queue (force_unlock_workers), so
// a delivery cut off by a crash is retried (same webhook-id) within about a minute.
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { Logger, run, Runner, TaskList, WorkerEvents } from 'graphile-worker';
import { Config, loadConfig } from '../src/core/config';
import { log } from '../src/core/log';
import { jobDuration, jobs } from '../src/core/metrics';
import { taskList } from './tasks';
import { makeWebhookSendTask } from './tasks/webhook_deliveries__send';
import { subscriptionsApplyDueCron } from './tasks/subscriptions__apply_due';
import { billingPurgeExpiredCron } from './tasks/billing__purge_expired';

export { RETRY_SCHEDULE_MS, DISABLE_AFTER_MS } from './tasks/webhook_deliveries__send';

export interface StartWorkerOptions {
  connectionString: string;
  /** Jobs run at once by this process (default 8). */
  concurrency?: number;
  /** Milliseconds between polls for jobs scheduled in the future (default 1000). */
  pollInterval?: number;
  /** Webhook retry delays in ms, index n = delay before attempt n+1 (default RETRY_SCHEDULE_MS). */
  retrySchedule?: readonly number[];
  /** Continuous failure after which an endpoint is disabled (default 5 days). */
  disableAfterMs?: number;
  /** HTTP timeout of one delivery (default 15 s). */
  deliveryTimeoutMs?: number;
  /** Slots one endpoint answering fast may hold (default half the concurrency); a slow one holds 1. */
  endpointConcurrency?: number;
  /** A delivery request this long marks its endpoint slow (default 1 s). */
  slowEndpointMs?: number;
  /** Heartbeat period and the silence after which a worker counts as dead (10 s, 60 s). */
  heartbeatMs?: number;
  staleAfterMs?: number;
  /** WEBHOOK_ENCRYPTION_KEY and WEBHOOK_ALLOW_PRIVATE_URLS; default loadConfig(). */
  config?: Pick<Config, 'webhookEncryptionKey' | 'webhookAllowPrivateUrls'>;
  /** On stop(), how long running jobs may go on before their HTTP requests are cut (default 5 s). */
  shutdownAbortMs?: number;
  /** Install SIGINT/SIGTERM handlers (default false: the caller owns the process). */
  handleSignals?: boolean;
  /** Log graphile-worker's info lines too (default: warnings and errors only). */
  verbose?: boolean;
}

export interface WorkerHandle {
  stop(): Promise<void>;
  /** graphile-worker pool ids of this process (as in jobs.locked_by). */
  readonly workerIds: readonly string[];
}

function logger(verbose: boolean): Logger {
  return new Logger(() => (level: string, message: string) => {
    if (level === 'error') log.error({ component: 'worker' }, message);
    else if (level === 'warning') log.warn({ component: 'worker' }, message);
    else if (verbose) log.info({ component: 'worker' }, message);
  });
}

/** One log line and metrics per job: task, job id, attempt, duration, outcome. */
function observeJobs(events: WorkerEvents): void {
  const started = new Map<string, bigint>();
  events.on('job:start', ({ job }) => { started.set(job.id, process.hrtime.bigint()); });
  events.on('job:complete', ({ job, error }) => {
    const t0 = started.get(job.id);
    started.delete(job.id);
    const seconds = t0 === undefined ? 0 : Number(process.hrtime.bigint() - t0) / 1e9;
    const outcome = error ? 'error' : 'success';
    jobs.inc({ task: job.task_identifier, outcome });
    jobDuration.observe({ task: job.task_identifier }, seconds);
    const fields = {
      kind: 'job', task: job.task_identifier, job_id: job.id, attempt: job.attempts, max_attempts: job.max_attempts,
      duration_ms: Math.round(seconds * 1e6) / 1e3, outcome,
    };
    if (error) log.error({ ...fields, err: error }, 'job');
    else log.info(fields, 'job');
  });
}

export async function startWorker(options: StartWorkerOptions | string): Promise<WorkerHandle> {
  const opts: StartWorkerOptions = typeof options === 'string' ? { connectionString: options } : options;
  const config = opts.config ?? loadConfig();
  const concurrency = opts.concurrency ?? 8;
  const heartbeatMs = opts.heartbeatMs ?? 10_000;
  const staleAfterMs = opts.staleAfterMs ?? 60_000;
  const delivery = makeWebhookSendTask({
    encryptionKey: config.webhookEncryptionKey,
    allowPrivateUrls: config.webhookAllowPrivateUrls,
    retrySchedule: opts.retrySchedule,
    disableAfterMs: opts.disableAfterMs,
    timeoutMs: opts.deliveryTimeoutMs,
    maxPerEndpoint: opts.endpointConcurrency ?? Math.max(1, Math.floor(concurrency / 2)),
    slowEndpointMs: opts.slowEndpointMs,
  });
  const tasks: TaskList = { ...taskList, webhook_deliveries__send: delivery.task };

  const pool = new pg.Pool({ connectionString: opts.connectionString, max: concurrency + 3, application_name: 'billing-worker' });
  // Errors surface through the queries that hit them; an idle client's error must not crash the process.
  pool.on('error', () => {});
  pool.on('connect', (client) => { client.on('error', () => {}); });
  const workerIds = new Set<string>();
  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  // Jobs are locked by the pool's id (jobs.locked_by), so that is what beats.
  events.on('pool:create', ({ workerPool }) => { workerIds.add(workerPool.id); });
  observeJobs(events);

  const beat = async () => {
    try {
      const { rows } = await pool.query<{ dead: string[] }>(
        'select billing_private.worker_heartbeat($1, $2::interval) as dead', [[...workerIds], `${staleAfterMs} milliseconds`]);
      if (rows[0].dead.length > 0) {
        // Released jobs are due now: wake every worker rather than wait for a poll.
        await pool.query(`select pg_notify('jobs:insert', '')`);
      }
    } catch (err) {
      log.warn({ component: 'worker', err }, 'heartbeat failed');
    }
  };

  let runner: Runner;
  try {
    runner = await run({
      pgPool: pool,
      concurrency,
      pollInterval: opts.pollInterval ?? 1000,
      taskList: tasks,
      // Period ends, trials, expiries every minute; retention purge hourly.
      crontab: [subscriptionsApplyDueCron, billingPurgeExpiredCron].join('\n'),
      noHandleSignals: !opts.handleSignals,
      logger: logger(opts.verbose ?? false),
      events,
      // Jobs of an endpoint that holds its share of the slots wait in the queue.
      forbiddenFlags: delivery.forbiddenFlags,
      gracefulShutdownAbortTimeout: opts.shutdownAbortMs ?? 5000,
    });
  } catch (err) {
    delivery.close();
    await pool.end();
    throw err;
  }
  await beat();
  const timer = setInterval(() => { void beat(); }, heartbeatMs);
  timer.unref();

  let stopping: Promise<void> | null = null;
  return {
    get workerIds() { return [...workerIds]; },
    stop() {
      stopping ??= (async () => {
        clearInterval(timer);
        await runner.stop();
        await pool.query('select billing_private.worker_heartbeat_stop($1)', [[...workerIds]]).catch(() => {});
        delivery.close();
        await pool.end();
      })();
      return stopping;
    },
  };
}
