// The API alone, for the read benchmark: the real app on BENCH_PORT against
// DATABASE_URL, with rate limits from the environment (src/config.ts). Prints
// "listening" when ready; answers GET /__rss with its resident set size and CPU time used.
import http from 'node:http';
import { loadConfig } from '../../src/core/config';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp } from '../../src/app';

const config = loadConfig();
const url = config.databaseUrl;
if (!url) throw new Error('DATABASE_URL is required');
const api = createApiPool(url, config.poolSize);
const owner = createOwnerPool(url, 2);
const { app } = createApp({ config, apiPool: api, ownerPool: owner });
const server = http.createServer((req, res) => {
  if (req.url === '/__rss') {
    res.setHeader('content-type', 'application/json');
    const cpu = process.cpuUsage();
    res.end(JSON.stringify({ rss: process.memoryUsage().rss, cpuMicros: cpu.user + cpu.system }));
    return;
  }
  app(req, res);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.BENCH_PORT ?? 3901), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
