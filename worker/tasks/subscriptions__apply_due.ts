// Periodic: applies everything that became due (expired checkouts, period ends,
// scheduled switches, trial ends, cancellations, purchase expiry through the ledger
// sweep), community by community, so one community's failure does not hold back the
// others. Within a community, subscriptions go in batches of BATCH, one transaction
// each (billing_private.worker_apply_due_batch), then the rest in one more
// (worker_apply_due_finish): a storm of renewals commits as it goes, holds few rows
// at a time and never outlives the worker's statement_timeout. A worker stopped
// mid-sweep loses only its open batch; the next run finds those subscriptions still
// due. Scheduled by the worker's crontab.
import type { Task } from 'graphile-worker';

export const BATCH = 500;

export const subscriptionsApplyDue: Task = async (payload, helpers) => {
  // The cron job runs for every community; a payload {community_id} limits a manual run.
  const only = typeof (payload as { community_id?: unknown } | null)?.community_id === 'string'
    ? (payload as { community_id: string }).community_id : null;
  // A manual run may ask for smaller batches ({batch: n}, 1 to BATCH).
  const asked = Number((payload as { batch?: unknown } | null)?.batch);
  const size = Number.isInteger(asked) && asked >= 1 && asked <= BATCH ? asked : BATCH;
  const failures: string[] = [];
  await helpers.withPgClient(async (client) => {
    const { rows } = await client.query<{ id: string }>(
      'select id from billing_private.worker_community_ids($1) as id', [only]);
    for (const { id } of rows) {
      try {
        let after: string | null = null;
        for (;;) {
          const batch: { rows: { r: { last_id: string | null; more: boolean } }[] } = await client.query(
            'select billing_private.worker_apply_due_batch($1, $2, $3) as r', [id, after, size]);
          const { more, last_id: last } = batch.rows[0].r;
          if (!more) break;
          after = last;
        }
        await client.query('select billing_private.worker_apply_due_finish($1)', [id]);
      } catch (err) {
        failures.push(`${id}: ${(err as Error).message}`);
      }
    }
  });
  if (failures.length > 0) throw new Error(`apply_due failed for ${failures.length} communities: ${failures.join('; ')}`);
};

/** graphile-worker crontab line: every minute (a missed minute is caught up by the next). */
export const subscriptionsApplyDueCron = '* * * * * subscriptions__apply_due ?max=1';
