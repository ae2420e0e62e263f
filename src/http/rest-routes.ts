// The REST adapter: /v1 routes generated from the operations registry, the OpenAPI
// document, and the answer to every request no other route took. It translates HTTP
// to Executor.run and outcomes to JSON; it holds no business rule.
import express, { NextFunction, Request, Response } from 'express';
import { API_VERSION } from '../core/api-version';
import { ApiError } from '../core/errors';
import type { Operation } from '../domain/operation';
import { operations } from '../operations';
import { Executor, problemOutcome, unavailableOutcome } from '../operations/executor';
import { callerOf, sendOutcome } from '../web/express-io';
import { JsonTooDeepError, verifyJsonBody } from '../web/json-body';
import { requestLog, routeTemplate } from '../web/observe';
import { buildOpenApi } from './openapi';

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

/**
 * Mounts /v1 and, after it, the not-found answer and the error handler of the whole
 * app, so mount it last.
 */
export function mountRestApi(app: express.Express, executor: Executor): void {
  // Version pinning: a request may send Api-Version; an unknown one is refused.
  app.use('/v1', async (req, res, next) => {
    const pinned = req.header('api-version');
    if (pinned !== undefined && pinned !== API_VERSION) {
      return fail(req, res, new ApiError('invalid_request', `Unknown Api-Version "${pinned}"; this server speaks ${API_VERSION}.`, { status: 400, extra: { param: 'Api-Version' } }), null);
    }
    next();
  });

  // JSON is UTF-8 (RFC 8259 8.1): other bytes are refused, not decoded to U+FFFD; and
  // it nests at most MAX_JSON_DEPTH levels (src/web/json-body.ts).
  app.use('/v1', express.json({ limit: '100kb', type: () => true, strict: false, verify: verifyJsonBody }));

  async function fail(req: Request, res: Response, err: ApiError, scope: string | null) {
    try {
      const auth = await executor.authenticateOnly(callerOf(req), scope);
      if ('status' in auth) return sendOutcome(res, auth);
      return sendOutcome(res, problemOutcome(err, auth));
    } catch (failure) {
      return sendOutcome(res, unavailableOutcome(failure) ?? problemOutcome(new ApiError('internal_error', 'An unexpected error occurred.')));
    }
  }

  const openapi = buildOpenApi(operations);
  for (const op of [...operations].sort(routeOrder)) {
    const route = op.path.replace(/\{(\w+)\}/g, ':$1');
    const method = op.method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete';
    app[method](route, async (req: Request, res: Response, next: NextFunction) => {
      try {
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

  // A known path with a method it does not take: 405 with Allow (RFC 9110 15.5.6),
  // after authentication and a rate token like any other answer. OPTIONS lists them.
  const allowed = new Map<string, Set<string>>();
  for (const op of [...operations].sort(routeOrder)) {
    const route = op.path.replace(/\{(\w+)\}/g, ':$1');
    const methods = allowed.get(route) ?? new Set<string>();
    methods.add(op.method);
    if (op.method === 'GET') methods.add('HEAD');
    allowed.set(route, methods);
  }
  allowed.set('/v1/openapi.json', new Set(['GET', 'HEAD']));
  for (const [route, methods] of allowed) {
    const allow = [...methods].join(', ');
    app.all(route, (req: Request, res: Response) => {
      res.setHeader('Allow', allow);
      if (req.method === 'OPTIONS') return void res.status(204).end();
      void fail(req, res, new ApiError('method_not_allowed', `${req.method} is not allowed on ${req.path}; allowed: ${allow}.`), null);
    });
  }

  app.use((req: Request, res: Response) => {
    void fail(req, res, new ApiError('not_found', `No route ${req.method} ${req.path}.`), null);
  });

  // Body parser failures and anything unexpected: never a bare 500 page.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number };
    if (e?.type === 'entity.parse.failed' || e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
      return void fail(req, res, new ApiError('invalid_request', 'The request body is not valid JSON.', { status: 400 }), null);
    }
    // Also the answer for /mcp and /graphql bodies, which pass through this handler.
    if (err instanceof JsonTooDeepError) {
      return void fail(req, res, new ApiError('invalid_request', err.message, { status: 400 }), null);
    }
    if (e?.type === 'entity.verify.failed') {
      return void fail(req, res, new ApiError('invalid_request', 'The request body is not valid UTF-8.', { status: 400 }), null);
    }
    if (e?.type === 'entity.too.large') {
      return void fail(req, res, new ApiError('payload_too_large', 'The request body is larger than 100 kB.'), null);
    }
    if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
      return void fail(req, res, new ApiError('invalid_request', 'The request could not be read.', { status: 400 }), null);
    }
    // The database is unreachable (GraphQL's authentication, a provider route): 503
    // with Retry-After, and the access log line names the cause; no stack per request.
    const unavailable = unavailableOutcome(err);
    if (unavailable) return void sendOutcome(res, unavailable);
    // The stack goes to the log only; the response says nothing of it.
    requestLog(req).error({ err, method: req.method, route: routeTemplate(req) }, 'unexpected error');
    sendOutcome(res, problemOutcome(new ApiError('internal_error', 'An unexpected error occurred.')));
  });

}
