// A PgBouncer in transaction mode on loopback, in front of a test PostgreSQL: the
// binary of Debian's package (`apt-get install pgbouncer`; .ci/run installs it), a
// generated ini in a temp dir, SCRAM for its clients with the logins' passwords in its
// auth file, which it also uses towards the server. Used by test/db/pgbouncer.test.ts
// (a pool of 2 server connections) and by global-setup.ts when TEST_POOLER=pgbouncer
// (the API test files through it: .ci/run). docs/decisions/pgbouncer-transaction-mode.md
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export interface PgBouncer {
  port: number;
  /** url with its host and port replaced by the pooler's (user, password and database kept). */
  through(url: string): string;
  /** Its server connections to database (SHOW SERVERS on its admin console). */
  servers(database: string): Promise<number>;
  stop(): Promise<void>;
}

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The pgbouncer binary, or an error that says how to get it (never a skip). */
export function pgbouncerBinary(): string {
  const found = CANDIDATES.find((p) => fs.existsSync(p));
  if (found) return found;
  try {
    return execFileSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('pgbouncer is not installed: the PgBouncer tests need it (apt-get install -y pgbouncer; .ci/run installs it).');
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

/**
 * Starts PgBouncer for serverUrl's server (every database, by the `*` fallback entry).
 * logins: the users it lets in, with their passwords. poolSize: server connections per
 * user and database (small, so that clients' transactions share them).
 */
export async function startPgBouncer(serverUrl: string, logins: Record<string, string>, poolSize = 4): Promise<PgBouncer> {
  const binary = pgbouncerBinary();
  const server = new URL(serverUrl);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-pgbouncer-'));
  const port = await freePort();
  const authFile = path.join(dir, 'users.txt');
  const admin = { user: 'pgbouncer_admin', password: crypto.randomBytes(12).toString('hex') };
  fs.writeFileSync(authFile, Object.entries({ ...logins, [admin.user]: admin.password }).map(([u, p]) => `${quote(u)} ${quote(p)}\n`).join(''), { mode: 0o600 });
  const ini = path.join(dir, 'pgbouncer.ini');
  fs.writeFileSync(ini, [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = scram-sha-256',
    `auth_file = ${authFile}`,
    `admin_users = ${admin.user}`,
    'pool_mode = transaction',
    `default_pool_size = ${poolSize}`,
    'min_pool_size = 0',
    'reserve_pool_size = 0',
    'max_client_conn = 500',
    'server_lifetime = 3600',
    'ignore_startup_parameters = extra_float_digits',
    '',
  ].join('\n'), { mode: 0o600 });
  // PgBouncer refuses to run as root: as root, it runs as the postgres system user.
  let ids: { uid: number; gid: number } | undefined;
  if (process.getuid?.() === 0) {
    ids = { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) };
    for (const p of [dir, authFile, ini]) fs.chownSync(p, ids.uid, ids.gid);
  }
  const child: ChildProcess = spawn(binary, [ini], { ...(ids ?? {}), stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => { log = (log + d.toString()).slice(-4000); });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; !(await answers(port)); i++) {
    if (child.exitCode !== null || i > 100) {
      await stop();
      throw new Error(`pgbouncer did not start on 127.0.0.1:${port}:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    through: (url: string) => {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    servers: async (database: string) => {
      const c = new pg.Client({ host: '127.0.0.1', port, user: admin.user, password: admin.password, database: 'pgbouncer' });
      await c.connect();
      try {
        // The admin console speaks the simple protocol only: a query without values.
        const { rows } = await c.query<{ database: string }>('show servers');
        return rows.filter((r) => r.database === database).length;
      } finally {
        await c.end();
      }
    },
    stop,
  };
}
