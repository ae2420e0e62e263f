// The REST adapter: routes generated from the operations registry. It translates
// HTTP to Executor.run and outcomes to JSON; it holds no business rule.
import fs from 'node:fs';
import path from 'node:path';
import express, { NextFunction, Request, Response } from 'express';
import type pg from 'pg';
import type { Config } from '../config';
import { API_VERSION, Caller, Executor, Outcome, problemOutcome, RateLimitInfo } from '../operations/execute';
import type { Operation, Services } from '../operations/registry';
import { operations } from '../operations';
import { buildOpenApi } from './openapi';
import { ApiError } from './problems';
import { mountPaymentRoutes } from '../payments';
import { mountMcp } from '../mcp';
import { createServices } from '../services';
import { migrationsFolder } from '../db/migrate';

export interface AppOptions {
  config: Config;
  apiPool: pg.Pool;
  ownerPool: pg.Pool;
  services?: Services;
  /** Extra routers mounted before the API (MCP, GraphQL, provider webhooks, sandbox pages). */
  mount?: (app: express.Express, executor: Executor) => void;
}

export function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer ([^\s]+)$/.exec(header);
  return m ? m[1] : null;
}

function setRateHeaders(res: Response, rl: RateLimitInfo | undefined, retry: boolean) {
  if (!rl) return;
  res.setHeader('RateLimit-Limit', String(rl.limit));
  res.setHeader('RateLimit-Remaining', String(rl.remaining));
  res.setHeader('RateLimit-Reset', String(rl.reset));
  if (retry) res.setHeader('Retry-After', String(rl.retry_after));
}

export function sendOutcome(res: Response, outcome: Outcome) {
  res.setHeader('Api-Version', API_VERSION);
  setRateHeaders(res, outcome.rateLimit, outcome.status === 429);
  if (outcome.replayed) res.setHeader('Idempotent-Replayed', 'true');
  res.status(outcome.status);
  if (outcome.status === 204 || outcome.body === undefined) {
    res.end();
    return;
  }
  res.type(outcome.problem ? 'application/problem+json' : 'application/json');
  res.send(JSON.stringify(outcome.body));
}

/** Route order: literal segments before parameters (/members/lookup before /members/{id}). */
function routeOrder(a: Operation, b: Operation): number {
  const sa = a.path.split('/');
  const sb = b.path.split('/');
  for (let i = 0; i < Math.min(sa.length, sb.length); i++) {
    const pa = sa[i].startsWith('{');
    const pb = sb[i].startsWith('{');
    if (pa !== pb) return pa ? 1 : -1;
  }
  return sa.length - sb.length;
}

export function callerOf(req: Request): Caller {
  return { key: bearerKey(req.header('authorization')), ip: req.ip ?? req.socket.remoteAddress ?? 'unknown' };
}

/**
 * The committed migrations, by the hash graphile-migrate writes in each file's header
 * and records in graphile_migrate.migrations when it applies the file.
 */
function committedMigrations(): { file: string; hash: string }[] {
  const dir = path.join(migrationsFolder, 'committed');
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => f.endsWith('.sql')).sort().map((file) => {
    const head = fs.readFileSync(path.join(dir, file), 'utf8').slice(0, 500);
    const hash = /^--! Hash: (\S+)$/m.exec(head)?.[1];
    if (!hash) throw new Error(`migration ${file} has no --! Hash header`);
    return { file, hash };
  });
}

export function createApp(opts: AppOptions) {
  const { config, apiPool, ownerPool } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxy);
  app.set('query parser', 'simple');
  let baseUrl = config.publicBaseUrl ?? `http://localhost:${config.port}`;
  const deps = { config, apiPool, ownerPool };
  const executor = new Executor(apiPool, config, opts.services ?? createServices(deps), () => baseUrl);
  const setBaseUrl = (url: string) => { if (!config.publicBaseUrl) baseUrl = url; };

  app.get('/healthz', (_req, res) => { res.json({ status: 'ok' }); });
  // Ready when the database answers and every committed migration is recorded.
  const committed = committedMigrations();
  app.get('/readyz', async (_req, res) => {
    const unavailable = (detail: string) =>
      res.status(503).type('application/problem+json').send(JSON.stringify(new ApiError('service_unavailable', detail).toProblem()));
    let applied: Set<string>;
    try {
      if (committed.length === 0) {
        await ownerPool.query('select 1');
        applied = new Set();
      } else {
        const { rows } = await ownerPool.query<{ hash: string }>('select hash from graphile_migrate.migrations')
          .catch((err: { code?: string }) => {
            if (err.code === '42P01') return { rows: [] }; // never migrated
            throw err;
          });
        applied = new Set(rows.map((r) => r.hash));
      }
    } catch {
      return unavailable('The database is not reachable.');
    }
    const pending = committed.filter((m) => !applied.has(m.hash)).map((m) => m.file);
    if (pending.length > 0) return unavailable(`The database lacks migrations: ${pending.join(', ')}.`);
    res.json({ status: 'ready' });
  });

  mountPaymentRoutes(app, executor, deps);
  mountMcp(app, executor);
  opts.mount?.(app, executor);

  // Version pinning: a request may send Api-Version; an unknown one is refused.
  app.use('/v1', async (req, res, next) => {
    const pinned = req.header('api-version');
    if (pinned !== undefined && pinned !== API_VERSION) {
      return fail(req, res, new ApiError('invalid_request', `Unknown Api-Version "${pinned}"; this server speaks ${API_VERSION}.`, { status: 400, extra: { param: 'Api-Version' } }), null);
    }
    next();
  });

  app.use('/v1', express.json({ limit: '100kb', type: () => true, strict: false }));

  async function fail(req: Request, res: Response, err: ApiError, scope: string | null) {
    try {
      const auth = await executor.authenticateOnly(callerOf(req), scope);
      if ('status' in auth) return sendOutcome(res, auth);
      return sendOutcome(res, problemOutcome(err, auth));
    } catch {
      return sendOutcome(res, problemOutcome(new ApiError('internal_error', 'An unexpected error occurred.')));
    }
  }

  const openapi = buildOpenApi(operations);
  for (const op of [...operations].sort(routeOrder)) {
    const route = op.path.replace(/\{(\w+)\}/g, ':$1');
    const method = op.method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete';
    app[method](route, async (req: Request, res: Response, next: NextFunction) => {
      try {
        setBaseUrl(`${req.protocol}://${req.get('host')}`);
        const idempotencyKey = req.header('idempotency-key');
        if (idempotencyKey !== undefined && (idempotencyKey.length < 1 || idempotencyKey.length > 255)) {
          return fail(req, res, new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 characters.', { status: 400, extra: { param: 'Idempotency-Key' } }), op.scope);
        }
        const hasBody = req.body !== undefined && !(typeof req.body === 'object' && req.body !== null && Object.keys(req.body).length === 0 && (req.headers['content-length'] ?? '0') === '0');
        const outcome = await executor.run(op, callerOf(req), {
          params: req.params as Record<string, unknown>,
          query: req.query as Record<string, unknown>,
          body: hasBody ? req.body : undefined,
          idempotencyKey,
        });
        sendOutcome(res, outcome);
      } catch (err) {
        next(err);
      }
    });
  }

  app.get('/v1/openapi.json', (_req, res) => { res.json(openapi); });

  app.use((req: Request, res: Response) => {
    void fail(req, res, new ApiError('not_found', `No route ${req.method} ${req.path}.`), null);
  });

  // Body parser failures and anything unexpected: never a bare 500 page.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number };
    if (e?.type === 'entity.parse.failed' || e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
      return void fail(req, res, new ApiError('invalid_request', 'The request body is not valid JSON.', { status: 400 }), null);
    }
    if (e?.type === 'entity.too.large') {
      return void fail(req, res, new ApiError('invalid_request', 'The request body is larger than 100 kB.', { status: 400 }), null);
    }
    if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
      return void fail(req, res, new ApiError('invalid_request', 'The request could not be read.', { status: 400 }), null);
    }
    process.stderr.write(`[api] ${req.method} ${req.path}: ${(err as Error)?.stack ?? String(err)}\n`);
    sendOutcome(res, problemOutcome(new ApiError('internal_error', 'An unexpected error occurred.')));
  });

  return { app, executor };
}
