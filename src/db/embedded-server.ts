// Runs the embedded PostgreSQL in a process of its own, started detached (its own
// process group) by src/db/database.ts, so a Ctrl-C in the terminal reaches only the
// service, which drains its requests and then asks this process to stop the database.
// Protocol: prints "ready <port>" on stdout once the server answers; stops the server
// and exits when its stdin ends (the parent said "stop", closed it, or died).
import { startEmbedded } from './embedded';

async function main() {
  const dataDir = process.argv[2];
  if (!dataDir) throw new Error('usage: embedded-server <dataDir>');
  // Signals from the terminal do not reach a detached process group; ignore strays.
  for (const signal of ['SIGINT', 'SIGHUP'] as const) process.on(signal, () => {});
  const db = await startEmbedded(dataDir, { notice: (line) => process.stderr.write(`${line}\n`) });
  const port = new URL(db.url('postgres')).port;
  process.stdout.write(`ready ${port}\n`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await db.stop().catch((err: Error) => process.stderr.write(`[embedded] stop: ${err.message}\n`));
    process.exit(0);
  };
  process.stdin.on('data', (chunk) => { if (String(chunk).includes('stop')) void stop(); });
  process.stdin.on('end', () => void stop());
  process.stdin.on('error', () => void stop());
  process.on('SIGTERM', () => void stop());
}

main().catch((err: Error) => {
  process.stderr.write(`[embedded] ${err.message}\n`);
  process.exit(1);
});
