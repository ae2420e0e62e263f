// The anchor of the webhook benchmark (issue 33 item 5), one process of it: graphile-worker
// (the project's version) with the service worker's concurrency and pool (concurrency + 3
// connections, LISTEN/NOTIFY, poll every second) running one task, bench_anchor__post,
// that sends its job's body as a plain HTTP POST (keep-alive agent, as src/webhooks/send.ts)
// to the job's URL, once per id of the job (one by default; several at once when run.ts is
// given --anchor-posts-per-job, as the service's jobs carry up to 50 deliveries of one
// endpoint): no signing, no delivery rows, no endpoint lookup, no retries of our own.
// bench/webhooks/run.ts starts these and fills the queue. Prints "ready".
import http from 'node:http';
import pg from 'pg';
import { Logger, run, type Task } from 'graphile-worker';

interface AnchorJob { url: string; ids: string[]; body: string }

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

const postOne = (job: AnchorJob, id: string) => new Promise<void>((resolve, reject) => {
  const body = Buffer.from(job.body, 'utf8');
  const req = http.request(job.url, {
    method: 'POST', agent,
    headers: { 'content-type': 'application/json', 'content-length': String(body.length), 'webhook-id': id },
  }, (res) => {
    res.resume();
    res.on('end', () => ((res.statusCode ?? 0) < 300 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
  });
  req.on('error', reject);
  req.end(body);
});

const post: Task = async (payload) => {
  const job = payload as AnchorJob;
  await Promise.all(job.ids.map((id) => postOne(job, id)));
};

async function main() {
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8);
  const pool = new pg.Pool({ connectionString: process.env.BENCH_DATABASE_URL!, max: concurrency + 3, application_name: 'anchor-worker', keepAlive: true });
  pool.on('error', () => {});
  pool.on('connect', (client) => { client.on('error', () => {}); });
  const runner = await run({
    pgPool: pool, concurrency, pollInterval: 1000, noHandleSignals: true,
    taskList: { bench_anchor__post: post },
    // graphile-worker's info lines (one per job) would cost the anchor what the service does not pay.
    logger: new Logger(() => (level, message) => {
      if (level === 'error' || level === 'warning') process.stderr.write(`[anchor-worker] ${message}\n`);
    }),
  });
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => { void runner.stop().then(() => pool.end()).then(() => process.exit(0)); });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
