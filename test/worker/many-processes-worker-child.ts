// One of the worker processes of test/worker/many-processes.test.ts: the real worker
// (worker/index.ts) with 4 slots, at most 2 of them per endpoint, against the database
// CHILD_DATABASE_URL (as billing_worker). Prints one JSON line with its graphile-worker
// ids once it runs; SIGTERM stops it gracefully.
import { startWorker } from '../../worker';

async function main() {
  const handle = await startWorker({
    connectionString: process.env.CHILD_DATABASE_URL!,
    concurrency: 4,
    endpointConcurrency: 2,
    pollInterval: 100,
    heartbeatMs: 500,
    staleAfterMs: 5000,
    platformDeliveries: false,
    config: { webhookEncryptionKey: process.env.CHILD_ENCRYPTION_KEY!, webhookAllowPrivateUrls: true },
  });
  process.stdout.write(`${JSON.stringify({ workerIds: handle.workerIds })}\n`);
  process.on('SIGTERM', () => { void handle.stop().then(() => process.exit(0)); });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
