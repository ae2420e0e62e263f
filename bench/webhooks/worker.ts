// One worker process for the benchmark (bench/webhooks/run.ts starts these).
import { startWorker } from '../../worker';

async function main() {
  const handle = await startWorker({
    connectionString: process.env.BENCH_DATABASE_URL!,
    concurrency: Number(process.env.BENCH_CONCURRENCY ?? 8),
    config: { webhookEncryptionKey: process.env.BENCH_ENCRYPTION_KEY!, webhookAllowPrivateUrls: true },
  });
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => { void handle.stop().then(() => process.exit(0)); });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
