// billing migrate: applies pending migrations (committed ones, then, outside
// production, the current/ directory still being written).
import pg from 'pg';
import { applyMigrations } from '../db/migrate';
import { defineCommand, defineGroup } from './command';

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

export default defineGroup({
  name: 'migrate',
  summary: 'apply pending migrations',
  commands: [defineCommand({
    name: '',
    summary: 'applies pending migrations',
    async run(ctx) {
      const url = await ctx.databaseUrl();
      return { applied: await migrateAndReport(url) };
    },
    print: (r: { applied: string[] }) => (r.applied.length ? `Applied: ${r.applied.join(', ')}` : 'Already up to date.'),
  })],
});
