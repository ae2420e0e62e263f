// One transaction as a community, the way the service runs a request: the tenant
// setting app.community_id (row-level security reads it), optionally a role
// (`set local role`) and the key's scopes (app.scopes), all local to the transaction.
import type pg from 'pg';

export interface AsTenantOptions {
  /** The role for the transaction, e.g. 'billing_api' or 'billing_writer' (from an owner pool). */
  role?: string;
  /** app.scopes as the executor sets it: space-separated scopes, e.g. 'analytics:read'. */
  scopes?: string;
  /** Commit when fn resolves. By default the transaction is rolled back and leaves nothing. */
  commit?: boolean;
  /**
   * 'repeatable read': every statement of fn reads one snapshot, for a test that compares
   * two reads of the same state while other files' workers may commit in between.
   */
  isolation?: 'repeatable read';
}

/**
 * Runs fn on one client of pool inside a transaction as community communityId (null: no
 * community set). Rolled back afterwards unless opts.commit, and always when fn throws.
 */
export async function asTenant<T>(pool: pg.Pool, communityId: string | null, fn: (client: pg.PoolClient) => Promise<T>, opts: AsTenantOptions = {}): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(opts.isolation ? `begin isolation level ${opts.isolation}` : 'begin');
    if (opts.role !== undefined) await client.query(`select set_config('role', $1, true)`, [opts.role]);
    if (communityId !== null) await client.query(`select set_config('app.community_id', $1, true)`, [communityId]);
    if (opts.scopes !== undefined) await client.query(`select set_config('app.scopes', $1, true)`, [opts.scopes]);
    const out = await fn(client);
    await client.query(opts.commit ? 'commit' : 'rollback');
    return out;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
