// /healthz (the process answers) and /readyz (start-up is complete, and the database
// answers and has every committed migration): for load balancers and orchestrators, no
// key needed.
import type express from 'express';
import type pg from 'pg';
import { ApiError, DATABASE_RETRY_AFTER_SECONDS, resolveProblemType } from '../core/errors';
import { baseUrlOf } from '../web/express-io';
import { committedMigrations, pendingMigrations } from '../db/migration-status';

/** started: whether the process finished starting (src/main.ts: worker running, banner printed). */
export function mountHealthRoutes(app: express.Express, ownerPool: pg.Pool, started: () => boolean = () => true): void {
  app.get('/healthz', (_req, res) => { res.json({ status: 'ok' }); });
  const committed = committedMigrations();
  app.get('/readyz', async (_req, res) => {
    const unavailable = (detail: string) =>
      res.status(503).setHeader('Retry-After', String(DATABASE_RETRY_AFTER_SECONDS))
        .type('application/problem+json').send(JSON.stringify(resolveProblemType(new ApiError('service_unavailable', detail).toProblem(), baseUrlOf(res))));
    if (!started()) return unavailable('The service is starting.');
    let pending: string[];
    try {
      pending = await pendingMigrations(ownerPool, committed);
    } catch {
      return unavailable('The database is not reachable.');
    }
    if (pending.length > 0) return unavailable(`The database lacks migrations: ${pending.join(', ')}.`);
    res.json({ status: 'ready' });
  });
}
