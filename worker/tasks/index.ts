// graphile-worker tasks, one file each (worker/tasks/<table>__<action>.ts).
// Add one line per task.
import type { TaskList } from 'graphile-worker';
import { webhookDeliveriesSend } from './webhook_deliveries__send';
import { subscriptionsApplyDue } from './subscriptions__apply_due';
import { billingPurgeExpired } from './billing__purge_expired';
import { analyticsCompact } from './analytics__compact';

export const taskList: TaskList = {
  webhook_deliveries__send: webhookDeliveriesSend,
  subscriptions__apply_due: subscriptionsApplyDue,
  billing__purge_expired: billingPurgeExpired,
  analytics__compact: analyticsCompact,
};
