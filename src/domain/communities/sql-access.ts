// Direct SQL for operators (billing sql-access): one PostgreSQL login per community,
// member of billing_operator. It reads the analytics views and its community's billing
// tables through the tenant policies; billing.current_community_id() takes its
// community from billing_private.operator_roles by the login's name, never from a
// setting (db/migrations/fixtures/functions/00-foundation.sql). Runs as the owner (the CLI).
import crypto from 'node:crypto';
import pg from 'pg';
import { scramVerifier } from '../../db/logins';

/** Per operator login: a runaway query is cancelled, and a BI tool cannot hog the server. */
export const OPERATOR_STATEMENT_TIMEOUT = '30s';
export const OPERATOR_CONNECTION_LIMIT = 5;

export interface SqlAccess { community_id: string; role: string; created_at: string }
export interface GrantedSqlAccess extends SqlAccess { connection_string: string }

/** The connection string of the operator login: DATABASE_URL's server and database. */
function operatorUrl(ownerUrl: string, role: string, password: string): string {
  const url = new URL(ownerUrl);
  url.username = role;
  url.password = password;
  url.search = '';
  return url.toString();
}

/**
 * Applies what this login may do of billing_private.operator_fence (db/migrations/
 * fixtures/functions/10-tenancy.sql): statistics and sizes that count every community's rows
 * taken from PUBLIC (superuser only), TEMPORARY and large objects too, so an operator
 * login writes nothing even with default_transaction_read_only off. Returns what is
 * still open (empty when the fence holds).
 */
export async function applyOperatorFence(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ r: { gaps: string[] } }>('select billing_private.operator_fence() as r');
  return rows[0].r.gaps;
}

export const FENCE_HINT = 'a superuser runs `select billing_private.operator_fence();` in this database (docs/security.md, "Operator SQL logins")';

export async function grantSqlAccess(pool: pg.Pool, ownerUrl: string, communityId: string,
  opts: { allowSharedStatistics?: boolean } = {}): Promise<GrantedSqlAccess> {
  const gaps = await applyOperatorFence(pool);
  if (gaps.length && !opts.allowSharedStatistics) {
    throw new Error(`an operator login would still reach ${gaps.join(', ')}, which show every community's volumes `
      + `or let it write: ${FENCE_HINT}, or pass --allow-shared-statistics to accept that`);
  }
  // Random, so that role names (visible to every role in pg_roles) reveal no community.
  const role = `billing_op_${crypto.randomBytes(8).toString('hex')}`;
  const password = crypto.randomBytes(24).toString('base64url');
  const client = await pool.connect();
  try {
    await client.query('begin');
    const community = await client.query('select 1 from billing.communities where id = $1 for update', [communityId]);
    if (community.rowCount === 0) throw new Error(`no community ${communityId}`);
    const existing = await client.query<{ role_name: string }>('select role_name from billing_private.operator_roles where community_id = $1', [communityId]);
    if (existing.rows[0]) throw new Error(`community ${communityId} already has SQL access (${existing.rows[0].role_name}); revoke it first`);
    const id = pg.escapeIdentifier(role);
    await client.query(`create role ${id} login inherit nocreatedb nocreaterole connection limit ${OPERATOR_CONNECTION_LIMIT} `
      + `password ${client.escapeLiteral(scramVerifier(password))} in role billing_operator`);
    await client.query(`alter role ${id} set statement_timeout = ${client.escapeLiteral(OPERATOR_STATEMENT_TIMEOUT)}`);
    await client.query(`alter role ${id} set default_transaction_read_only = on`);
    const { rows } = await client.query<{ created_at: string }>(
      'insert into billing_private.operator_roles (role_name, community_id) values ($1, $2) returning billing.iso(created_at) as created_at',
      [role, communityId]);
    await client.query('commit');
    return { community_id: communityId, role, created_at: rows[0].created_at, connection_string: operatorUrl(ownerUrl, role, password) };
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** Drops the community's operator logins (and ends their sessions). */
export async function revokeSqlAccess(pool: pg.Pool, communityId: string): Promise<{ community_id: string; revoked: string[] }> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query<{ role_name: string; oid: number | null }>(
      `delete from billing_private.operator_roles o where o.community_id = $1
       returning o.role_name, (select r.oid::int from pg_roles r where r.rolname = o.role_name) as oid`, [communityId]);
    for (const { role_name } of rows) {
      await client.query(`drop role if exists ${pg.escapeIdentifier(role_name)}`);
    }
    await client.query('commit');
    // A dropped role's open sessions would go on: end them (by oid: pg_stat_activity no
    // longer names a dropped role). Needs the right to signal them (the owner created them).
    const oids = rows.map((r) => r.oid).filter((o): o is number => o !== null);
    if (oids.length) {
      await pool.query('select pg_terminate_backend(pid) from pg_stat_activity where usesysid = any ($1::oid[])', [oids]).catch(() => {});
    }
    return { community_id: communityId, revoked: rows.map((r) => r.role_name) };
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

export async function listSqlAccess(pool: pg.Pool): Promise<{ data: SqlAccess[] }> {
  const { rows } = await pool.query<SqlAccess>(
    `select community_id, role_name as role, billing.iso(created_at) as created_at
     from billing_private.operator_roles order by community_id, role_name`);
  return { data: rows };
}
