// The API alone, for the soak (bench/soak/run.ts): the real app on SOAK_PORT, its pool
// connecting as APP_DATABASE_URL (billing_app), back-office routes on DATABASE_URL.
// Prints "listening" when ready.
import http from 'node:http';
import { loadConfig } from '../../src/core/config';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp } from '../../src/app';

const config = loadConfig();
if (!config.databaseUrl || !config.appDatabaseUrl) throw new Error('DATABASE_URL and APP_DATABASE_URL are required');
const api = createApiPool(config.appDatabaseUrl, config.poolSize);
const owner = createOwnerPool(config.databaseUrl, 2);
const { app } = createApp({ config, apiPool: api, ownerPool: owner });
const server = http.createServer(app);
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.SOAK_PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
