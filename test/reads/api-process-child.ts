// One API process for the tests that need several (test/reads/token-leases.test.ts):
// the real app (src/app.ts) with its own pools and its own leases, configured from the
// environment as `npm start` is (RATE_LIMIT_*), on an ephemeral port of 127.0.0.1.
// Prints one JSON line {"url": ...} once it listens; SIGTERM ends it.
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/core/config';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp, createHttpServer } from '../../src/app';

const config = loadConfig({ ...process.env, NODE_ENV: 'test' });
const owner = createOwnerPool(process.env.CHILD_DATABASE_URL!, 2);
// Through the run's PgBouncer when TEST_POOLER=pgbouncer (CHILD_APP_DATABASE_URL is then its address).
const api = createApiPool(process.env.CHILD_APP_DATABASE_URL!, 4, undefined, process.env.BILLING_TEST_APP_DB ? 'transaction' : 'none');
const { app } = createApp({ config, apiPool: api, ownerPool: owner });
const server = createHttpServer(app);
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => { void Promise.all([api.end(), owner.end()]).then(() => process.exit(0)); });
});
