// GET /readyz: ready only when the database answers and has every committed migration.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/core/config';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import { createApp } from '../../src/app';
import pg from 'pg';
import { withDatabase } from '../../src/db/migrate';
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

test('readyz answers 503 naming the committed migrations a reachable database lacks', async () => {
  const server = process.env.BILLING_TEST_SERVER!;
  const name = `billing_readyz_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const owner = createOwnerPool(withDatabase(server, name));
  const api = createApiPool(withDatabase(server, name), 1);
  const { app } = createApp({ config: loadConfig({ NODE_ENV: 'test' }), apiPool: api, ownerPool: owner });
  const httpServer = http.createServer(app);
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  try {
    const r = await call(`http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`, 'GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.body.code).toBe('service_unavailable');
    expect(r.body.detail).toMatch(/lacks migrations: 000001-initial-schema\.sql/);
  } finally {
    httpServer.closeAllConnections();
    await new Promise((resolve) => httpServer.close(resolve));
    await api.end();
    await owner.end();
    await admin.query(`drop database ${name} with (force)`);
    await admin.end();
  }
});
