// Work outside an API key's request (the sandbox page, the CLI, Stripe's webhooks, the
// worker): one owner transaction with the community set, so billing.now() reads that
// community's clock and triggers see its rows. And the retry of a whole transaction
// that PostgreSQL rolled back for a deadlock or a serialization failure.
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

/** Deadlock (40P01) and serialization failure (40001): the transaction was rolled back whole. */
function isTransientConflict(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === '40P01' || code === '40001';
}

export const CONFLICT_ATTEMPTS = 5;

/**
 * Runs one whole request transaction again when PostgreSQL rolled it back for a
 * deadlock or a serialization failure, a bounded number of times with a short random
 * pause. Nothing of the failed attempt was committed (its idempotency record and
 * in-flight lock included), so a retry is the same request arriving again.
 */
export async function retryConflicts<T>(attempt: () => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isTransientConflict(err) || i >= CONFLICT_ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * i));
    }
  }
}
