// Periodic: applies everything that became due (expired checkouts, period ends,
// scheduled switches, trial ends, cancellations, purchase expiry through the ledger
// sweep), one job per community, so one community's failure does not hold back the
// others and several workers share a storm (issue 32). The crontab's run (no
// community_id) only fans out: one job per community, keyed
// `subscriptions__apply_due:<community id>` (graphile-worker's job_key, mode
// preserve_run_at), so a community is never queued twice: a run still waiting absorbs
// the next minute's; one running leaves room for one more behind it (its key moves to
// the new job); one that failed for good is reset and runs again. Within a community, subscriptions go in batches of BATCH, one transaction
// each (billing_private.worker_apply_due_batch), then the rest in one more
// (worker_apply_due_finish): a storm of renewals commits as it goes, holds few rows
// at a time and never outlives the worker's statement_timeout. A worker stopped
// mid-sweep loses only its open batch; the next run finds those subscriptions still
// due. Scheduled by the worker's crontab.
import type { Task } from 'graphile-worker';

export const BATCH = 500;

/** The job key of a community's run (graphile-worker job_key). */
export const applyDueJobKey = (communityId: string) => `subscriptions__apply_due:${communityId}`;

export const subscriptionsApplyDue: Task = async (payload, helpers) => {
  // A payload {community_id} runs one community; the cron job's fans out.
  const only = typeof (payload as { community_id?: unknown } | null)?.community_id === 'string'
    ? (payload as { community_id: string }).community_id : null;
  if (only === null) {
    // One statement: a job per community, none for a community already waiting.
    await helpers.query(
      `select graphile_worker.add_job('subscriptions__apply_due', json_build_object('community_id', c.id),
         job_key => 'subscriptions__apply_due:' || c.id, job_key_mode => 'preserve_run_at')
       from billing_private.worker_community_ids(null) as c(id)`);
    return;
  }
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
