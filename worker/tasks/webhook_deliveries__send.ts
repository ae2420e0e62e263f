// graphile-worker task: sends the deliveries of one job (all of one endpoint, all
// at the same attempt number) concurrently, then records every outcome in one call
// (billing_private.webhook_record_attempts: attempt log, delivery state, retry job,
// endpoint failure streak). Failed deliveries are retried on RETRY_SCHEDULE_MS by a
// new job; the job itself only fails (and is retried by graphile-worker) when the
// database cannot be reached or the deployment cannot sign.
import { performance } from 'node:perf_hooks';
import type { Task } from 'graphile-worker';
import { parseEncryptionKey, SecretBox } from '../../src/webhooks/crypto';
import { createSender, Sender, SendResult } from '../../src/webhooks/send';
import { webhookHeaders } from '../../src/webhooks/sign';
import { loadConfig } from '../../src/core/config';
import { webhookDeliveries, webhookDuration, webhookJobsPutBack } from '../../src/core/metrics';
import type { SharedEndpointSlots } from './endpoint-slots';

/**
 * Delay before each attempt, modelled on Standard Webhooks' recommendation:
 * immediately, 5 seconds, 5 minutes, 30 minutes, 2 hours, 5 hours, 10 hours, 10 hours
 * (8 attempts over about 27.6 hours). After the last one the delivery is failed.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  0, 5_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 5 * 3_600_000, 10 * 3_600_000, 10 * 3_600_000,
];

/** An endpoint whose deliveries have all failed for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3_600_000;

/**
 * A request that takes this long marks its endpoint slow (healthy receivers answer
 * quickly; the spec asks them to return 2xx at once and work afterwards).
 */
export const SLOW_ENDPOINT_MS = 1_000;

/** How long this process leaves an endpoint's jobs in the queue after the other processes held all its slots. */
export const REFUSED_MS = 250;

/**
 * Slots of a worker process one endpoint may hold at once. Delivery jobs are one per
 * endpoint and flagged with its id (60-events.sql); while an endpoint holds its share,
 * graphile-worker leaves its jobs in the queue (forbiddenFlags) and other endpoints'
 * jobs run. An endpoint not yet seen answering fast, or seen slow (a request of at
 * least slowMs, finished or still running: a timeout, a hang, a slow answer), may hold
 * one slot; a fast one up to maxPerEndpoint. So a bad endpoint costs each worker one
 * slot, not all of them, whatever the rate of its events.
 */
export class EndpointGate {
  private readonly state = new Map<string, { running: Set<number>; fast: boolean; refusedUntil: number }>();

  constructor(private readonly maxPerEndpoint: number, private readonly slowMs: number) {}

  private cap(s: { running: Set<number>; fast: boolean }, now: number): number {
    if (!s.fast) return 1;
    for (const started of s.running) if (now - started >= this.slowMs) return 1;
    return this.maxPerEndpoint;
  }

  /** Takes a slot for the endpoint; null when it already holds its share. */
  enter(endpointId: string): number | null {
    let s = this.state.get(endpointId);
    if (!s) this.state.set(endpointId, s = { running: new Set(), fast: false, refusedUntil: 0 });
    const now = performance.now();
    if (s.running.size >= this.cap(s, now)) return null;
    let token = now;
    while (s.running.has(token)) token += 1e-6;
    s.running.add(token);
    return token;
  }

  /** Gives the slot back; slowestMs: the longest request of the job. */
  leave(endpointId: string, token: number, slowestMs: number): void {
    const s = this.state.get(endpointId);
    if (!s) return;
    s.running.delete(token);
    s.fast = slowestMs < this.slowMs;
    s.refusedUntil = 0;
  }

  /** The endpoint's share now: 1 when slow or not yet seen fast, else maxPerEndpoint. */
  share(endpointId: string): number {
    const s = this.state.get(endpointId);
    return s ? this.cap(s, performance.now()) : 1;
  }

  /**
   * Gives back a slot taken here that the other processes left no room for (they hold
   * the endpoint's shared slots): its jobs wait in the queue for REFUSED_MS, or until
   * this process frees one of its own.
   */
  refuse(endpointId: string, token: number): void {
    const s = this.state.get(endpointId);
    if (!s) return;
    s.running.delete(token);
    s.refusedUntil = performance.now() + REFUSED_MS;
  }

  /** Endpoints whose jobs must wait: graphile-worker's forbiddenFlags. */
  forbidden(): string[] {
    const now = performance.now();
    const out: string[] = [];
    for (const [id, s] of this.state) if (s.running.size >= this.cap(s, now) || now < s.refusedUntil) out.push(id);
    return out;
  }
}

export interface DeliveryTaskOptions {
  /** Delay before attempt n+1 at index n; index 0 is the first attempt (immediate). */
  retrySchedule?: readonly number[];
  disableAfterMs?: number;
  encryptionKey: string | null;
  allowPrivateUrls: boolean;
  /** WEBHOOK_PORTS (config.webhookPorts); default any. */
  ports?: Array<[number, number]> | null;
  timeoutMs?: number;
  maxSockets?: number;
  /** Slots one fast endpoint may hold (default 4); a slow or unknown one holds 1. */
  maxPerEndpoint?: number;
  /** A request this long marks its endpoint slow (default SLOW_ENDPOINT_MS). */
  slowEndpointMs?: number;
  /** The endpoints' slots shared with every worker process; without, each process bounds only itself. */
  slots?: SharedEndpointSlots;
}

export interface DeliveryPayload {
  community_id: string;
  /** The one endpoint of the job's deliveries (also the job's flag); absent on jobs queued before it existed. */
  endpoint_id?: string;
  ids: string[];
  /** Attempts already made: the deliveries this job is for. */
  after: number;
  /** A redelivery of a finished delivery: no automatic retry after it. */
  manual?: boolean;
}

interface DueDelivery {
  id: string;
  endpoint_id: string;
  url: string;
  event_id: string;
  body: string;
  ciphertexts: string[] | null;
}

export interface DeliveryTask {
  task: Task;
  /** graphile-worker's forbiddenFlags: endpoints holding their share of this process's slots. */
  forbiddenFlags(): string[];
  close(): void;
}

export function makeWebhookSendTask(opts: DeliveryTaskOptions): DeliveryTask {
  const schedule = opts.retrySchedule ?? RETRY_SCHEDULE_MS;
  const disableAfterMs = opts.disableAfterMs ?? DISABLE_AFTER_MS;
  // A missing or malformed key must not stop the worker (other tasks run on it): the
  // delivery jobs fail and graphile-worker retries them until the key is fixed.
  let box: SecretBox | null = null;
  let keyProblem = 'WEBHOOK_ENCRYPTION_KEY is not set: webhook deliveries cannot be signed';
  try {
    if (opts.encryptionKey) box = new SecretBox(parseEncryptionKey(opts.encryptionKey));
  } catch (err) {
    keyProblem = (err as Error).message;
  }
  let sender: Sender | null = null;
  const gate = new EndpointGate(opts.maxPerEndpoint ?? 4, opts.slowEndpointMs ?? SLOW_ENDPOINT_MS);

  const task: Task = async (rawPayload, helpers) => {
    const payload = rawPayload as DeliveryPayload;
    const endpointId = payload.endpoint_id;
    if (endpointId === undefined) {
      await deliver(payload, helpers);
      return;
    }
    const token = gate.enter(endpointId);
    // The same share, over every worker process.
    const held = token !== null && opts.slots ? await opts.slots.take(payload.community_id, endpointId, gate.share(endpointId)) : undefined;
    if (token === null || held === null) {
      // Fetched in the instant before the endpoint's share filled up (several idle
      // slots take jobs at once): put it back, flagged, due at once. This process leaves
      // it in the queue while the endpoint holds its share (forbiddenFlags) and takes it
      // as soon as a slot frees; another process may take it now. No delay: under a
      // backlog many jobs meet this race, and a delay holds the backlog's last jobs back
      // (docs/decisions/webhook-endpoint-gate.md).
      // So is a job whose endpoint's shared slots the other processes hold.
      if (token !== null) gate.refuse(endpointId, token);
      webhookJobsPutBack.inc();
      await helpers.addJob('webhook_deliveries__send', payload, { flags: [endpointId] });
      return;
    }
    let slowestMs = 0;
    try {
      slowestMs = await deliver(payload, helpers);
    } finally {
      gate.leave(endpointId, token, slowestMs);
      if (held) await opts.slots!.give(held);
    }
  };

  /** Sends and records the job's deliveries; returns the longest request's duration. */
  const deliver = async (payload: DeliveryPayload, helpers: Parameters<Task>[1]): Promise<number> => {
    const { rows } = await helpers.query<DueDelivery>(
      'select * from billing_private.webhook_deliveries_load($1, $2, $3)',
      [payload.community_id, payload.ids, payload.after]);
    if (rows.length === 0) return 0;
    if (!box) throw new Error(keyProblem);
    const secrets = box;
    sender ??= createSender({ allowPrivate: opts.allowPrivateUrls, ports: opts.ports, timeoutMs: opts.timeoutMs, maxSockets: opts.maxSockets });
    const send = sender;

    const results = await Promise.all(rows.map(async (d): Promise<SendResult & { id: string }> => {
      let keys: Buffer[];
      try {
        keys = (d.ciphertexts ?? []).map((c) => secrets.hmacKey(payload.community_id, d.endpoint_id, c));
        if (keys.length === 0) throw new Error('no signing secret');
      } catch (err) {
        const now = new Date().toISOString();
        return { id: d.id, ok: false, status_code: null, error: `cannot sign: ${(err as Error).message}`, excerpt: null, started_at: now, finished_at: now, duration_ms: 0 };
      }
      const result = await send.post(d.url, webhookHeaders(keys, d.event_id, d.body), d.body, helpers.abortSignal);
      return { id: d.id, ...result };
    }));

    for (const r of results) {
      const outcome = r.ok ? 'success' : r.status_code !== null ? 'http_error' : r.error?.startsWith('cannot sign') ? 'unsigned' : 'network_error';
      webhookDeliveries.inc({ outcome });
      if (outcome !== 'unsigned') webhookDuration.observe(r.duration_ms / 1000);
    }

    const attempt = payload.after + 1;
    const retryAt = attempt < schedule.length ? new Date(Date.now() + schedule[attempt]) : null;
    await helpers.query('select billing_private.webhook_record_attempts($1, $2, $3, $4, $5, $6)', [
      payload.community_id, payload.after, payload.manual === true, JSON.stringify(results),
      retryAt, `${disableAfterMs} milliseconds`,
    ]);
    return Math.max(0, ...results.map((r) => r.duration_ms));
  };

  return { task, forbiddenFlags: () => gate.forbidden(), close: () => sender?.close() };
}

/** The task with settings from the environment (taskList); startWorker builds its own. */
let fromEnv: DeliveryTask | null = null;
export const webhookDeliveriesSend: Task = (payload, helpers) => {
  if (!fromEnv) {
    const config = loadConfig();
    fromEnv = makeWebhookSendTask({ encryptionKey: config.webhookEncryptionKey, allowPrivateUrls: config.webhookAllowPrivateUrls, ports: config.webhookPorts });
  }
  return fromEnv.task(payload, helpers);
};
