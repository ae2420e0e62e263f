// graphile-worker task: reconciliation of platform connections (issue 29,
// src/platforms/reconcile.ts). Hourly, the cron's job (no connection in its payload)
// queues one job per connection with a benefit (billing_private.platform_reconcile_enqueue,
// job key reconcile:<community>:<connection>); each of those reads its platform's state
// and repairs drift, queueing members' delivery jobs. Registered, with its cron, only by
// a worker that runs platform deliveries (worker/index.ts). A platform's refusal or
// failure is logged and waits for the next hour; only a database failure fails the job.
import type { Task } from 'graphile-worker';
import { reconcileConnection, type ReconcileConnection } from '../../src/platforms/reconcile';
import type { PlatformClients } from '../../src/platforms/platform-clients';

export const platformReconcileCron = '17 * * * * platform_connections__reconcile ?max=1';

interface Payload { community_id?: unknown; platform_config_id?: unknown }

export function makePlatformReconcileTask(clients: PlatformClients, tokenOf: (c: ReconcileConnection) => string | null,
  opts: { pageSize?: number } = {}): Task {
  return async (payload, helpers) => {
    const p = (typeof payload === 'object' && payload !== null ? payload : {}) as Payload;
    const community = typeof p.community_id === 'string' ? p.community_id : null;
    if (typeof p.platform_config_id !== 'string' || community === null) {
      const { rows } = await helpers.query<{ n: number }>('select billing_private.platform_reconcile_enqueue($1) as n', [community]);
      helpers.logger.info(`queued ${rows[0].n} platform reconciliations`);
      return;
    }
    const pcfg = p.platform_config_id;
    // One pooled connection per statement, not one held while the platform's rate
    // limits are waited out.
    const db = { query: <R>(text: string, values?: unknown[]) => helpers.query<R & Record<string, unknown>>(text, values) };
    const summary = await reconcileConnection(db, clients, tokenOf, community, pcfg, { pageSize: opts.pageSize });
    if (!summary) return;
    const { errors, ...counts } = summary;
    // Ids and counts only: no platform user id, no token.
    if (errors.length > 0) helpers.logger.warn(`reconciliation ${JSON.stringify(counts)}: ${errors.join(' ')}`);
    else helpers.logger.info(`reconciliation ${JSON.stringify(counts)}`);
  };
}
