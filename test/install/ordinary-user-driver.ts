// Run by embedded-users.test.ts, bundled into one file, as an ordinary user: starts the
// embedded PostgreSQL in <dataDir> twice and prints what it found, as one JSON line.
// Usage: node driver.js <dataDir> <installDir>
import pg from 'pg';
import { startEmbedded } from '../../src/db/embedded';

async function query(url: string, sql: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try { return (await client.query(sql)).rows; } finally { await client.end(); }
}

async function main() {
  const [dataDir, installDir] = process.argv.slice(2);
  const first = await startEmbedded(dataDir, { installDir });
  try {
    await query(first.url('postgres'), `create table kept (note text); insert into kept values ('written by ${process.getuid!()}')`);
  } finally {
    await first.stop();
  }
  const second = await startEmbedded(dataDir, { installDir });
  try {
    const rows = await query(second.url('postgres'), 'select note from kept');
    const [{ dir }] = await query(second.url('postgres'), `select current_setting('data_directory') as dir`);
    process.stdout.write(`${JSON.stringify({ uid: process.getuid!(), rows, dir, databaseDir: second.databaseDir })}\n`);
  } finally {
    await second.stop();
  }
}

main().catch((err: Error) => {
  process.stderr.write(`driver: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
