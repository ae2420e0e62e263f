// For pool-errors.test.ts: in a process of its own, cuts a pool client's connection
// between two queries of a transaction and prints "alive" if the process survived.
import pg from 'pg';
import { createApiPool, createOwnerPool } from '../../src/db/pool';

async function main() {
  const owner = new pg.Pool({ connectionString: process.env.CHILD_OWNER_URL!, max: 1 });
  const pool = process.env.CHILD_POOL === 'api' ? createApiPool(process.env.CHILD_APP_URL!, 2) : createOwnerPool(process.env.CHILD_OWNER_URL!, 2);
  const client = await pool.connect();
  await client.query('begin');
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  const ended = new Promise<void>((resolve) => client.once('end', resolve));
  await owner.query('select pg_terminate_backend($1)', [rows[0].pid]);
  await ended;
  const failed = await client.query('select 1').then(() => false, () => true);
  client.release(true);
  await pool.end();
  await owner.end();
  process.stdout.write(failed ? 'alive\n' : 'query on a cut connection succeeded\n');
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(2);
});
