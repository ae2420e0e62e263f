// GET /readyz: ready only when the database answers and has every committed migration.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp } from '../../src/http/app';
import { call, startApp } from '../support/app';

test('readyz answers ready on the migrated database', async () => {
  const app = await startApp();
  try {
    const r = await call(app.url, 'GET', '/readyz');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ready' });
  } finally {
    await app.close();
  }
});

test('readyz answers 503 service_unavailable when the database does not answer', async () => {
  const dead = 'postgres://postgres@127.0.0.1:1/nothing';
  const owner = createOwnerPool(dead);
  const api = createApiPool(dead, 1);
  const { app } = createApp({ config: loadConfig({ NODE_ENV: 'test' }), apiPool: api, ownerPool: owner });
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const r = await call(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(r.body).toMatchObject({ code: 'service_unavailable', status: 503 });
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await api.end();
    await owner.end();
  }
});
