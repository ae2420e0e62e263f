// Writes db/schema.sql: the whole schema as pg_dump --schema-only prints it after every
// migration (committed and current/), so a reviewer reads one file instead of replaying
// migrations. `npm run db:schema`; DATABASE_SERVER_URL names the server (default the
// machine's postgres://postgres@127.0.0.1:5432), pg_dump on PATH must be at least the
// server's version. The first line carries a hash of everything under db/migrations/;
// test/db/schema-file.test.ts fails when it no longer matches (the file is stale).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { applyMigrations, migrationsFolder, withDatabase } from '../src/db/migrate';

export const schemaFile = path.resolve(__dirname, '../db/schema.sql');
export const HASH_PREFIX = '-- db/migrations sha256:';

/** sha256 over the relative path and content of every file under db/migrations/. */
export function migrationsHash(): string {
  const hash = crypto.createHash('sha256');
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else {
        hash.update(path.relative(migrationsFolder, p).split(path.sep).join('/'));
        hash.update('\0');
        hash.update(fs.readFileSync(p));
        hash.update('\0');
      }
    }
  };
  walk(migrationsFolder);
  return hash.digest('hex');
}

export function headerLine(): string {
  return `${HASH_PREFIX}${migrationsHash()} (regenerate with npm run db:schema)`;
}

async function main(): Promise<void> {
  const server = process.env.DATABASE_SERVER_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const scratch = `billing_schema_dump_${process.pid}`;
  const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
  await admin.connect();
  await admin.query(`create database ${scratch}`);
  try {
    const url = withDatabase(server, scratch);
    await applyMigrations(url, { includeCurrent: true });
    const dump = execFileSync('pg_dump', ['--schema-only', '--no-owner',
      '--exclude-schema=graphile_worker', '--exclude-schema=graphile_migrate', '--dbname', url],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    // pg_dump >= 15.14 brackets its output with \restrict/\unrestrict and a random key:
    // dropped, so the file changes only when the schema does.
    const body = dump.split('\n').filter((l) => !/^\\(un)?restrict /.test(l)).join('\n');
    fs.writeFileSync(schemaFile, `${headerLine()}\n${body}`);
    process.stdout.write(`wrote ${path.relative(process.cwd(), schemaFile)}\n`);
  } finally {
    await admin.query(`drop database if exists ${scratch} with (force)`);
    await admin.end();
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
