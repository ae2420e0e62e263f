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
import { Config, DEFAULT_DB_TIMEOUTS, DEFAULT_DISCORD_API_URL, DEFAULT_TELEGRAM_API_URL, loadConfig } from '../src/core/config';
import { databaseUnavailableCause } from '../src/core/errors';
import { log } from '../src/core/log';
import { jobDuration, jobs } from '../src/core/metrics';
import { taskList } from './tasks';
import { makeWebhookSendTask } from './tasks/webhook_deliveries__send';
import { SharedEndpointSlots } from './tasks/endpoint-slots';
import { subscriptionsApplyDueCron } from './tasks/subscriptions__apply_due';
import { billingPurgeExpiredCron } from './tasks/billing__purge_expired';
import { analyticsCompactCron } from './tasks/analytics__compact';
import { makePlatformDeliveryTask, type PlatformDeliveryOptions } from './tasks/platform_deliveries__apply';
import { platformReconcileCron } from './tasks/platform_connections__reconcile';
import { makeMailTask, type MailOptions } from './tasks/mail_messages__send';
import { mailMessagesRemind, mailMessagesRemindCron } from './tasks/mail_messages__remind';

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
  /** WEBHOOK_ENCRYPTION_KEY, WEBHOOK_ALLOW_PRIVATE_URLS and WEBHOOK_PORTS (default any); default loadConfig(). */
  config?: Pick<Config, 'webhookEncryptionKey' | 'webhookAllowPrivateUrls'> & Partial<Pick<Config, 'webhookPorts'>>;
  /** On stop(), how long running jobs may go on before their HTTP requests are cut (default 5 s). */
  shutdownAbortMs?: number;
  /** Install SIGINT/SIGTERM handlers (default false: the caller owns the process). */
  handleSignals?: boolean;
  /** A connect to the database gives up after this (default PG_CONNECT_TIMEOUT_MS, 5 s). */
  connectTimeoutMs?: number;
  /** How long a connect waits for the database to come back before failing (default 5 min). */
  outageWaitMs?: number;
  /**
   * Run benefit deliveries on Discord and Telegram (default true). A worker takes every
   * community's jobs and its platform settings decide their outcome, so tests that share
   * one database turn it off except where deliveries are tested.
   */
  platformDeliveries?: boolean;
  /** The platforms' API URLs and deployment bot tokens (default: the config's, DISCORD_API_URL and so on). */
  platforms?: Partial<Omit<PlatformDeliveryOptions, 'encryptionKey'>>;
  /**
   * Send (or keep) mail to members (mail_messages__send). Off unless given: a worker
   * takes every community's jobs, so only the service (src/main.ts) and the tests of
   * mail turn it on; a worker without it leaves mail jobs to one that has it.
   */
  mail?: MailOptions;
  /** Log graphile-worker's info lines too (default: warnings and errors only). */
  verbose?: boolean;
}

/**
 * Makes the pool's promise-style connect() wait out an outage (the database restarting,
 * unreachable) for up to maxWaitMs, retrying with backoff, instead of failing at once:
 * tasks pause meanwhile and carry on once it is back. Callback-style connects
 * (graphile-worker's LISTEN client, pool.query) keep their own retry loops.
 *
 * graphile-worker records a job's outcome (and takes a job) with one statement on its
 * jobs table, which it does not retry when the connection is cut under it, and does
 * not await: the rejection is unhandled and the job stays locked by this live worker
 * for 4 hours. Those bookkeeping statements alone (single statements outside any
 * transaction, each safe to repeat: delete by id, update where still locked by us)
 * are run again on a fresh connection. Our tasks' statements are never repeated.
 */
const JOB_BOOKKEEPING = /\._private_jobs\b/;
function waitOutOutages(pool: pg.Pool, maxWaitMs: number, stopping: () => boolean): void {
  const connect = pool.connect.bind(pool) as (callback?: unknown) => Promise<pg.PoolClient> | void;
  const patient = async (): Promise<pg.PoolClient> => {
    const deadline = Date.now() + maxWaitMs;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      try {
        return retryBookkeeping(await (connect() as Promise<pg.PoolClient>));
      } catch (err) {
        if (!databaseUnavailableCause(err) || stopping() || Date.now() + delay > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  };
  const wrapped = new WeakSet<pg.PoolClient>();
  const retryBookkeeping = (client: pg.PoolClient): pg.PoolClient => {
    if (wrapped.has(client)) return client;
    wrapped.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<pg.QueryResult>;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const config = args[0] as string | { text?: unknown } | undefined;
      const text = typeof config === 'string' ? config : config?.text;
      const idle = (client as unknown as { _txStatus?: string | null })._txStatus !== 'T';
      if (args.some((a) => typeof a === 'function') || typeof text !== 'string' || !JOB_BOOKKEEPING.test(text) || !idle) return query(...args);
      return query(...args).catch(async (err: unknown) => {
        if (!databaseUnavailableCause(err) || stopping()) throw err;
        // The dead connection goes back to the pool now (destroyed, its slot freed), not
        // when graphile-worker releases it after this query: every worker may be waiting
        // here at once, and holding the dead ones while asking for fresh ones could take
        // every slot of the pool and wait out the whole outageWaitMs after the database
        // is back. graphile-worker's own release() of it later does nothing.
        const release = client.release.bind(client);
        (client as unknown as { release: () => void }).release = () => {};
        release(err as Error);
        const fresh = await patient();
        try {
          const result = await fresh.query(...(args as [string]));
          fresh.release();
          return result;
        } catch (again) {
          fresh.release(again as Error);
          throw again;
        }
      });
    };
    return client;
  };
  (pool as unknown as { connect: (callback?: unknown) => unknown }).connect =
    (callback?: unknown) => (typeof callback === 'function' ? connect(callback) : patient());
}

/**
 * graphile-worker does not await the query recording a job's completion or failure: when
 * the database is cut under it, that rejection is unhandled, which would end the
 * process (and with it the API in `npm start`). Those are logged as one line here (the
 * job is released by releaseStranded below); any other unhandled rejection still ends
 * the process, as Node's default does.
 */
let rejectionsWatched = false;
function survivePostJobOutages(): void {
  if (rejectionsWatched) return;
  rejectionsWatched = true;
  process.on('unhandledRejection', (reason) => {
    const cause = databaseUnavailableCause(reason);
    if (!cause) throw reason;
    log.warn({ component: 'worker', cause }, 'recording a job outcome failed: database unavailable');
  });
}

export interface WorkerHandle {
  stop(): Promise<void>;
  /** graphile-worker pool ids of this process (as in jobs.locked_by). */
  readonly workerIds: readonly string[];
}

function logger(verbose: boolean): Logger {
  return new Logger(() => (level: string, message: string, meta?: { error?: unknown }) => {
    // A task failing because the database went away: observeJobs logs it as one line
    // (outcome database_unavailable); graphile-worker's own line would add its stack.
    if (meta?.error !== undefined && databaseUnavailableCause(meta.error)) return;
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
    // The database unreachable: one line naming it, no stack (the job is retried).
    const unavailable = error ? databaseUnavailableCause(error) : null;
    if (unavailable) log.warn({ ...fields, outcome: 'database_unavailable', cause: unavailable }, 'job');
    else if (error) log.error({ ...fields, err: error }, 'job');
    else log.info(fields, 'job');
  });
}

export async function startWorker(options: StartWorkerOptions | string): Promise<WorkerHandle> {
  const opts: StartWorkerOptions = typeof options === 'string' ? { connectionString: options } : options;
  const config = opts.config ?? loadConfig();
  const concurrency = opts.concurrency ?? 8;
  const heartbeatMs = opts.heartbeatMs ?? 10_000;
  const staleAfterMs = opts.staleAfterMs ?? 60_000;
  const connectMs = opts.connectTimeoutMs ?? (config as Partial<Config>).dbTimeouts?.connectMs ?? DEFAULT_DB_TIMEOUTS.connectMs;
  // One session of this process holds its endpoint slots (advisory locks): the endpoint
  // share holds over every worker process.
  const slots = new SharedEndpointSlots(opts.connectionString, connectMs);
  const delivery = makeWebhookSendTask({
    encryptionKey: config.webhookEncryptionKey,
    allowPrivateUrls: config.webhookAllowPrivateUrls,
    ports: config.webhookPorts,
    retrySchedule: opts.retrySchedule,
    disableAfterMs: opts.disableAfterMs,
    timeoutMs: opts.deliveryTimeoutMs,
    maxPerEndpoint: opts.endpointConcurrency ?? Math.max(1, Math.floor(concurrency / 2)),
    slowEndpointMs: opts.slowEndpointMs,
    slots,
  });
  const full = config as Partial<Config>;
  const platformOptions: PlatformDeliveryOptions = {
    discordApiUrl: full.discordApiUrl ?? DEFAULT_DISCORD_API_URL,
    telegramApiUrl: full.telegramApiUrl ?? DEFAULT_TELEGRAM_API_URL,
    discordBotToken: full.discordBotToken ?? null,
    telegramBotToken: full.telegramBotToken ?? null,
    ...opts.platforms,
    encryptionKey: config.webhookEncryptionKey,
  };
  const platforms = makePlatformDeliveryTask(platformOptions);
  const tasks: TaskList = { ...taskList, webhook_deliveries__send: delivery.task };
  const crons = [subscriptionsApplyDueCron, analyticsCompactCron, billingPurgeExpiredCron];
  if (opts.platformDeliveries ?? true) {
    tasks.platform_deliveries__apply = platforms.task;
    // Reconciliation hourly, by the workers that deliver (they hold the platforms' clients).
    tasks.platform_connections__reconcile = platforms.reconcile;
    crons.push(platformReconcileCron);
  }
  const mail = opts.mail ? makeMailTask(opts.mail) : null;
  if (mail) {
    tasks.mail_messages__send = mail.task;
    tasks.mail_messages__remind = mailMessagesRemind;
    crons.push(mailMessagesRemindCron);
  }

  const pool = new pg.Pool({
    connectionString: opts.connectionString, max: concurrency + 3, application_name: 'billing-worker',
    // An outage: connects fail in bounded time and dead peers are noticed (docs/operations.md).
    connectionTimeoutMillis: connectMs,
    keepAlive: true,
  });
  // Errors surface through the queries that hit them; an idle client's error must not crash the process.
  pool.on('error', () => {});
  let stopped = false;
  waitOutOutages(pool, opts.outageWaitMs ?? 5 * 60_000, () => stopped);
  survivePostJobOutages();
  pool.on('connect', (client) => { client.on('error', () => {}); });
  const workerIds = new Set<string>();
  const events: WorkerEvents = new EventEmitter() as WorkerEvents;
  // Jobs are locked by the pool's id (jobs.locked_by), so that is what beats.
  events.on('pool:create', ({ workerPool }) => { workerIds.add(workerPool.id); });
  observeJobs(events);

  // Jobs this worker holds but no longer runs: their outcome could not be recorded
  // (the database went away just then), so graphile-worker would leave them locked
  // for 4 hours. A job counts as running from job:start until staleAfterMs after its
  // end (its outcome may still be on its way); a job locked longer than that by one of
  // our pools and not running here is handed back to the queue.
  const running = new Set<string>();
  const ended = new Map<string, number>();
  events.on('job:start', ({ job }) => { running.add(job.id); });
  events.on('job:complete', ({ job }) => { running.delete(job.id); ended.set(job.id, Date.now()); });
  const releaseStranded = async (): Promise<number> => {
    for (const [id, at] of ended) if (Date.now() - at > staleAfterMs) ended.delete(id);
    const { rows } = await pool.query<{ id: string }>(
      `update graphile_worker._private_jobs j set locked_at = null, locked_by = null, run_at = greatest(j.run_at, now())
       where j.locked_by = any($1::text[]) and not (j.id = any($2::bigint[])) and j.locked_at < now() - $3::interval
       returning j.id`,
      [[...workerIds], [...running, ...ended.keys()], `${staleAfterMs} milliseconds`]);
    if (rows.length > 0) log.warn({ component: 'worker', jobs: rows.map((r) => r.id) }, 'released jobs whose outcome was lost in a database outage');
    return rows.length;
  };

  const beat = async () => {
    try {
      const { rows } = await pool.query<{ dead: string[] }>(
        'select billing_private.worker_heartbeat($1, $2::interval) as dead', [[...workerIds], `${staleAfterMs} milliseconds`]);
      if (rows[0].dead.length > 0 || await releaseStranded() > 0) {
        // Released jobs are due now: wake every worker rather than wait for a poll.
        await pool.query(`select pg_notify('jobs:insert', '')`);
      }
    } catch (err) {
      const unavailable = databaseUnavailableCause(err);
      if (unavailable) log.warn({ component: 'worker', cause: unavailable }, 'heartbeat failed: database unavailable');
      else log.warn({ component: 'worker', err }, 'heartbeat failed');
    }
  };

  let runner: Runner;
  try {
    runner = await run({
      pgPool: pool,
      concurrency,
      pollInterval: opts.pollInterval ?? 1000,
      taskList: tasks,
      // Period ends, trials, expiries and the analytics rollup's folding every minute;
      // retention purge and platform reconciliation hourly; mail reminders.
      crontab: crons.join('\n'),
      noHandleSignals: !opts.handleSignals,
      logger: logger(opts.verbose ?? false),
      events,
      // Jobs of an endpoint that holds its share of the slots wait in the queue.
      forbiddenFlags: delivery.forbiddenFlags,
      gracefulShutdownAbortTimeout: opts.shutdownAbortMs ?? 5000,
    });
  } catch (err) {
    delivery.close();
    await slots.close();
    platforms.close();
    mail?.close();
    await pool.end();
    throw err;
  }
  await beat();
  // Which platforms this deployment's own bot tokens cover: connections without a token
  // of their own deliver only with them (55-platform-delivery.sql).
  if (opts.platformDeliveries ?? true) {
    await pool.query('select billing_private.platform_defaults_set($1, $2)',
      [Boolean(platformOptions.discordBotToken), Boolean(platformOptions.telegramBotToken)])
      .catch((err: unknown) => log.warn({ component: 'worker', err }, 'recording the deployment\'s bot tokens failed'));
  }
  const timer = setInterval(() => { void beat(); }, heartbeatMs);
  timer.unref();

  let stopping: Promise<void> | null = null;
  return {
    get workerIds() { return [...workerIds]; },
    stop() {
      stopping ??= (async () => {
        clearInterval(timer);
        stopped = true;
        await runner.stop();
        await pool.query('select billing_private.worker_heartbeat_stop($1)', [[...workerIds]]).catch(() => {});
        delivery.close();
        await slots.close();
        platforms.close();
        mail?.close();
        await pool.end();
      })();
      return stopping;
    },
  };
}
