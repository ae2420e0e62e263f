// Shared by the benchmarks: a freshly migrated database of their own.
import pg from 'pg';
import { applyMigrations, withDatabase } from '../src/db/migrate';

/** Drops and recreates `name` on `server`, migrates it and returns its URL. */
export async function createBenchDatabase(server: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
    await admin.query(`create database ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(server, name);
  await applyMigrations(url, { includeCurrent: true });
  return url;
}
