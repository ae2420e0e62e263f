// Reads on a streaming standby (READ_DATABASE_URL, READ_MAX_LAG; docs/decisions/read-replicas.md),
// against a primary and a hot standby of this test's own (test/support/replica-cluster.ts):
// a GET by a key runs on the standby; the key's read right after its own write sees
// it; a standby behind READ_MAX_LAG, or stopped, leaves the reads to the primary
// (200, never 500); a lost primary leaves them to the standby.
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { createApp, createHttpServer } from '../../src/app';
import { loadConfig } from '../../src/core/config';
import { readsServed } from '../../src/core/metrics';
import { loginUrl } from '../../src/db/logins';
import { createApiPool, createOwnerPool } from '../../src/db/pool';
import type { ReadReplicas } from '../../src/db/read-replicas';
import { call, createTenant, type Tenant } from '../support/app';
import { rpc, toolCallMessage } from '../support/mcp-client';
import { type ReplicaCluster, startReplicaCluster } from '../support/replica-cluster';
import { Seed } from '../support/seed';

jest.setTimeout(120_000);

let cluster: ReplicaCluster;
let owner: pg.Pool;
let reads: ReadReplicas;
let url: string;
let close: () => Promise<void>;
let tenant: Tenant;
let other: Tenant;
let member: string;

async function served(): Promise<{ standby: number; primary: number }> {
  const values = (await readsServed.get()).values;
  const of = (target: string) => values.find((v) => v.labels.target === target)?.value ?? 0;
  return { standby: of('standby'), primary: of('primary') };
}

/** What the GETs of fn were answered from. */
async function counted(fn: () => Promise<void>): Promise<{ standby: number; primary: number }> {
  const before = await served();
  await fn();
  const after = await served();
  return { standby: after.standby - before.standby, primary: after.primary - before.primary };
}

async function until(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(reads.states())}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const standbyUp = () => reads.states()[0].up;

interface ClusterApp { url: string; reads: ReadReplicas; close(): Promise<void> }

/** The API against the cluster's primary, reading from its standby. */
async function startClusterApp(rateLimits = { key_per_minute: 1e6, key_burst: 1e6, ip_per_minute: 1e6, ip_burst: 1e6 }): Promise<ClusterApp> {
  const config = {
    ...loadConfig({ NODE_ENV: 'test' }),
    rateLimits,
    readDatabaseUrls: [loginUrl(cluster.standbyUrl(), 'billing_app')],
    readMaxLagMs: 1000,
    webhookEncryptionKey: crypto.randomBytes(32).toString('base64'),
  };
  // Short connect timeouts: a stopped server is found at once on loopback anyway.
  config.dbTimeouts = { connectMs: 2000, queryMs: 10_000 };
  const apiPool = createApiPool(loginUrl(cluster.primaryUrl(), 'billing_app'), 10, config.dbTimeouts);
  const created = createApp({ config, apiPool, ownerPool: owner });
  const server = createHttpServer(created.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    reads: created.reads!,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await created.graphql.release();
      await created.reads!.stop();
      await apiPool.end();
    },
  };
}

beforeAll(async () => {
  cluster = await startReplicaCluster();
  owner = createOwnerPool(cluster.primaryUrl());
  const app = await startClusterApp();
  ({ url, reads } = app);
  close = async () => {
    await app.close();
    await owner.end();
  };
  tenant = await createTenant(owner);
  other = await createTenant(owner);
  member = await new Seed(owner, tenant.communityId).member({ discord: 'd-replica' });
  await cluster.caughtUp();
  await until('the standby in use', standbyUp);
});

afterAll(async () => {
  await close?.();
  await cluster?.stop();
});

test('a GET by a key, and an MCP read tool, are answered from the standby', async () => {
  const counts = await counted(async () => {
    for (const path of ['/v1/members', `/v1/members/${member}`, '/v1/events', '/v1/webhooks/endpoints']) {
      const r = await call(url, 'GET', path, { key: tenant.key });
      expect([path, r.status]).toEqual([path, 200]);
    }
    const tool = await rpc(url, tenant.key, toolCallMessage('list_members'));
    expect(tool.status).toBe(200);
    expect(tool.text).toContain(member);
  });
  expect(counts).toEqual({ standby: 5, primary: 0 });
  const { rows } = await owner.query('select 1 from pg_stat_replication');
  expect(rows).toHaveLength(1); // a real streaming standby
});

test('with a burst too small to lease from (under 20), a GET still runs on the standby', async () => {
  const small = await startClusterApp({ key_per_minute: 600, key_burst: 10, ip_per_minute: 1e6, ip_burst: 1e6 });
  try {
    await until('the standby in use', () => small.reads.states()[0].up);
    const counts = await counted(async () => {
      const r = await call(small.url, 'GET', '/v1/members', { key: other.key });
      expect(r.status).toBe(200);
      expect(r.headers.get('ratelimit-limit')).toBe('600');
    });
    expect(counts).toEqual({ standby: 1, primary: 0 });
  } finally {
    await small.close();
  }
});

test("a GraphQL query runs its statements on the standby", async () => {
  const query = async () => {
    const res = await fetch(`${url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ members(first: 10) { nodes { id } } }' }),
    });
    return { status: res.status, body: await res.json() as { data?: { members: { nodes: Array<{ id: string }> } }; errors?: unknown } };
  };
  await query(); // the schema is built on first use
  const counts = await counted(async () => {
    const r = await query();
    expect(r.status).toBe(200);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data!.members.nodes).toEqual([{ id: member }]);
  });
  expect(counts).toEqual({ standby: 1, primary: 0 });
});

test('a GET that writes (a member export writes its audit line) is refused by the standby (25006) and answered by the primary', async () => {
  const counts = await counted(async () => {
    const r = await call(url, 'GET', `/v1/members/${member}/export`, { key: tenant.key });
    expect(r.status).toBe(200);
  });
  expect(counts).toEqual({ standby: 0, primary: 1 });
  const { rows } = await owner.query(`select 1 from billing.audit_log where community_id = $1 and operation = 'export'`, [tenant.communityId]);
  expect(rows).toHaveLength(1);
  expect(standbyUp()).toBe(true);
});

test("a key's read right after its own write sees it (the primary), while the standby is behind", async () => {
  // Replay paused: the standby does not have the write; its lag stays within
  // READ_MAX_LAG for the next moment, so only read-your-writes keeps the read off it.
  await cluster.caughtUp();
  const standby = createOwnerPool(cluster.standbyUrl(), 1);
  try {
    await standby.query('select pg_wal_replay_pause()');
    const note = `written ${Date.now()}`;
    const patch = await call(url, 'PATCH', `/v1/members/${member}`, { key: tenant.key, body: { note } });
    expect(patch.status).toBe(200);
    const counts = await counted(async () => {
      const read = await call(url, 'GET', `/v1/members/${member}`, { key: tenant.key });
      expect(read.status).toBe(200);
      expect(read.body.note).toBe(note);
    });
    expect(counts).toEqual({ standby: 0, primary: 1 });
    // Another key's read may be served by the standby: the write is not there.
    const { rows } = await standby.query<{ note: string | null }>('select note from billing.members where id = $1', [member]);
    expect(rows[0].note).not.toBe(note);
  } finally {
    await standby.query('select pg_wal_replay_resume()');
    await standby.end();
  }
});

test('a standby further behind than READ_MAX_LAG is skipped', async () => {
  await cluster.caughtUp();
  await until('the standby in use', standbyUp);
  const standby = createOwnerPool(cluster.standbyUrl(), 1);
  try {
    await standby.query('select pg_wal_replay_pause()');
    await owner.query(`update billing.communities set name = name where id = $1`, [other.communityId]);
    await until('the standby skipped', () => !standbyUp(), 5000);
    const counts = await counted(async () => {
      const r = await call(url, 'GET', '/v1/members', { key: other.key });
      expect(r.status).toBe(200);
    });
    expect(counts).toEqual({ standby: 0, primary: 1 });
  } finally {
    await standby.query('select pg_wal_replay_resume()');
    await standby.end();
  }
  await until('the standby in use again', standbyUp);
});

test('with the standby stopped, GETs answer 200 from the primary', async () => {
  await cluster.stopStandby();
  try {
    const counts = await counted(async () => {
      for (let i = 0; i < 3; i++) {
        const r = await call(url, 'GET', `/v1/members/${member}`, { key: other.key });
        expect(r.status).toBe(404); // another community's member: answered, by the primary
        const own = await call(url, 'GET', '/v1/members', { key: tenant.key });
        expect(own.status).toBe(200);
        const hooks = await call(url, 'GET', '/v1/webhooks/endpoints', { key: tenant.key });
        expect(hooks.status).toBe(200);
      }
    });
    expect(counts.standby).toBe(0);
    expect(counts.primary).toBeGreaterThanOrEqual(6);
  } finally {
    await cluster.startStandby();
  }
  await until('the standby in use again', standbyUp, 20_000);
});

test('with the primary lost, GETs go on from the standby', async () => {
  await cluster.caughtUp();
  await cluster.stopPrimary();
  const counts = await counted(async () => {
    for (let i = 0; i < 3; i++) {
      const r = await call(url, 'GET', `/v1/members/${member}`, { key: tenant.key });
      expect(r.status).toBe(200);
      expect(r.body.id).toBe(member);
    }
  });
  expect(counts).toEqual({ standby: 3, primary: 0 });
});
