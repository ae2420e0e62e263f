// Every minute: folds the overview rollup's appended deltas into one row per community,
// day and currency (billing_private.analytics_compact, 48-analytics.sql), so the
// dashboard's overview sums a few hundred rows whatever was written since.
import type { Task } from 'graphile-worker';

export const analyticsCompact: Task = async (_payload, helpers) => {
  const { rows } = await helpers.query<{ folded: number }>('select billing_private.analytics_compact() as folded');
  if (rows[0].folded > 0) helpers.logger.debug(`folded ${rows[0].folded} analytics deltas`);
};

/** graphile-worker crontab line: every minute; a missed run is done by the next. */
export const analyticsCompactCron = '* * * * * analytics__compact ?max=1';
