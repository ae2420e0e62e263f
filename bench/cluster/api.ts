// One API process for bench/cluster (run.ts starts them): the real app (src/app.ts),
// configured from the environment as `npm start` configures it (src/core/config.ts):
// DATABASE_URL (owner, direct), APP_DATABASE_URL and DATABASE_POOLER (the API pool, here
// through PgBouncer in transaction mode), READ_DATABASE_URL and READ_MAX_LAG (the read
// replicas, for a service that routes reads), PG_POOL_SIZE, RATE_LIMIT_*. No worker: the
// workers are processes of their own (worker.ts). Prints "listening" once it listens
// on 127.0.0.1:BENCH_PORT; answers GET /__stats with its RSS and CPU time.
import http from 'node:http';
import { loadConfig } from '../../src/core/config';
import { ensureLogin } from '../../src/db/logins';
import { checkApiRole, createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp } from '../../src/app';

async function main() {
  const config = loadConfig();
  const ownerUrl = config.databaseUrl;
  if (!ownerUrl) throw new Error('DATABASE_URL is required');
  const appUrl = config.appDatabaseUrl ?? await ensureLogin(ownerUrl, 'billing_app');
  const api = createApiPool(appUrl, config.poolSize, config.dbTimeouts, config.databasePooler);
  if (config.databasePooler === 'transaction') await checkApiRole(api);
  const owner = createOwnerPool(ownerUrl, 2, config.dbTimeouts);
  const { app } = createApp({ config, apiPool: api, ownerPool: owner });
  const server = http.createServer((req, res) => {
    if (req.url === '/__stats') {
      const cpu = process.cpuUsage();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ rss: process.memoryUsage().rss, cpuMicros: cpu.user + cpu.system }));
      return;
    }
    app(req, res);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(Number(process.env.BENCH_PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
  process.on('SIGTERM', () => process.exit(0));
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
