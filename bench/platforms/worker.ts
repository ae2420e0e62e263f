// One worker process for the platform delivery benchmark (bench/platforms/run.ts):
// benefit deliveries on, against the local Discord stand-in at BENCH_DISCORD_URL.
import { startWorker } from '../../worker';

async function main() {
  const handle = await startWorker({
    connectionString: process.env.BENCH_DATABASE_URL!,
    concurrency: Number(process.env.BENCH_CONCURRENCY ?? 8),
    config: { webhookEncryptionKey: process.env.BENCH_ENCRYPTION_KEY!, webhookAllowPrivateUrls: true },
    platformDeliveries: true,
    platforms: { discordApiUrl: process.env.BENCH_DISCORD_URL!, telegramApiUrl: 'http://127.0.0.1:9', discordBotToken: null, telegramBotToken: null },
  });
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => { void handle.stop().then(() => process.exit(0)); });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
