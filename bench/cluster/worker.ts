// One worker process for bench/cluster (run.ts starts them): graphile-worker with the
// service's tasks on WORKER_DATABASE_URL (billing_worker, always a direct connection to
// the primary: docs/decisions/pgbouncer-transaction-mode.md). Prints "ready".
import { startWorker } from '../../worker';

async function main() {
  const handle = await startWorker({
    connectionString: process.env.WORKER_DATABASE_URL!,
    config: { webhookEncryptionKey: process.env.BENCH_ENCRYPTION_KEY!, webhookAllowPrivateUrls: true },
  });
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => { void handle.stop().then(() => process.exit(0)); });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
