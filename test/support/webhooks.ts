// Helpers for the webhook tests: a real local HTTP receiver, a worker against the run's
// database, direct event inserts (the outbox), waiting, and verification with the
// reference Standard Webhooks library.
import { spawn, ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { applyMigrations, withDatabase } from '../../src/db/migrate';
import { Webhook } from 'standardwebhooks';
import { startWorker, StartWorkerOptions, WorkerHandle } from '../../worker';
import { call, TEST_DB, TEST_WORKER_DB } from './app';
import { loginUrl } from '../../src/db/logins';

export const ENCRYPTION_KEY = crypto.randomBytes(32).toString('base64');

/**
 * A freshly migrated database of this test file's own, so its workers take only its
 * own jobs (test files run in parallel against one run database otherwise). Sets
 * BILLING_TEST_DB for startApp(); drop() restores it.
 */
export async function isolatedDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const server = process.env.BILLING_TEST_SERVER;
  const previous = process.env.BILLING_TEST_DB;
  if (!server || !previous) throw new Error('run through jest (globalSetup)');
  const name = `billing_wh_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
  await admin.connect();
  const url = withDatabase(server, name);
  // One file migrates at a time: migrations run at once in several new databases have
  // failed with "tuple concurrently updated" (catalog rows shared by the cluster).
  await admin.query(`select pg_advisory_lock(hashtext('billing test isolatedDatabase'))`);
  try {
    await admin.query(`create database ${name}`);
    await applyMigrations(url, { includeCurrent: true });
  } finally {
    await admin.query(`select pg_advisory_unlock(hashtext('billing test isolatedDatabase'))`).catch(() => {});
    await admin.end();
  }
  process.env.BILLING_TEST_DB = url;
  return {
    url,
    async drop() {
      process.env.BILLING_TEST_DB = previous;
      const c = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}
export const WORKER_CONFIG = { webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: true };

export interface Received {
  headers: Record<string, string>;
  body: string;
  at: number;
}

/**
 * What the receiver answers: a status (with optional body, optionally after delayMs),
 * 'hang' (never answers) or 'reset' (drops the connection without an answer).
 */
export type Answer = number | { status: number; body?: string; delayMs?: number } | 'hang' | 'reset';

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  respond: (r: Received, index: number) => Answer;
  /** Stops listening (connections refused) and drops open sockets. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(respond: Receiver['respond'] = () => 200, port = 0): Promise<Receiver> {
  const receiver = {} as Receiver;
  receiver.received = [];
  receiver.respond = respond;
  let server: http.Server | null = null;
  const listen = async (p: number) => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        // x-test-path: the request path, so tests can tell endpoints apart.
        const r: Received = { headers: { ...(req.headers as Record<string, string>), 'x-test-path': req.url ?? '' }, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
        const index = receiver.received.push(r) - 1;
        const answer = receiver.respond(r, index);
        if (answer === 'hang') return;
        if (answer === 'reset') {
          req.socket.resetAndDestroy();
          return;
        }
        const { status, body, delayMs } = typeof answer === 'number' ? { status: answer, body: 'ok', delayMs: 0 } : answer;
        const reply = () => {
          if (res.destroyed) return;
          res.writeHead(status, { 'content-type': 'text/plain' });
          res.end(body ?? '');
        };
        if (delayMs) setTimeout(reply, delayMs).unref();
        else reply();
      });
    });
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => server!.listen(p, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };
  receiver.port = await listen(port);
  receiver.url = `http://127.0.0.1:${receiver.port}/hook`;
  receiver.down = async () => {
    const s = server;
    server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  receiver.up = async () => { await listen(receiver.port); };
  receiver.close = receiver.down;
  return receiver;
}

/** Verifies a delivery with the reference library; returns the parsed envelope. */
export function verify(secret: string, r: Received): { id: string; type: string; timestamp: string; api_version: string; data: any } { // eslint-disable-line @typescript-eslint/no-explicit-any
  const headers = { 'webhook-id': r.headers['webhook-id'], 'webhook-timestamp': r.headers['webhook-timestamp'], 'webhook-signature': r.headers['webhook-signature'] };
  new Webhook(secret).verify(r.body, headers);
  const envelope = JSON.parse(r.body);
  expect(envelope.id).toBe(r.headers['webhook-id']);
  return envelope;
}

export async function worker(opts: Partial<StartWorkerOptions> = {}): Promise<WorkerHandle> {
  return startWorker({
    connectionString: TEST_WORKER_DB(),
    concurrency: 4,
    pollInterval: 100,
    retrySchedule: [0, 200, 200, 200, 200, 200, 200, 200],
    config: WORKER_CONFIG,
    // Only test/platforms/delivery.test.ts runs deliveries in the run's database (a worker
    // takes every file's jobs); test/members/member-erasure.test.ts has a database of its own.
    platformDeliveries: false,
    ...opts,
  });
}

export async function createEndpoint(base: string, key: string, body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const r = await call(base, 'POST', '/v1/webhooks/endpoints', { key, body });
  expect(r.status).toBe(201);
  return r.body;
}

/** Inserts events straight into the outbox (one statement), as the ledger's triggers do. */
export async function insertEvents(owner: pg.Pool, communityId: string, events: { type: string; data: unknown }[]): Promise<string[]> {
  const { rows } = await owner.query<{ id: string }>(
    `insert into billing.events (community_id, type, data)
     select $1, e->>'type', e->'data' from jsonb_array_elements($2::jsonb) with ordinality as x(e, n) order by n
     returning id`,
    [communityId, JSON.stringify(events)]);
  return rows.map((r) => r.id);
}

export async function waitFor<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A worker in a child process (webhook-worker-child.ts, concurrency 1, heartbeat 200 ms), for
 * tests that kill it with SIGKILL. Resolves once it runs, with its graphile-worker ids.
 */
export async function spawnWorker(databaseUrl: string): Promise<{ proc: ChildProcess; workerIds: string[] }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'webhook-worker-child.ts')], {
    cwd: path.resolve(__dirname, '../..'),
    env: { ...process.env, CHILD_DATABASE_URL: loginUrl(databaseUrl, 'billing_worker'), CHILD_ENCRYPTION_KEY: ENCRYPTION_KEY },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: proc.stdout! });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`worker process exited with ${code}`)));
  });
  return { proc, workerIds: JSON.parse(first).workerIds };
}

/** SIGKILL, and wait until the process is gone. */
export async function kill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGKILL');
  await exited;
}

/**
 * Whether the worker is done with every delivery of the community committed so far: no
 * webhook job of it is queued, scheduled (a retry) or running (a job row lives until
 * its outcome is recorded). Then whatever was going to be sent has been sent, so "nothing
 * reached the receiver" is a fact rather than a guess after a pause.
 */
export async function webhookJobsDone(owner: pg.Pool, communityId: string): Promise<boolean> {
  const { rowCount } = await owner.query(
    `select 1 from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
     where t.identifier = 'webhook_deliveries__send' and j.payload->>'community_id' = $1`, [communityId]);
  return rowCount === 0;
}
