// Applies graphile-migrate migrations: the committed ones, then (outside production)
// the current/ directory that is still being written.
import path from 'node:path';
import type { Settings } from 'graphile-migrate';
import type { Logger as WorkerLogger } from 'graphile-worker';
import { packageRoot } from '../core/config';
import { log } from '../core/log';

export const migrationsFolder = path.join(packageRoot, 'db/migrations');

export function migrationSettings(connectionString: string): Settings {
  return {
    connectionString,
    rootConnectionString: withDatabase(connectionString, 'template1'),
    migrationsFolder,
    logger: quietLogger(),
  };
}

export function withDatabase(connectionString: string, database: string): string {
  const url = new URL(connectionString);
  url.pathname = `/${database}`;
  return url.toString();
}

function quietLogger(): Settings['logger'] {
  // graphile-migrate logs every step; keep only warnings and errors.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Logger } = require('@graphile/logger') as typeof import('@graphile/logger');
  return new Logger(() => (level: string, message: string) => {
    if (level === 'error') log.error({ component: 'migrate' }, message);
    else if (level === 'warning') log.warn({ component: 'migrate' }, message);
  });
}

// graphile-migrate and graphile-worker are loaded when used, not with this module:
// src/db/database.ts needs withDatabase before the service's start-up loads anything
// heavy (src/main.ts).
/* eslint-disable @typescript-eslint/no-require-imports */
const graphileMigrate = () => require('graphile-migrate') as typeof import('graphile-migrate');
const graphileWorker = () => require('graphile-worker') as typeof import('graphile-worker');
/* eslint-enable @typescript-eslint/no-require-imports */

function quietWorkerLogger(): WorkerLogger {
  const { Logger } = graphileWorker();
  return new Logger(() => (level: string, message: string) => {
    if (level === 'error') log.error({ component: 'worker-migrate' }, message);
    else if (level === 'warning') log.warn({ component: 'worker-migrate' }, message);
  });
}

export async function applyMigrations(connectionString: string, opts: { includeCurrent?: boolean } = {}): Promise<void> {
  const settings = migrationSettings(connectionString);
  // Roles are shared by every database of a server, and our migrations grant and alter
  // them: two databases migrating at once on one server (tests, two services) can meet
  // on the same role row, and PostgreSQL then fails one with "tuple concurrently
  // updated". Each migration is one transaction, so the loser is rolled back whole and
  // can simply run again.
  for (let attempt = 1; ; attempt++) {
    try {
      // Our migrations call into graphile_worker (enqueue triggers, add_jobs), so its
      // schema is installed (or upgraded) first, by graphile-worker itself.
      await graphileWorker().runMigrations({ connectionString, logger: quietWorkerLogger() });
      await graphileMigrate().migrate(settings);
      if (opts.includeCurrent ?? process.env.NODE_ENV !== 'production') {
        await graphileMigrate().watch(settings, true);
      }
      return;
    } catch (err) {
      if (attempt >= 5 || !/tuple concurrently (updated|deleted)/.test((err as Error).message ?? '')) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100 + Math.floor(Math.random() * 400)));
    }
  }
}
