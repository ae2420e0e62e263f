// Connection pools. The API pool connects as billing_app (src/db/logins.ts; never the
// owner), directly or through PgBouncer (DATABASE_POOLER), and runs as the non-owner
// role billing_api, which has no BYPASSRLS: every
// query it runs is limited to the community the request gate (billing.gate_open) set
// in its transaction.
// The owner pool is for migrations, the operator CLI and back-office routes.
//
// Outages (docs/operations.md): a connect gives up after connectMs (pg waits forever
// by default), a query after queryMs, TCP keepalive finds dead peers, and no client
// error may crash the process: the query that meets it fails, and the executor turns
// that into 503 service_unavailable.
import pg from 'pg';
import { DatabasePooler, DbTimeouts, DEFAULT_DB_TIMEOUTS } from '../core/config';

// Timestamps are returned as ISO strings by SQL (billing.iso); bigint counts as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

function quiet(pool: pg.Pool): pg.Pool {
  pool.on('error', () => {});
  // A checked-out client has no listener of the pool's: its connection dying while a
  // request holds it (between two queries) would otherwise be an uncaught 'error'.
  pool.on('connect', (client) => { client.on('error', () => {}); });
  return pool;
}

/**
 * A client that sends every statement unnamed: behind a pooler in transaction mode
 * (PgBouncer before 1.21 passes no prepared statement between server connections), a
 * statement prepared by name on one server connection is missing on the next (26000)
 * or already there under another client's name (42P05). The gate's api_call and
 * PostGraphile's statement cache both name theirs; here the name is dropped, so each
 * is parsed in its own transaction (docs/decisions/pgbouncer-transaction-mode.md).
 */
class UnnamedStatementsClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    const query = this.query.bind(this) as (...args: unknown[]) => unknown;
    (this as { query: unknown }).query = (config: unknown, ...rest: unknown[]) => {
      if (config && typeof config === 'object' && 'name' in config && typeof (config as { submit?: unknown }).submit !== 'function') {
        const { name: _name, ...unnamed } = config as { name?: string };
        return query(unnamed, ...rest);
      }
      return query(config, ...rest);
    };
  }
}

/**
 * The API pool. pooler 'none': the role is a startup parameter (no extra round trip, no
 * window without it), and statements may be prepared by name. 'transaction' (PgBouncer
 * in transaction mode, which refuses startup options): the role comes from the login's
 * own default (`alter role billing_app set role billing_api`, 00-foundation.sql), which
 * the server applies when the pooler opens its connection and which RESET / DISCARD
 * ALL keep; statements are unnamed. Everything a request sets is transaction-local
 * (set_config(..., true), set local), so nothing passes to the next client.
 */
export function createApiPool(connectionString: string, max = 20, timeouts: DbTimeouts = DEFAULT_DB_TIMEOUTS,
  pooler: DatabasePooler = 'none'): pg.Pool {
  const pooled = pooler === 'transaction';
  return quiet(new pg.Pool({
    connectionString, max, application_name: 'billing-api',
    ...(pooled ? { Client: UnnamedStatementsClient } : { options: '-c role=billing_api' }),
    connectionTimeoutMillis: timeouts.connectMs,
    // The server cancels a statement after billing_app's statement_timeout (15 s,
    // 00-foundation.sql); this bounds the wait on a connection that went silent.
    query_timeout: timeouts.queryMs,
    keepAlive: true,
  }));
}

/**
 * Refuses to serve through a pooler when the API login does not become billing_api by
 * itself (a login of the operator's own, APP_DATABASE_URL, without the role default).
 */
export async function checkApiRole(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query<{ login: string; role: string }>('select session_user::text as login, current_user::text as role');
  const { login, role } = rows[0];
  if (role !== 'billing_api') {
    throw new Error(`APP_DATABASE_URL's login ${login} runs as ${role}, not billing_api: behind a pooler the role cannot be a `
      + `startup option; as the owner run: alter role ${pg.escapeIdentifier(login)} set role billing_api`);
  }
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
