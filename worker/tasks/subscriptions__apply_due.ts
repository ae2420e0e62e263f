// Periodic: applies everything that became due (expired checkouts, period ends,
// scheduled switches, trial ends, cancellations, purchase expiry through the ledger
// sweep), one transaction per community (billing.apply_due, through the worker's
// door billing_private.worker_apply_due), so one community's failure does not hold
// back the others. Scheduled by the worker's crontab.
import type { Task } from 'graphile-worker';

export const subscriptionsApplyDue: Task = async (payload, helpers) => {
  // The cron job runs for every community; a payload {community_id} limits a manual run.
  const only = typeof (payload as { community_id?: unknown } | null)?.community_id === 'string'
    ? (payload as { community_id: string }).community_id : null;
  const failures: string[] = [];
  await helpers.withPgClient(async (client) => {
    const { rows } = await client.query<{ id: string }>(
      'select id from billing_private.worker_community_ids($1) as id', [only]);
    for (const { id } of rows) {
      try {
        await client.query('begin');
        await client.query('select billing_private.worker_apply_due($1)', [id]);
        await client.query('commit');
      } catch (err) {
        await client.query('rollback').catch(() => {});
        failures.push(`${id}: ${(err as Error).message}`);
      }
    }
  });
  if (failures.length > 0) throw new Error(`apply_due failed for ${failures.length} communities: ${failures.join('; ')}`);
};

/** graphile-worker crontab line: every minute (a missed minute is caught up by the next). */
export const subscriptionsApplyDueCron = '* * * * * subscriptions__apply_due ?max=1';
