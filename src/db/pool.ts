// Connection pools. The API pool connects as billing_app (src/db/logins.ts; never the
// owner) and switches to the non-owner role billing_api, which has no BYPASSRLS: every
// query it runs is limited to the community set by billing.api_auth in its transaction.
// The owner pool is for migrations, the operator CLI and back-office routes.
import pg from 'pg';

// Timestamps are returned as ISO strings by SQL (billing.iso); bigint counts as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

export function createApiPool(connectionString: string, max = 20): pg.Pool {
  // The role is set as a startup parameter: no extra round trip, no window without it.
  const pool = new pg.Pool({ connectionString, max, application_name: 'billing-api', options: '-c role=billing_api' });
  pool.on('error', () => {});
  // A checked-out client whose server went away between two queries (a database
  // restart under an open transaction) emits 'error'; unheard, it ends the process.
  // The next query on it fails and the request answers with that error.
  pool.on('connect', (client) => { client.on('error', () => {}); });
  return pool;
}

export function createOwnerPool(connectionString: string, max = 5): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, application_name: 'billing-owner' });
  pool.on('error', () => {});
  pool.on('connect', (client) => { client.on('error', () => {}); });
  return pool;
}
