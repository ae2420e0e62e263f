// A worker in its own process, for the crash test (killed with SIGKILL mid-attempt).
// Prints one JSON line with its graphile-worker ids once it is running.
import { startWorker } from '../../worker';

async function main() {
  const handle = await startWorker({
    connectionString: process.env.CHILD_DATABASE_URL!,
    concurrency: 1,
    pollInterval: 100,
    heartbeatMs: 200,
    staleAfterMs: 1000,
    platformDeliveries: false,
    config: { webhookEncryptionKey: process.env.CHILD_ENCRYPTION_KEY!, webhookAllowPrivateUrls: true },
  });
  process.stdout.write(`${JSON.stringify({ workerIds: handle.workerIds })}\n`);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
