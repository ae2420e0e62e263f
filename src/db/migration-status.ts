// What has been applied to a database: applying migrations and reporting which ran
// (npm start, `billing migrate`), and which committed ones a database still lacks
// (/readyz).
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { applyMigrations, migrationsFolder } from './migrate';

interface MigrationState { committed: Set<string>; current: string | null }

async function migrationState(url: string): Promise<MigrationState> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows: [r] } = await client.query<{ migrations: boolean; current: boolean }>(
      `select to_regclass('graphile_migrate.migrations') is not null as migrations,
              to_regclass('graphile_migrate.current') is not null as current`);
    const committed = r.migrations
      ? (await client.query<{ filename: string }>('select filename from graphile_migrate.migrations')).rows.map((x) => x.filename)
      : [];
    const current = r.current
      ? (await client.query<{ content: string }>('select content from graphile_migrate.current')).rows[0]?.content ?? null
      : null;
    return { committed: new Set(committed), current };
  } finally {
    await client.end();
  }
}

/**
 * graphile-migrate keeps its pools open 200 ms after use and exits the process when
 * one of them errors, as it does when the embedded server stops: close them now.
 */
export function releaseMigrationPools(): void {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require('graphile-migrate/dist/pgReal') as { clearAllPools(): void }).clearAllPools();
  } catch {
    // A future graphile-migrate without this module: its pools then close on their own.
  }
}

/** applyMigrations, then closes graphile-migrate's pools. */
export async function migrateDatabase(url: string): Promise<void> {
  try {
    await applyMigrations(url);
  } finally {
    releaseMigrationPools();
  }
}

/** Names of the migrations that were applied: committed file names, and "current". */
export async function migrateAndReport(url: string): Promise<string[]> {
  const before = await migrationState(url);
  await migrateDatabase(url);
  const after = await migrationState(url);
  const applied = [...after.committed].filter((f) => !before.committed.has(f)).sort();
  if (after.current !== null && after.current !== before.current) applied.push('current');
  return applied;
}

/**
 * The committed migrations, by the hash graphile-migrate writes in each file's header
 * and records in graphile_migrate.migrations when it applies the file.
 */
export function committedMigrations(): { file: string; hash: string }[] {
  const dir = path.join(migrationsFolder, 'committed');
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => f.endsWith('.sql')).sort().map((file) => {
    const head = fs.readFileSync(path.join(dir, file), 'utf8').slice(0, 500);
    const hash = /^--! Hash: (\S+)$/m.exec(head)?.[1];
    if (!hash) throw new Error(`migration ${file} has no --! Hash header`);
    return { file, hash };
  });
}


/** Committed migrations (file names) the database has not recorded; throws when it is unreachable. */
const READINESS_QUERY_TIMEOUT_MS = 3000;

export async function pendingMigrations(pool: pg.Pool, committed: { file: string; hash: string }[]): Promise<string[]> {
  // Readiness must answer in bounded time even when the connection went silent.
  if (committed.length === 0) {
    await pool.query({ text: 'select 1', query_timeout: READINESS_QUERY_TIMEOUT_MS } as pg.QueryConfig);
    return [];
  }
  const { rows } = await pool.query<{ hash: string }>({ text: 'select hash from graphile_migrate.migrations', query_timeout: READINESS_QUERY_TIMEOUT_MS } as pg.QueryConfig)
    .catch((err: { code?: string }) => {
      if (err.code === '42P01') return { rows: [] }; // never migrated
      throw err;
    });
  const applied = new Set(rows.map((r) => r.hash));
  return committed.filter((m) => !applied.has(m.hash)).map((m) => m.file);
}
