// The fixtures (db/migrations/fixtures/) are the source each migration's change is
// written from, and a migration holds only that change. So the two must describe one
// schema: a database built from the fixtures alone (each file applied until all stand,
// then once more in order) and one built by the migrations (committed, then current/)
// must have the same functions, views, columns, indexes, constraints, triggers,
// policies and grants. A migration that forgot part of a fixture's change, or a
// change written into a migration but not into its fixture, fails here, naming it.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { runMigrations as runWorkerMigrations, Logger } from 'graphile-worker';
import { withDatabase } from '../../src/db/migrate';

const stamp = `${Date.now()}_${process.pid}`;
const fromFixtures = `billing_fixtures_${stamp}`;
const fromMigrations = `billing_migrations_${stamp}`;
const server = () => process.env.BILLING_TEST_SERVER!;
const fixturesDir = path.resolve(__dirname, '../../db/migrations/fixtures');
const snapshotSql = fs.readFileSync(path.join(__dirname, 'schema-snapshot.sql'), 'utf8');

async function withClient<T>(database: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(server(), database) });
  c.on('notice', () => undefined);
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

async function snapshot(database: string): Promise<Map<string, string>> {
  return withClient(database, async (c) => {
    const { rows } = await c.query<{ k: string; v: string }>(snapshotSql);
    return new Map(rows.map((r) => [r.k, r.v]));
  });
}

// Fixtures refer to each other's objects in both directions, so there is no one order
// that applies them from nothing: apply each file (one transaction) until every file
// stands, then all once more in name order so that each file's last word is the one kept.
async function buildFromFixtures(database: string): Promise<void> {
  await runWorkerMigrations({ connectionString: withDatabase(server(), database), logger: new Logger(() => () => undefined) });
  const files = fs.readdirSync(fixturesDir).filter((f) => f.endsWith('.sql')).sort();
  const apply = (c: pg.Client, file: string) => c.query(fs.readFileSync(path.join(fixturesDir, file), 'utf8'));
  await withClient(database, async (c) => {
    let pending = files;
    for (let pass = 0; pending.length > 0; pass++) {
      const failed: { file: string; error: string }[] = [];
      for (const file of pending) {
        try { await apply(c, file); } catch (err) { failed.push({ file, error: (err as Error).message }); }
      }
      if (failed.length === pending.length || pass > files.length) {
        throw new Error(`fixtures that never apply: ${failed.map((f) => `${f.file}: ${f.error}`).join('; ')}`);
      }
      pending = failed.map((f) => f.file);
    }
    for (const file of files) await apply(c, file);
  });
}

beforeAll(async () => {
  await withClient('postgres', async (c) => {
    await c.query(`create database ${fromFixtures}`);
    await c.query(`create database ${fromMigrations} template ${process.env.BILLING_TEST_TEMPLATE}`);
  });
  await buildFromFixtures(fromFixtures);
}, 180_000);

afterAll(() => withClient('postgres', async (c) => {
  await c.query(`drop database if exists ${fromFixtures} with (force)`);
  await c.query(`drop database if exists ${fromMigrations} with (force)`);
}));

test('the fixtures and the migrations describe the same schema', async () => {
  const [fixtures, migrations] = await Promise.all([snapshot(fromFixtures), snapshot(fromMigrations)]);
  const differences: string[] = [];
  for (const [key, value] of migrations) {
    if (!fixtures.has(key)) differences.push(`only the migrations have ${key}`);
    else if (fixtures.get(key) !== value) differences.push(`${key} differs:\n  migrations: ${value}\n  fixtures:   ${fixtures.get(key)}`);
  }
  for (const key of fixtures.keys()) if (!migrations.has(key)) differences.push(`only the fixtures have ${key}`);
  expect(migrations.size).toBeGreaterThan(1000);
  expect(differences).toEqual([]);
});
