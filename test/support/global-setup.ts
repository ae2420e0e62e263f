// One real PostgreSQL per test run: the embedded one (fresh, in a temp directory) or
// TEST_DATABASE_URL's server. A migrated template database, named by a hash of the
// migrations, is cloned into a fresh database for this run.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbedded } from '../../src/db/embedded';
import { derivedPassword, ensureLogin, loginUrl } from '../../src/db/logins';
import { applyMigrations, migrationsFolder, withDatabase } from '../../src/db/migrate';
import { startPgBouncer } from './pgbouncer';

function migrationsHash(): string {
  const hash = crypto.createHash('sha256');
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else { hash.update(p); hash.update(fs.readFileSync(p)); }
    }
  };
  walk(migrationsFolder);
  return hash.digest('hex').slice(0, 12);
}

export default async function globalSetup() {
  let serverUrl = process.env.TEST_DATABASE_URL;
  if (!serverUrl) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'billing-test-pg-'));
    const db = await startEmbedded(dir);
    (globalThis as { __embedded?: unknown }).__embedded = { db, dir };
    serverUrl = db.url('postgres');
  }
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  const template = `billing_tpl_${migrationsHash()}`;
  // Several runs may share one server (TEST_DATABASE_URL): build each template once.
  await admin.query('select pg_advisory_lock(4242)');
  const exists = await admin.query('select 1 from pg_database where datname = $1', [template]);
  if (exists.rowCount === 0) {
    await admin.query(`create database ${template}`);
    try {
      await applyMigrations(withDatabase(serverUrl, template), { includeCurrent: true });
    } catch (err) {
      await admin.query(`drop database ${template}`);
      await admin.end();
      throw err;
    }
  }
  await admin.query('select pg_advisory_unlock(4242)');
  const runDb = `billing_test_${Date.now()}_${process.pid}`;
  await admin.query(`create database ${runDb} template ${template}`);
  await admin.end();
  process.env.BILLING_TEST_DB = withDatabase(serverUrl, runDb);
  // The service's logins, as npm start sets them up (cluster-wide: every database of this server).
  await ensureLogin(process.env.BILLING_TEST_DB, 'billing_app');
  await ensureLogin(process.env.BILLING_TEST_DB, 'billing_worker');
  process.env.BILLING_TEST_SERVER = serverUrl;
  // The migrated, empty template: a test that needs a database of its own clones it.
  process.env.BILLING_TEST_TEMPLATE = template;
  (globalThis as { __runDb?: string }).__runDb = runDb;
  // TEST_POOLER=pgbouncer: the apps under test reach the database through a PgBouncer in
  // transaction mode (TEST_APP_DB, startApp); this setup, the owner and the worker stay
  // direct, as in production (.ci/run; docs/decisions/pgbouncer-transaction-mode.md).
  if (process.env.TEST_POOLER) {
    if (process.env.TEST_POOLER !== 'pgbouncer') throw new Error(`TEST_POOLER: expected pgbouncer, got ${process.env.TEST_POOLER}`);
    const pooler = await startPgBouncer(serverUrl, { billing_app: derivedPassword(process.env.BILLING_TEST_DB, 'billing_app') }, 6);
    (globalThis as { __pooler?: { stop(): Promise<void> } }).__pooler = pooler;
    process.env.BILLING_TEST_APP_DB = pooler.through(loginUrl(process.env.BILLING_TEST_DB, 'billing_app'));
  }
}
