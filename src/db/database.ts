// Which PostgreSQL a process uses: DATABASE_URL's server, or else the embedded one
// that `npm start` keeps in <dataDir>/postgres. When that embedded server is already
// running (npm start, or another CLI command) we connect to it; otherwise we start it
// and stop it again when done. Shared by the operator CLI and src/main.ts.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import type { Config } from '../core/config';
import { withDatabase } from './migrate';
import { embeddedOwnerPassword } from './embedded';

/** The database npm start creates inside the embedded server. */
export const EMBEDDED_DATABASE = 'billing';

export interface Database {
  /** Connection string of the billing database. */
  url: string;
  /** True when this process started the embedded server (and stop() will stop it). */
  startedEmbedded: boolean;
  stop(): Promise<void>;
}

/** The owner's connection string of the embedded server of <dataDir> (its password is in <dataDir>, src/db/embedded.ts). */
function embeddedUrl(dataDir: string, port: number, database: string): string {
  return `postgres://postgres:${encodeURIComponent(embeddedOwnerPassword(dataDir))}@127.0.0.1:${port}/${database}`;
}

/** Whether a server may run on the cluster of <dataDir>: PostgreSQL keeps postmaster.pid while it runs. */
function mayBeRunning(dataDir: string): boolean {
  return fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'));
}

/** The port of a running embedded server for this data directory, or null. */
async function runningEmbeddedPort(dataDir: string): Promise<number | null> {
  const portFile = path.join(dataDir, 'postgres.port');
  if (!fs.existsSync(portFile)) return null;
  const port = Number(fs.readFileSync(portFile, 'utf8').trim());
  if (!Number.isInteger(port) || port <= 0) return null;
  const client = new pg.Client({ connectionString: embeddedUrl(dataDir, port, 'postgres'), connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    // Something answers on that port: make sure it is our data directory.
    const { rows } = await client.query<{ dir: string }>(`select current_setting('data_directory') as dir`);
    const ours = fs.realpathSync(path.join(dataDir, 'postgres'));
    return fs.realpathSync(rows[0].dir) === ours ? port : null;
  } catch {
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}

export async function ensureDatabase(serverUrl: string, database: string): Promise<void> {
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('select 1 from pg_database where datname = $1', [database]);
    if (rowCount === 0) {
      await admin.query(`create database ${pg.escapeIdentifier(database)}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created meanwhile by another process
      });
    }
  } finally {
    await admin.end();
  }
}

export async function openDatabase(config: Config, log: (line: string) => void): Promise<Database> {
  if (config.databaseUrl) {
    return { url: config.databaseUrl, startedEmbedded: false, stop: async () => {} };
  }
  // No pid file in the cluster: no server runs on it, nothing to ask. The embedded
  // server is then spawned before this function first waits, so a caller that goes on
  // with synchronous work (src/main.ts loads its modules) has it starting meanwhile.
  const running = mayBeRunning(config.dataDir) ? await runningEmbeddedPort(config.dataDir) : null;
  if (running !== null) {
    log(`Using the embedded PostgreSQL already running on port ${running}.`);
    await ensureDatabase(embeddedUrl(config.dataDir, running, 'postgres'), EMBEDDED_DATABASE);
    return { url: embeddedUrl(config.dataDir, running, EMBEDDED_DATABASE), startedEmbedded: false, stop: async () => {} };
  }
  log(`Starting the embedded PostgreSQL in ${path.join(config.dataDir, 'postgres')} ...`);
  const server = await startEmbeddedServer(config.dataDir);
  try {
    await ensureDatabase(embeddedUrl(config.dataDir, server.port, 'postgres'), EMBEDDED_DATABASE);
  } catch (err) {
    await server.stop().catch(() => {});
    throw err;
  }
  return { url: embeddedUrl(config.dataDir, server.port, EMBEDDED_DATABASE), startedEmbedded: true, stop: server.stop };
}

/**
 * Starts src/db/embedded-server.ts detached, in a process group of its own: a Ctrl-C
 * in the terminal then reaches only this process, which drains its requests before it
 * stops the database. The server process also stops the database if this one dies.
 */
async function startEmbeddedServer(dataDir: string): Promise<{ port: number; stop(): Promise<void> }> {
  // From the build (dist/src/db) plain node runs the compiled script; from the sources
  // (tests, tsx) tsx runs the .ts beside this file.
  const compiled = __filename.endsWith('.js');
  const script = path.join(__dirname, `embedded-server.${compiled ? 'js' : 'ts'}`);
  const args = compiled ? [script, dataDir] : [require.resolve('tsx/cli'), script, dataDir];
  const child = spawn(process.execPath, args, {
    detached: true,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const m = /^ready (\d+)$/.exec(line);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the embedded PostgreSQL did not start (exit ${code})`)));
    child.once('error', reject);
  });
  return {
    port,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.stdin!.end('stop\n');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise<void>((resolve) => { timer = setTimeout(resolve, 20_000); })]);
      clearTimeout(timer);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
