// Work outside an API key's request (the sandbox page, the CLI, Stripe's webhooks, the
// worker): one owner transaction with the community set, so billing.now() reads that
// community's clock and triggers see its rows.
import type pg from 'pg';

export async function inCommunity<T>(pool: pg.Pool, communityId: string, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(`select set_config('app.community_id', $1, true)`, [communityId]);
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
