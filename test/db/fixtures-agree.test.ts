// The fixtures (db/migrations/fixtures/) are the source each migration's change is
// written from, and a migration holds only that change. So the two must describe one
// schema: a database built from the fixtures alone (statement by statement until all
// stand, then each file once more, whole and in order) and one built by the migrations (committed, then current/)
// must have the same functions, views, columns, indexes, constraints, triggers,
// policies and grants. A migration that forgot part of a fixture's change, or a
// change written into a migration but not into its fixture, fails here, naming it.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { runMigrations as runWorkerMigrations, Logger } from 'graphile-worker';
import { withDatabase } from '../../src/db/migrate';
import { fixtureFiles, readFixture, splitStatements } from '../support/fixtures';

const stamp = `${Date.now()}_${process.pid}`;
const fromFixtures = `billing_fixtures_${stamp}`;
const fromMigrations = `billing_migrations_${stamp}`;
const server = () => process.env.BILLING_TEST_SERVER!;
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

// A domain's tables need some of its functions (trigger functions, the functions of CHECK
// constraints, defaults and policies) and its functions need its tables (row types in
// signatures, SQL bodies), across domains too: no order of whole files applies from
// nothing. So statements are applied one by one, in load order (fixtureFiles), those
// that fail again in the next pass until all stand; then every file once more, whole
// and in order, as a migration that includes it would (each file's last word is kept,
// and each file is shown to run again on a built database).
async function buildFromFixtures(database: string): Promise<void> {
  await runWorkerMigrations({ connectionString: withDatabase(server(), database), logger: new Logger(() => () => undefined) });
  const files = fixtureFiles();
  await withClient(database, async (c) => {
    let pending = files.flatMap((file) => splitStatements(readFixture(file)).map((sql) => ({ file, sql })));
    while (pending.length > 0) {
      const failed: { file: string; sql: string; error: string }[] = [];
      for (const s of pending) {
        try { await c.query(s.sql); } catch (err) { failed.push({ ...s, error: (err as Error).message }); }
      }
      if (failed.length === pending.length) {
        throw new Error(`fixture statements that never apply: ${failed.map((f) => `${f.file}: ${f.error}: ${f.sql.slice(0, 120)}`).join('; ')}`);
      }
      pending = failed;
    }
    for (const file of files) {
      // Roles and their grants are cluster-wide: another file granting at the same moment
      // makes PostgreSQL answer "tuple concurrently updated"; that is tried again.
      for (let attempt = 1; ; attempt++) {
        try { await c.query(readFixture(file)); break; } catch (err) {
          if (attempt < 5 && /tuple concurrently updated/.test((err as Error).message)) continue;
          throw new Error(`${file} does not run again: ${(err as Error).message}`);
        }
      }
    }
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
