// Observability at the HTTP edge: a request id (X-Request-Id, validated or generated,
// echoed in the response), one access log line per request, HTTP metrics, and the
// token-protected /metrics endpoint. Routes are reported by template
// (/v1/subscriptions/{id}), never by raw path: paths carry ids and pay tokens.
import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type express from 'express';
import { accessLog, log, Logger } from '../core/log';
import { httpDuration, httpRequests, scrape } from '../core/metrics';

/** Printable ASCII, 1 to 128 characters. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

export interface RequestObservation {
  requestId: string;
  /** The request's logger (its request_id bound), made on first use. */
  readonly log: Logger;
  /** Set by the executor once a key is recognised. */
  communityId?: string;
  keyId?: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    observation?: RequestObservation;
  }
}

/** The matched route as a template: /v1/members/:id -> /v1/members/{id}; unmatched when none. */
export function routeTemplate(req: Request): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof path !== 'string') return 'unmatched';
  return `${req.baseUrl ?? ''}${path}`.replace(/:(\w+)/g, '{$1}');
}

export function observeRequests(): express.RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const sent = req.header('x-request-id');
    const requestId = sent !== undefined && REQUEST_ID.test(sent) ? sent : crypto.randomUUID();
    let child: Logger | null = null;
    const observation: RequestObservation = { requestId, get log() { return child ??= log.child({ request_id: requestId }); } };
    req.observation = observation;
    res.setHeader('X-Request-Id', requestId);
    let done = false;
    const finish = (aborted: boolean) => {
      if (done) return;
      done = true;
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeTemplate(req);
      const status = aborted && !res.headersSent ? 499 : res.statusCode;
      httpRequests.inc({ route, method: req.method, status: String(status) });
      httpDuration.observe({ route, method: req.method }, seconds);
      const fields = {
        request_id: requestId,
        kind: 'access',
        method: req.method,
        route,
        status,
        duration_ms: Math.round(seconds * 1e6) / 1e3,
        community_id: observation.communityId ?? null,
        key_id: observation.keyId ?? null,
        ...(aborted ? { aborted: true } : {}),
        ...(typeof res.locals.cause === 'string' ? { cause: res.locals.cause } : {}),
      };
      if (status >= 500) accessLog.error(fields, 'request');
      else accessLog.info(fields, 'request');
    };
    res.on('finish', () => finish(false));
    res.on('close', () => finish(!res.writableFinished));
    next();
  };
}

/** The request's logger (with its request id), or the root logger outside a request. */
export function requestLog(req: Request): Logger {
  return req.observation?.log ?? log;
}

/**
 * GET /metrics: the Prometheus text for `Authorization: Bearer <token>`; 401 with a
 * wrong or missing token; 404 when no token is configured (metrics off).
 */
export function mountMetrics(app: express.Express, token: string | null): void {
  const expected = token ? crypto.createHash('sha256').update(token).digest() : null;
  app.get('/metrics', async (req: Request, res: Response, next: NextFunction) => {
    if (!expected) {
      res.status(404).type('text/plain').send('metrics: off (METRICS_TOKEN is not set)\n');
      return;
    }
    const m = /^Bearer (\S+)$/.exec(req.header('authorization') ?? '');
    const given = crypto.createHash('sha256').update(m ? m[1] : '').digest();
    if (!m || !crypto.timingSafeEqual(given, expected)) {
      res.status(401).setHeader('WWW-Authenticate', 'Bearer realm="metrics"').type('text/plain').send('metrics: bearer token required\n');
      return;
    }
    try {
      const { contentType, body } = await scrape();
      res.setHeader('Content-Type', contentType);
      res.send(body);
    } catch (err) {
      next(err);
    }
  });
}
