// Periodic (hourly): purges expired idempotency records, link codes, portal sessions,
// old webhook attempts and finished deliveries, idle rate buckets
// (billing_private.purge_expired, part 090-retention of the migrations).
import type { Task } from 'graphile-worker';

export const billingPurgeExpired: Task = async (_payload, helpers) => {
  const { rows } = await helpers.query<{ purged: Record<string, number> }>('select billing_private.purge_expired() as purged');
  helpers.logger.info(`purged ${JSON.stringify(rows[0].purged)}`);
};

export const billingPurgeExpiredCron = '7 * * * * billing__purge_expired ?max=1';
