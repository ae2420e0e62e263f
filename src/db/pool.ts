// Connection pools. The API pool connects as billing_app (src/db/logins.ts; never the
// owner) and switches to the non-owner role billing_api, which has no BYPASSRLS: every
// query it runs is limited to the community the request gate (billing.gate_open) set
// in its transaction.
// The owner pool is for migrations, the operator CLI and back-office routes.
//
// Outages (docs/operations.md): a connect gives up after connectMs (pg waits forever
// by default), a query after queryMs, TCP keepalive finds dead peers, and no client
// error may crash the process: the query that meets it fails, and the executor turns
// that into 503 service_unavailable.
import pg from 'pg';
import { DbTimeouts, DEFAULT_DB_TIMEOUTS } from '../core/config';

// Timestamps are returned as ISO strings by SQL (billing.iso); bigint counts as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

function quiet(pool: pg.Pool): pg.Pool {
  pool.on('error', () => {});
  // A checked-out client has no listener of the pool's: its connection dying while a
  // request holds it (between two queries) would otherwise be an uncaught 'error'.
  pool.on('connect', (client) => { client.on('error', () => {}); });
  return pool;
}

export function createApiPool(connectionString: string, max = 20, timeouts: DbTimeouts = DEFAULT_DB_TIMEOUTS): pg.Pool {
  // The role is set as a startup parameter: no extra round trip, no window without it.
  return quiet(new pg.Pool({
    connectionString, max, application_name: 'billing-api',
    options: '-c role=billing_api',
    connectionTimeoutMillis: timeouts.connectMs,
    // The server cancels a statement after billing_app's statement_timeout (15 s,
    // 00-foundation.sql); this bounds the wait on a connection that went silent.
    query_timeout: timeouts.queryMs,
    keepAlive: true,
  }));
}

/**
 * Session settings as a startup parameter (`-c name=value`, spaces and backslashes
 * escaped): set before the first statement, with no extra round trip.
 */
export function sessionOptions(settings: Record<string, string>): string {
  return Object.entries(settings).map(([name, value]) => `-c ${name}=${value.replace(/[\\\s]/g, (c) => `\\${c}`)}`).join(' ');
}

/**
 * settings: session settings, e.g. the CLI's app.actor and app.request_id, which the
 * audit log records with each change it makes (db/migrations/fixtures/functions/12-audit.sql).
 */
export function createOwnerPool(connectionString: string, max = 5, timeouts: DbTimeouts = DEFAULT_DB_TIMEOUTS,
  settings: Record<string, string> = {}): pg.Pool {
  return quiet(new pg.Pool({
    connectionString, max, application_name: 'billing-owner',
    ...(Object.keys(settings).length > 0 ? { options: sessionOptions(settings) } : {}),
    connectionTimeoutMillis: timeouts.connectMs,
    keepAlive: true,
  }));
}
